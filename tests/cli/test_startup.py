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


def test_the_choices_are_the_librarys():
    from contextembed.backends.export import EXPORT_FORMATS, QUANTIZATIONS
    from contextembed.backends.runtime import BACKENDS
    from contextembed.chunking import CHUNKERS
    from contextembed.cli import choices
    from contextembed.encoder import DTYPES
    from contextembed.evaluation.datasets import DATASET_LAYOUTS
    from contextembed.quantization import PRECISIONS
    from contextembed.stores.sync import COMMIT_TOKENS

    assert choices.COMMIT_TOKENS == COMMIT_TOKENS
    assert (choices.BACKENDS, choices.CHUNKERS, choices.DTYPES, choices.PRECISIONS, choices.EXPORT_FORMATS,
            choices.QUANTIZATIONS, choices.DATASET_LAYOUTS) == (
        tuple(BACKENDS), tuple(CHUNKERS), tuple(DTYPES), tuple(PRECISIONS), tuple(EXPORT_FORMATS),
        tuple(QUANTIZATIONS), tuple(DATASET_LAYOUTS))


def test_a_count_is_refused_in_the_library_s_words(capsys):
    """Counts are checked by `check_count`, the library's and the server's one check (loaded only to word a refusal)."""
    from contextembed.cli import main
    from contextembed.modeling import check_count

    with pytest.raises(SystemExit):
        main(["evaluate", "--k", "0"])
    with pytest.raises(ValueError) as expected:
        check_count(0)
    assert f"argument --k: {expected.value}" in capsys.readouterr().err
