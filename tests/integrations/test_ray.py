"""Ray Data on a local Ray with 2 actors (slow tier): document rows in, chunk rows out, equal to `encode_documents`
and round-tripped through Parquet; `contextembed encode --ray` into the index, equal to one process and resumable."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import pyarrow as pa  # noqa: E402
import ray  # noqa: E402

import contextembed  # noqa: E402
from contextembed.cli import main  # noqa: E402
from contextembed.integrations.ray import ChunkEmbedder, embed_dataset  # noqa: E402

DOCUMENTS = {f"doc{i}": [f"the lease of the {w}.", "the rent is monthly.", f"{w} is the tenant."][: 1 + i % 3]
             for i, w in enumerate(["street", "company", "table", "apartment", "landlord", "one", "two"])}


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             _temp_dir=str(tmp_path_factory.mktemp("ray")))
    yield
    ray.shutdown()


@pytest.mark.slow
def test_chunk_rows_equal_encode_documents_and_round_trip_parquet(built, local_ray, tmp_path):
    model = str(built["bert"][0])
    dataset = ray.data.from_items([{"id": k, "chunks": v} for k, v in DOCUMENTS.items()])
    embed_dataset(dataset, model, num_actors=2, batch_size=2).write_parquet(str(tmp_path / "out"))
    rows = ray.data.read_parquet(str(tmp_path / "out")).to_pandas().sort_values(["doc_id", "chunk_index"])
    expected = contextembed.load(model).encode_documents(list(DOCUMENTS.values()))
    assert len(rows) == sum(len(v) for v in DOCUMENTS.values())
    for (doc_id, chunks), vectors in zip(DOCUMENTS.items(), expected):
        mine = rows[rows.doc_id == doc_id]
        assert mine.text.tolist() == chunks and mine.chunk_index.tolist() == list(range(len(chunks)))
        np.testing.assert_allclose(np.stack(mine.embedding.to_numpy()), vectors, atol=1e-5)
        assert mine.start.isna().all()  # chunk lists carry no character offsets


def test_raw_text_with_a_chunker_keeps_offsets(built, tmp_path):
    embedder = ChunkEmbedder(str(built["bert"][0]), chunker="sentences")
    texts = {k: " ".join(v) for k, v in DOCUMENTS.items()}
    table = embedder(pa.table({"id": list(texts), "text": list(texts.values())}))
    for row in table.to_pylist():
        assert texts[row["doc_id"]][row["start"]:row["end"]] == row["text"]
    with pytest.raises(ValueError, match="need a chunker"):
        ChunkEmbedder(str(built["bert"][0]))(pa.table({"id": ["a"], "text": ["the rent"]}))
    with pytest.raises(ValueError, match="either 'chunks' or 'text'"):
        embedder(pa.table({"id": ["a"], "body": ["the rent"]}))
    with pytest.raises(ValueError, match="document 1 of the batch has no id"):
        embedder(pa.table({"id": ["a", None], "text": ["the rent", "the lease"]}))
    with pytest.raises(ValueError, match=r"rows 0 and 2 of the batch share the id 'a'"):
        embedder(pa.table({"id": ["a", "b", "a"], "text": ["the rent", "the lease", "the deposit"]}))
    chunks = ChunkEmbedder(str(built["bert"][0]))
    with pytest.raises(ValueError, match=r"the 'chunks' column\[0\] must be a non-empty list of chunk strings, "
                                         "got a string"):
        chunks(pa.table({"id": ["a"], "chunks": ["the rent"]}))


@pytest.mark.slow
def test_encode_on_ray_writes_what_search_reads_and_resumes(built, local_ray, tmp_path, capsys):
    """`encode --ray` with 2 actors: Ray's own reader, the index written from the driver in commits, the vectors
    those of one process (within float noise), and a rerun that embeds only what changed."""
    from contextembed.stores import open_store

    model = str(built["bert"][0])
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": name, "text": " ".join(chunks), "metadata": {"n": len(chunks)}})
                              + "\n" for name, chunks in DOCUMENTS.items()))
    ray_index, local_index = tmp_path / "ray", tmp_path / "local"
    assert main(["encode", str(corpus), str(ray_index), "--model", model, "--ray", "--ray-actors", "2",
                 "--commit-every", "3", "--no-progress"]) == 0
    assert f"added {len(DOCUMENTS)}, replaced 0, deleted 0, kept 0 documents" in capsys.readouterr().out
    assert main(["encode", str(corpus), str(local_index), "--model", model, "--no-progress"]) == 0
    with open_store(ray_index) as on_ray, open_store(local_index) as local:
        assert on_ray.document_hashes() == local.document_hashes()
        for a, b in zip(on_ray.fetch_documents(sorted(DOCUMENTS)), local.fetch_documents(sorted(DOCUMENTS))):
            assert a.chunks == b.chunks and a.metadata == b.metadata
            np.testing.assert_allclose(a.vectors, b.vectors, atol=1e-5)
    capsys.readouterr()
    assert main(["search", str(ray_index), "who is the tenant", "--model", model, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["documents"]
    corpus.write_text("".join(line + "\n" for line in corpus.read_text().splitlines()[1:]))  # doc0 is gone
    assert main(["encode", str(corpus), str(ray_index), "--model", model, "--ray", "--ray-actors", "2",
                 "--no-progress"]) == 0
    assert f"added 0, replaced 0, deleted 1, kept {len(DOCUMENTS) - 1} documents" in capsys.readouterr().out


def test_ray_rows_of_a_folder_and_of_records(built, tmp_path):
    """The actor's side without a cluster: rows as Ray's readers give them, one row per document back."""
    from contextembed.corpus import Document
    from contextembed.integrations.ray import DocumentEmbedder

    model = str(built["bert"][0])
    text = "The rent is monthly. She is the tenant."
    kept = Document("kept", "Already stored.").content_hash
    embedder = DocumentEmbedder(model, "sentences", None, "float32", None, None, {"kept": kept}, None)
    out = embedder(pa.table({"id": ["a", "kept", "empty"], "text": [text, "Already stored.", " "],
                             "metadata": [{"lang": "en", "year": None}, None, None]})).to_pylist()
    assert [(r["id"], r["status"]) for r in out] == [("kept", "kept"), ("empty", "empty"), ("a", "embedded")]
    assert out[2]["texts"] == ["The rent is monthly.", "She is the tenant."] and json.loads(out[2]["metadata"]) == \
        {"lang": "en"}
    assert len(out[2]["vectors"]) == 2 * 16 * 4
    folder = DocumentEmbedder(model, "sentences", None, "int8", None, None, {}, str(tmp_path))
    (row,) = folder(pa.table({"bytes": [text.encode()], "path": [str(tmp_path / "sub" / "a.txt")]})).to_pylist()
    assert row["id"] == "sub/a.txt" and json.loads(row["metadata"]) == {"path": "sub/a.txt"}
    assert len(row["vectors"]) == 2 * 16  # int8 codes
    with pytest.raises(ValueError, match="duplicate|must be a non-empty string"):
        embedder(pa.table({"id": [""], "text": ["x"]}))


def test_an_actor_call_prepares_its_documents_in_groups_and_embeds_each_once_in_order(built):
    """A call of more documents than one group (the next group prepared beside the model's pass over this one): every
    document comes back once, in the order given, with the vectors the encoder gives the call's documents at once."""
    from contextembed.corpus import Document
    from contextembed.integrations.ray import ACTOR_GROUP, DocumentEmbedder

    texts = {f"d{i:02d}": " ".join(f"Clause {j} of lease {i}." for j in range(1 + i % 5)) for i in range(2 * ACTOR_GROUP
                                                                                                       + 3)}
    embedder = DocumentEmbedder(str(built["bert"][0]), "sentences", None, "float32", None, None, {}, None)
    out = embedder(pa.table({"id": list(texts), "text": list(texts.values())})).to_pylist()
    assert [row["id"] for row in out] == list(texts) and {row["status"] for row in out} == {"embedded"}
    expected = embedder.encoder.embed(embedder.encoder.prepare([Document(i, t) for i, t in texts.items()]))
    for row, vectors in zip(out, expected, strict=True):
        assert len(row["texts"]) == len(vectors) == 1 + int(row["id"][1:]) % 5
        np.testing.assert_allclose(np.frombuffer(row["vectors"], np.float32).reshape(vectors.shape), vectors,
                                   atol=1e-5)
