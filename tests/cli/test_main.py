"""The `contextembed` command, run in-process on the real default model and the example corpus."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from contextembed.cli import main
from contextembed.stores.index import IndexStore


LEASES = Path(__file__).resolve().parents[2] / "examples" / "data" / "leases"
QUERY = "Who pays for electricity at 88 Ocean Drive?"


def first_result(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("1. "))


@pytest.mark.slow  # the packaged default model
def test_search_folder(default_model_cache, capsys):
    assert main(["search", str(LEASES), QUERY, "--compare", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert first_result(out).startswith("1. lease-ocean-drive.txt")
    assert "«The Tenant pays for electricity" in out
    late = out.split("with their document (late chunking):")[1].split("each chunk encoded alone:")[0]
    first_clause = next(line for line in late.splitlines() if "The Tenant pays for electricity" in line)
    assert "lease-ocean-drive.txt" in first_clause
    assert "(tied with 5 other chunks)" in out.split("each chunk encoded alone:")[1]


@pytest.mark.slow  # the packaged default model
@pytest.mark.parametrize("precision", ["float32", "int8"])
def test_encode_then_search_the_index(default_model_cache, tmp_path, capsys, precision):
    index = tmp_path / "index"
    assert main(["encode", str(LEASES), str(index), "--precision", precision, "--no-progress"]) == 0
    store = IndexStore(index)
    assert store.count_documents() == 6 and store.info.precision == precision
    embeddings, records = store.chunks_in_order()
    assert store.count_chunks() == len(records) == len(embeddings) > 6
    assert embeddings.dtype == (np.int8 if precision == "int8" else np.float32)
    (document,) = store.fetch_documents([records[5]["path"]])
    text = (LEASES / document.id).read_text()
    assert all(text[chunk.start : chunk.end] == chunk.text for chunk in document.chunks)
    capsys.readouterr()
    assert main(["search", str(index), QUERY]) == 0
    assert first_result(capsys.readouterr().out).startswith("1. lease-ocean-drive.txt")


def test_build_command(backbone_dirs, tmp_path, capsys):
    out = tmp_path / "ckpt"
    assert main(["build", str(backbone_dirs["qwen3"]), str(out), "--projection-dim", "16", "--matryoshka-dims", "8",
                 "16", "--max-seq-length", "128"]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "contextembed" and config["matryoshka_dims"] == [8, 16]
    assert config["max_seq_length"] == 128 and config["text_config"]["is_causal"] is False


@pytest.mark.slow  # the packaged default model
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["search", "{empty}", "rent"], "the corpus is empty"),
        (["search", "{bad}", "rent"], "cannot read"),
        (["search", "{missing}", "rent"], "does not exist"),
        (["search", str(LEASES), "  "], "the query is empty"),
        (["search", str(LEASES), "rent", "--output-dim", "100"], r"output_dim must be one of \[128, 256, 384\], got 100"),
    ],
)
def test_bad_inputs_exit_non_zero_with_a_message(default_model_cache, tmp_path, capsys, argv, message):
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    argv = [a.format(empty=tmp_path / "empty", bad=tmp_path / "bad", missing=tmp_path / "nope") for a in argv]
    assert main(argv + ["--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("contextembed search: error:")
    assert __import__("re").search(message, err)


@pytest.mark.parametrize("argv", [["search", str(LEASES), "rent", "--chunker", "words"],
                                  ["encode", str(LEASES), "out", "--precision", "int4"]])
def test_unknown_choices_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2 and "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "flag"), [
    (["search", str(LEASES), "rent", "--top-k", "0"], "--top-k"),
    (["search", str(LEASES), "rent", "--chunk-tokens", "0"], "--chunk-tokens"),
    (["encode", str(LEASES), "out", "--batch-size", "-3"], "--batch-size"),
    (["train", "ckpt", "data", "out", "--max-minutes", "-1"], "--max-minutes"),
    (["evaluate", "--local-mix", "1.5"], "--local-mix"),
    (["evaluate", "--local-mix", "nan"], "--local-mix"),
    (["build", "bb", "out", "--window-head-tokens", "x"], "--window-head-tokens"),
])
def test_bad_numbers_are_usage_errors_naming_the_flag(argv, flag, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and f"argument {flag}: must be a " in err


def test_a_mistyped_path_fails_before_the_model_loads(tmp_path, capsys, monkeypatch):
    import contextembed

    def no_loading(*args, **kwargs):
        raise AssertionError("the model was loaded for a command that could not run")

    monkeypatch.setattr(contextembed, "load", no_loading)
    for argv in (["search", str(tmp_path / "nope"), "rent"], ["encode", str(tmp_path / "nope"), str(tmp_path / "o")],
                 ["evaluate", str(tmp_path / "nope")]):
        assert main(argv) == 2
        assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("command", [[], ["search"], ["encode"], ["build"]])
def test_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(command + ["--help"])
    assert exit_info.value.code == 0 and "usage: contextembed" in capsys.readouterr().out


def test_build_never_writes_into_a_folder_of_other_files(backbone_dirs, tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "README.md").write_text("my notes")
    (mine / "config.json").write_text('{"mine": true}')
    assert main(["build", str(backbone_dirs["bert"]), str(mine)]) == 2
    assert "is a non-empty folder that is not a contextembed checkpoint" in capsys.readouterr().err
    assert (mine / "README.md").read_text() == "my notes" and sorted(p.name for p in mine.iterdir()) == [
        "README.md", "config.json"]
    out = tmp_path / "ckpt"
    assert main(["build", str(backbone_dirs["bert"]), str(out)]) == 0
    assert main(["build", str(backbone_dirs["bert"]), str(out)]) == 2
    assert "already holds a contextembed checkpoint: pass --overwrite" in capsys.readouterr().err
    assert main(["build", str(backbone_dirs["bert"]), str(out), "--overwrite"]) == 0
