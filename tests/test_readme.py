"""The README's promises: CI runs its test command, and its usage snippet runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def bash_blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)\n```", README, flags=re.S)


def test_readme_opens_with_the_two_commands():
    main_job, tests = bash_blocks()[:2]
    assert "contextembed search examples/data/leases" in main_job
    assert tests.rstrip().endswith("python -m pytest")


def test_ci_runs_the_readme_test_command():
    tests = bash_blocks()[1]
    install_and_test = tests.split("&& ", 2)[2]  # after creating and activating the virtual environment
    assert install_and_test in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_readme_is_a_front_door():
    assert len(README.splitlines()) <= 300
    assert "SPEC.md" not in README and not re.search(r"\bbuild \d+|\bbuild\d+", README)


@pytest.mark.slow
def test_the_main_job_prints_what_the_readme_shows(default_model_cache, monkeypatch, capsys):
    """Every line of the README's (shortened) output of the main job is printed by it, in that order."""
    from contextembed.cli import main

    monkeypatch.chdir(ROOT)
    command = bash_blocks()[0].split(" && ")[-1]
    assert command.startswith("contextembed search ")
    query = re.search(r'"(.*)"', command).group(1)
    assert main(["search", "examples/data/leases", query, "--compare", "--no-progress"]) == 0
    printed = capsys.readouterr().out.splitlines()
    shown = re.search(r"The search prints \(shortened\):\n\n```\n(.*?)\n```", README, flags=re.S).group(1)
    at = 0
    for line in shown.splitlines():
        if line == "…":
            continue
        at = printed.index(line, at) + 1  # ValueError names the line the command no longer prints


@pytest.mark.slow
def test_the_search_with_evidence_prints_what_the_readme_shows(default_model_cache, monkeypatch, capsys):
    """The README's search with evidence: its command, run as written, prints every line the README shows, in order."""
    import shlex

    from contextembed.cli import main

    monkeypatch.chdir(ROOT)
    command = next(b for b in bash_blocks() if "--evidence" in b)
    argv = shlex.split(command)
    assert argv[0] == "contextembed"
    assert main([*argv[1:], "--no-progress"]) == 0
    printed = capsys.readouterr().out.splitlines()
    shown = re.search(r"The search with evidence prints \(shortened\):\n\n```\n(.*?)\n```", README, flags=re.S).group(1)
    at = 0
    for line in shown.splitlines():
        at = printed.index(line, at) + 1
    assert main([*argv[1:], "--evidence", "10", "--no-progress"]) == 0  # "The opening ... comes 10th"
    evidence = [line.split()[2] for line in capsys.readouterr().out.splitlines() if line.strip().startswith("evidence ")]
    assert "comes 10th" in README and evidence.index("0") + 1 == 10


@pytest.mark.slow
def test_usage_snippet_runs(default_model_cache, monkeypatch):
    monkeypatch.chdir(ROOT)
    snippet = re.findall(r"```python\n(.*?)```", README, flags=re.S)[0]
    namespace: dict = {}
    exec(compile(snippet, "README usage", "exec"), namespace)
    assert [v.shape for v in namespace["chunk_vectors"]] == [(3, 384), (1, 384)]
    assert namespace["doc"].embeddings.shape == (34, 384)


@pytest.mark.slow
def test_sentence_transformers_snippet_runs(default_model_cache, monkeypatch):
    monkeypatch.chdir(ROOT)
    snippet = next(b for b in re.findall(r"```python\n(.*?)```", README, flags=re.S) if "SentenceTransformer(path)" in b)
    namespace: dict = {}
    exec(compile(snippet, "README sentence-transformers", "exec"), namespace)  # every name it uses is defined in it
    assert namespace["out"].chunk_embeddings.shape[:2] == (2, 2)
