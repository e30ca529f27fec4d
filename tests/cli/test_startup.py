"""The command line starts light: `--help` and a usage error import no model stack, `python -m contextembed` is the
`contextembed` command, and the parser's choices are the library's own values."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers", "sentence_transformers", "numpy")


@pytest.mark.parametrize("argv", [["--help"], ["search", "--help"], ["train", "--help"], ["serve", "--help"],
                                  ["search"], ["evaluate", "--precision", "int4"], ["no-such-command"],
                                  ["search", "docs", "rent", "--chunker", "words"]])
def test_help_and_usage_errors_import_no_model_stack(argv):
    code = ("import sys\nfrom contextembed.cli import main\ntry:\n    main(%r)\nexcept SystemExit as exit:\n"
            "    print('exit', exit.code)\nprint(sorted(m for m in %r if m in sys.modules))" % (argv, HEAVY))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.stdout.strip().splitlines()[-1] == "[]", run.stdout + run.stderr
    assert run.stdout.strip().splitlines()[-2] == ("exit 0" if "--help" in argv else "exit 2")


def test_python_dash_m_is_the_command():
    module = subprocess.run([sys.executable, "-m", "contextembed", "--help"], capture_output=True, text=True, timeout=120)
    assert module.returncode == 0 and module.stdout.startswith("usage: contextembed")
    error = subprocess.run([sys.executable, "-m", "contextembed", "search"], capture_output=True, text=True, timeout=120)
    assert error.returncode == 2 and "the following arguments are required: path, query" in error.stderr


def test_the_parser_s_choices_are_the_library_s_own_and_import_nothing_heavy():
    """The command line reads its choices from `contextembed.choices`, where each library module reads them too: one
    definition, no copies, and loading it imports neither torch nor transformers."""
    code = ("import sys; import contextembed.choices; from contextembed.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.stdout.strip() == "[]", run.stderr
    from contextembed import choices
    from contextembed.backends.export import EXPORT_FORMATS
    from contextembed.backends.runtime import BACKENDS
    from contextembed.chunking import CHUNKERS
    from contextembed.encoder import DTYPES

    assert (CHUNKERS, DTYPES, BACKENDS, EXPORT_FORMATS) == (choices.CHUNKERS, choices.DTYPES, choices.BACKENDS,
                                                             choices.EXPORT_FORMATS)
    assert CHUNKERS is choices.CHUNKERS  # the same object: imported, not copied


def test_a_count_is_refused_in_the_library_s_words(capsys):
    """Counts are checked by `check_count`, the library's and the server's one check (loaded only to word a refusal)."""
    from contextembed.cli import main
    from contextembed.modeling import check_count

    with pytest.raises(SystemExit):
        main(["evaluate", "--k", "0"])
    with pytest.raises(ValueError) as expected:
        check_count(0)
    assert f"argument --k: {expected.value}" in capsys.readouterr().err
