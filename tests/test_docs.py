"""The documentation pages keep their promise: each opens with a title and a runnable example, and that example runs.

A page's first code block is its example. A python block is run from the repository root (with the default model
when it loads one: those runs are `slow`); the framework snippets of docs/frameworks.md are run by
tests/integrations/test_framework_snippets.py. A bash block is checked command by command: `contextembed ...` must
parse with the real command-line parser (so a renamed command, option or choice fails here), `pip install` may name
only extras that pyproject.toml defines, and `python` must run a file that exists or code that compiles.
"""

from __future__ import annotations

import argparse
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from contextembed.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md"))
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", flags=re.S | re.M)
# A python example that loads a model: `contextembed.load(...)`, the sentence-transformers class, or an adapter.
LOADS_A_MODEL = re.compile(r"contextembed\.load\(|ContextEmbedSentenceTransformer\(|Contextual\w+\(")
EXTRAS = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"])


def first_block(page: Path) -> tuple[str, str]:
    """The language and code of the page's first fenced block (`("", "")` when it has none)."""
    match = BLOCK.search(page.read_text(encoding="utf-8"))
    return (match.group(1), match.group(2)) if match else ("", "")


def shell_commands(code: str) -> list[list[str]]:
    """The commands of a bash block: continuation lines joined, comments dropped, split at `&&` and `;`."""
    commands = []
    for line in code.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        command: list[str] = []
        for word in words + [";"]:
            if word in ("&&", ";"):
                if command:
                    commands.append(command)
                command = []
            else:
                command.append(word)
    return commands


def check_contextembed_command(args: list[str], where: str) -> None:
    """`args` parse as the real parser parses them; with `--help`, the command before it exists."""
    parser = build_parser()
    if "--help" in args or "-h" in args:
        command = args[: min(args.index(h) for h in ("--help", "-h") if h in args)]
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
        if len(command) > 1 or any(c not in commands for c in command):
            pytest.fail(f"{where}: no such command")
        return
    try:
        parser.parse_args(args)
    except SystemExit:
        pytest.fail(f"{where} does not parse as a contextembed command")


def test_there_are_pages():
    assert len(PAGES) >= 10, [p.name for p in PAGES]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_opens_with_a_title_and_an_example(page):
    """A one-line title, a sentence that says what the page is about, then an example before any section."""
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# ") and not text.startswith("# \n"), f"{page.name} must open with a one-line title"
    before_sections = text.split("\n## ", 1)[0]
    assert BLOCK.search(before_sections), f"{page.name}: the first code block must come before the first section"
    language, _ = first_block(page)
    assert language in ("python", "bash"), f"{page.name}: the first block is {language!r}, not python or bash"


PYTHON_PAGES = [p for p in PAGES if first_block(p)[0] == "python"]


def run_params():
    for page in PYTHON_PAGES:
        code = first_block(page)[1]
        marks = [pytest.mark.slow] if LOADS_A_MODEL.search(code) else []
        yield pytest.param(page, marks=marks, id=page.name)


@pytest.mark.parametrize("page", list(run_params()))
def test_python_example_runs(page, request, monkeypatch):
    code = first_block(page)[1]
    if code.startswith("# framework: "):  # run, and its output checked, by test_framework_snippets.py
        snippets = (ROOT / "tests" / "integrations" / "test_framework_snippets.py").read_text(encoding="utf-8")
        assert f'"docs" / "{page.name}"' in snippets
        return
    if LOADS_A_MODEL.search(code):
        request.getfixturevalue("default_model_cache")
    monkeypatch.chdir(ROOT)
    exec(compile(code, f"docs/{page.name}, first example", "exec"), {"__name__": "__docs__"})


BASH_PAGES = [p for p in PAGES if first_block(p)[0] == "bash"]
OTHER_TOOLS = ("curl", "huggingface-cli", "hf")


@pytest.mark.parametrize("page", BASH_PAGES, ids=lambda p: p.name)
def test_bash_example_names_real_commands(page):
    commands = shell_commands(first_block(page)[1])
    assert commands, f"{page.name}: the first bash block holds no command"
    for command in commands:
        program, args = command[0], command[1:]
        if command[-1] == "&":  # a server started in the background
            args = args[:-1]
        if program in OTHER_TOOLS:  # a well-known tool around ours (a download, an HTTP call)
            continue
        assert program in ("contextembed", "pip", "python"), f"{page.name}: {shlex.join(command)}"
        if program == "contextembed":
            check_contextembed_command(args, f"{page.name}: `{shlex.join(command)}`")
        elif program == "pip":
            assert args[:1] == ["install"], f"{page.name}: {shlex.join(command)}"
            for extras in re.findall(r"contextembed\[([\w,-]+)\]", " ".join(args)):
                assert set(extras.split(",")) <= EXTRAS, f"{page.name}: {shlex.join(command)} names an unknown extra"
        elif args[:1] == ["-c"]:
            compile(args[1], f"docs/{page.name}", "exec")
        else:
            assert (ROOT / args[0]).is_file(), f"{page.name}: {shlex.join(command)} runs a file that does not exist"


def test_a_wrong_command_is_caught():
    check_contextembed_command(["train", "--help"], "train --help")
    for args in (["trian", "--help"], ["search", "x"], ["evaluate", "--precision", "int4"]):
        with pytest.raises(pytest.fail.Exception):
            check_contextembed_command(args, shlex.join(args))


def test_shell_commands_are_split_as_a_shell_would():
    code = "pip install 'a[b]'   # note\ncontextembed search \\\n  x \"a b\" && python -c 'print(1)'\n"
    assert shell_commands(code) == [["pip", "install", "a[b]"], ["contextembed", "search", "x", "a b"],
                                    ["python", "-c", "print(1)"]]
