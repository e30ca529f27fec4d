"""Ray Data on a local Ray with 2 actors: document rows in, chunk rows out, equal to `encode_documents` and
round-tripped through Parquet; the same through `contextembed encode --ray-actors`."""

from __future__ import annotations

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


def test_the_encode_command_writes_parquet_on_ray(built, local_ray, tmp_path, capsys):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, chunks in DOCUMENTS.items():
        (corpus / f"{name}.txt").write_text(" ".join(chunks))
    assert main(["encode", str(corpus), str(tmp_path / "out"), "--model", str(built["bert"][0]), "--ray-actors", "2",
                 "--no-progress"]) == 0
    rows = ray.data.read_parquet(str(tmp_path / "out")).to_pandas()
    encoder = contextembed.load(str(built["bert"][0]))
    for name in DOCUMENTS:
        mine = rows[rows.doc_id == f"{name}.txt"].sort_values("chunk_index")
        text = (corpus / f"{name}.txt").read_text()
        expected = encoder.encode_documents([text], chunker="sentences")[0]
        assert mine.text.tolist() == [c.text for c in expected.chunks]
        np.testing.assert_allclose(np.stack(mine.embedding.to_numpy()), expected.embeddings, atol=1e-5)
    assert "wrote" in capsys.readouterr().out
    assert main(["encode", str(corpus), str(tmp_path / "out"), "--ray-actors", "2"]) == 2  # not an empty folder


def test_local_mix_reaches_every_batch(built):
    model = str(built["bert"][0])
    table = ChunkEmbedder(model, local_mix=0.3)(pa.table({"id": list(DOCUMENTS), "chunks": list(DOCUMENTS.values())}))
    expected = np.concatenate(contextembed.load(model).encode_documents(list(DOCUMENTS.values()), local_mix=0.3))
    np.testing.assert_allclose(np.stack(table.column("embedding").to_pylist()), expected, atol=1e-5)
    with pytest.raises(ValueError, match=r"local_mix must be a number in \[0, 1\], got -1"):
        embed_dataset(None, model, local_mix=-1)  # refused before the dataset is touched or an actor starts
