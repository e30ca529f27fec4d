"""Stores from the command line: incremental `encode CORPUS URI`, `search URI QUERY --json`, `evaluate --store`,
bad URIs; and ANN indexes measured against exact search."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from contextembed.cli import main
from contextembed.stores import StoreInfo, open_store, parse_store_uri
from tests.stores.conftest import store_uri

LEASES = Path(__file__).resolve().parents[2] / "examples" / "data" / "leases"


def run(capsys, *args) -> str:
    capsys.readouterr()
    assert main([*map(str, args), "--no-progress"]) == 0
    return capsys.readouterr().out


def test_encode_writes_only_what_changed_and_search_reads_the_store(kind, built, tmp_path, pg_folder, capsys):
    model = built["bert"][0]
    corpus = tmp_path / "leases"
    shutil.copytree(LEASES, corpus)
    uri = store_uri(kind, tmp_path, pg_folder)
    out = run(capsys, "encode", corpus, uri, "--model", model)
    assert "added 6, replaced 0, deleted 0, kept 0 documents" in out
    assert "added 0, replaced 0, deleted 0, kept 6 documents (0 chunk vectors written)" in run(
        capsys, "encode", corpus, uri, "--model", model)
    first, *rest = sorted(corpus.iterdir())
    first.write_text(first.read_text() + "\nThe Tenant may keep one cat.\n")
    rest[0].unlink()
    (corpus / "lease-new.txt").write_text(rest[1].read_text().replace("Tenant", "Lessee"))
    out = run(capsys, "encode", corpus, uri, "--model", model)
    assert "added 1, replaced 1, deleted 1, kept 4 documents" in out

    found = json.loads(run(capsys, "search", uri, "Who pays for electricity?", "--json", "--top-k", "6", "--model",
                           model))
    assert found["query"] == "Who pays for electricity?" and len(found["documents"]) == 6
    scores = [d["score"] for d in found["documents"]]
    assert scores == sorted(scores, reverse=True)
    names = {d["document"] for d in found["documents"]}
    assert rest[0].name not in names and "lease-new.txt" in names
    for entry in found["documents"]:  # the best chunk's offsets point into the document as it was encoded
        text = (corpus / entry["document"]).read_text()
        chunk = entry["chunk"]
        assert text[chunk["start"] : chunk["end"]] == chunk["text"]
    shown = run(capsys, "search", uri, "Who pays for electricity?", "--model", model)
    assert "1. " in shown and "chunk " in shown


def test_a_store_of_other_vectors_is_refused_before_embedding(built, tmp_path, capsys):
    pytest.importorskip("lancedb")
    uri = f"lancedb://{tmp_path / 'l'}"
    run(capsys, "encode", LEASES, uri, "--model", built["bert"][0])
    assert main(["encode", str(LEASES), uri, "--model", str(built["bert"][0]), "--output-dim", "8",
                 "--no-progress"]) == 2
    assert "holds dim=16 vectors, these are dim=8" in capsys.readouterr().err
    assert main(["encode", str(LEASES), uri, "--precision", "binary", "--no-progress"]) == 2
    assert "stores keep float32 or int8 vectors" in capsys.readouterr().err


@pytest.mark.parametrize("uri, message", [
    ("lancedb://", "names no folder"),
    ("qdrant://localhost:63a3", "numeric port"),
    ("qdrant:///x?colection=a", r"unknown option\(s\) \['colection'\]"),
    ("lancedb:///x?exact=maybe", "exact must be 0 or 1"),
    ("lancedb:///x?table=", "table is empty"),
])
def test_bad_store_uris_are_named(uri, message):
    with pytest.raises(ValueError, match=message):
        parse_store_uri(uri)


def test_bad_uris_from_the_command_line(tmp_path, capsys):
    assert main(["search", "qdrant://host:port", "rent", "--no-progress"]) == 2
    assert "numeric port" in capsys.readouterr().err
    assert main(["search", f"lancedb://{tmp_path / 'empty'}", "rent", "--no-progress"]) == 2
    assert "holds no vectors yet" in capsys.readouterr().err


def test_evaluate_through_a_store_reports_it_beside_exact_search(kind, built, tmp_path, pg_folder, capsys):
    folder = tmp_path / "q2d"
    (folder / "qrels").mkdir(parents=True)
    words = ["rent", "lease", "pets", "water", "deposit", "keys", "garden", "noise"]
    rows = [{"_id": f"d{i}", "title": "", "text": f"{words[i % 8]} {words[(i * 3) % 8]} clause {i}."} for i in range(40)]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{w}", "text": w}) + "\n" for w in words))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{w}\td{i}\t1\n" for i, w in enumerate(words)))
    uri = store_uri(kind, tmp_path, pg_folder)
    run(capsys, "evaluate", folder, "--format", "beir", "--model", built["bert"][0], "--store", uri,
        "--out", tmp_path / "out")
    results = json.loads((tmp_path / "out" / "results.json").read_text())["results"]["q2d"]["test"]
    assert results["store recall@1000"] == results["recall@1000"] and results["store ndcg@10"] == pytest.approx(
        results["ndcg@10"], abs=1e-6)
    assert "store ndcg@10" in (tmp_path / "out" / "results.md").read_text()


@pytest.mark.slow  # encodes the recipes set with the packaged model
@pytest.mark.parametrize("kind, index", [("lancedb", "ivf_pq"), ("lancedb", "hnsw"), ("pgserver", "hnsw")])
def test_an_ann_index_finds_what_exact_search_finds(kind, index, recipes, tmp_path, pg_folder):
    """recall@10 of the ANN's top chunks against exact search's, on the recipes set's 2,000+ chunk vectors."""
    from contextembed.stores import DocumentVectors

    pytest.importorskip("lancedb" if kind == "lancedb" else "psycopg")
    uri = store_uri(kind, tmp_path, pg_folder)
    with open_store(uri) as store:
        store.ensure(StoreInfo("default", 384))
        store.add_documents(DocumentVectors(i, c, v) for i, c, v in zip(recipes.ids, recipes.chunks, recipes.vectors))
        exact = [{(h.document, h.index) for h in store.search_chunks(q, k=10)} for q in recipes.queries]
        store.create_ann_index(**({"kind": index} if kind == "lancedb" else {}))
        store.exact = False
        approximate = [{(h.document, h.index) for h in store.search_chunks(q, k=10)} for q in recipes.queries]
    recall = np.mean([len(a & e) / len(e) for a, e in zip(approximate, exact)])
    print(f"{kind} {index}: recall@10 against exact search {recall:.3f}")
    assert recall >= 0.95


