"""`contextembed search ... --evidence N`: each document's answer with its evidence, from a folder, an index and a
file:// URI alike (the store URIs: tests/stores/test_store_cli.py); `--evidence 0` is the output without it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextembed.cli import main

LEASES = Path(__file__).resolve().parents[2] / "examples" / "data" / "leases"
QUERY = "Who pays for electricity at 88 Ocean Drive?"


def run(capsys, *args) -> str:
    capsys.readouterr()
    assert main([*map(str, args), "--no-progress"]) == 0
    return capsys.readouterr().out


@pytest.fixture(scope="module")
def model(built):
    return str(built["bert"][0])


def test_evidence_0_is_the_output_without_it(model, capsys):
    for extra in ([], ["--json"]):
        assert run(capsys, "search", LEASES, QUERY, "--model", model, *extra) == run(
            capsys, "search", LEASES, QUERY, "--model", model, "--evidence", "0", *extra)


def test_evidence_in_json_slices_the_source_and_follows_the_answer(model, capsys):
    plain = json.loads(run(capsys, "search", LEASES, QUERY, "--model", model, "--json"))
    found = json.loads(run(capsys, "search", LEASES, QUERY, "--model", model, "--json", "--evidence", "2"))
    assert [(d["document"], d["chunk"]) for d in found["documents"]] == [
        (d["document"], d["chunk"]) for d in plain["documents"]]
    for document in found["documents"]:
        text = (LEASES / document["document"]).read_text(encoding="utf-8")
        assert len(document["evidence"]) == 2
        for chunk in [document["chunk"], *document["evidence"]]:
            assert text[chunk["start"] : chunk["end"]] == chunk["text"]
        assert all(e.keys() == {"index", "score", "start", "end", "text"} for e in document["evidence"])
        scores = [document["score"]] + [e["score"] for e in document["evidence"]]
        assert scores == sorted(scores, reverse=True)
        assert document["chunk"]["index"] not in [e["index"] for e in document["evidence"]]
        assert f"«{' '.join(document['chunk']['text'].split())}»" in document["reader_view"]


def test_text_output_labels_answer_and_evidence_and_shows_the_reader_view(model, capsys):
    out = run(capsys, "search", LEASES, QUERY, "--model", model, "--evidence", "2", "--top-k", "2")
    assert out.count("   answer   chunk ") == 2 and out.count("   evidence chunk ") == 4
    assert out.count("   reader view: ") == 2


def test_a_folder_an_index_and_a_file_uri_give_the_same_evidence(model, tmp_path, capsys):
    index = tmp_path / "index"
    run(capsys, "encode", LEASES, index, "--model", model)

    def evidence(target):
        found = json.loads(run(capsys, "search", target, QUERY, "--model", model, "--json", "--evidence", "3"))
        return [(d["document"], d["chunk"]["index"], [(e["index"], e["text"]) for e in d["evidence"]])
                for d in found["documents"]]

    assert evidence(LEASES) == evidence(index) == evidence(f"file://{index}")


def test_more_evidence_than_a_document_has_gives_all_it_has(model, capsys):
    found = json.loads(run(capsys, "search", LEASES, QUERY, "--model", model, "--json", "--evidence", "100000",
                           "--top-k", "1"))
    (document,) = found["documents"]
    chunks = {document["chunk"]["index"], *(e["index"] for e in document["evidence"])}
    assert chunks == set(range(len(chunks))) and len(document["evidence"]) == len(chunks) - 1 > 2


@pytest.mark.parametrize("value", ["-1", "two", "1.5"])
def test_bad_evidence_values_are_usage_errors_naming_the_flag(value, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["search", str(LEASES), QUERY, "--evidence", value])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "argument --evidence: must be a non-negative integer, got" in err