TOPICS = {
    "boat.txt": "The boat leaves at noon. It carries twelve people. The captain checks the weather first. Life jackets "
                "are under every seat. The trip lasts two hours.",
    "garden.md": "# Garden\n\nTomatoes need sun. Water them every morning. The soil should stay loose. Pick the fruit "
                 "when it is red. Basil grows well beside them.",
    "lease.txt": "The lease is for one year. Rent is due on the first day. The tenant pays for electricity. The "
                 "landlord pays for water. Pets are not allowed.",
    "school.txt": "Classes start in September. Each class has twenty students. Lunch is served at noon. The library "
                  "opens at eight. Exams take place in June.",
}


def test_every_store_uri_gives_the_folder_s_evidence(kind, built, tmp_path, pg_folder, capsys):
    """`search URI ... --evidence 2 --json` through the folder index, LanceDB, Qdrant and PostgreSQL: the same
    documents, answers and evidence (indices, offsets, texts) as searching the folder of files itself."""
    model = built["bert"][0]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, text in TOPICS.items():
        (corpus / name).write_text(text, encoding="utf-8")
    query = "who pays for electricity?"
    uri = store_uri(kind, tmp_path, pg_folder)
    run(capsys, "encode", corpus, uri, "--model", model)

    def evidence(target):
        found = json.loads(run(capsys, "search", target, query, "--model", model, "--json", "--evidence", "2",
                               "--top-k", "4"))
        return found["documents"]

    expected, got = evidence(corpus), evidence(uri)
    scores = [d["score"] for d in expected]
    assert min(a - b for a, b in zip(scores, scores[1:])) > 1e-5  # documents apart: no engine's rounding decides
    strip = lambda d: (d["document"], d["chunk"], [{k: e[k] for k in ("index", "start", "end", "text")}  # noqa: E731
                                                   for e in d["evidence"]], d["reader_view"])
    assert [strip(d) for d in got] == [strip(d) for d in expected]
    for a, b in zip(got, expected):
        assert a["score"] == pytest.approx(b["score"], abs=1e-5)
        assert [e["score"] for e in a["evidence"]] == pytest.approx([e["score"] for e in b["evidence"]], abs=1e-6)
        assert len(a["evidence"]) == 2
