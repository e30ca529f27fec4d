"""Evidence from every store equals an oracle computed from the vectors the store was given: each returned document's
chunks ranked by the query's score (ties by chunk index), its answer removed, the next N kept; the offsets slice the
document's text; a store fetches the returned documents by id."""

from __future__ import annotations

import numpy as np
import pytest

from contextembed.chunking import Chunk
from contextembed.quantization import quantize
from contextembed.search import reader_view, search
from contextembed.stores import DocumentVectors, StoreInfo, open_store
from tests.stores.conftest import store_uri

DIM = 8


def corpus(n_documents: int = 6, seed: int = 0):
    """Documents of 3 to 8 sentences with random unit vectors; each document's text is its sentences joined."""
    rng = np.random.default_rng(seed)
    texts, documents = {}, []
    for d in range(n_documents):
        sentences = [f"Sentence {i} of document {d}." for i in range(3 + (5 * d) % 6)]
        text = " ".join(sentences)
        chunks, start = [], 0
        for sentence in sentences:
            chunks.append(Chunk(sentence, start, start + len(sentence)))
            start += len(sentence) + 1
        vectors = rng.normal(size=(len(sentences), DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        texts[f"doc-{d}"] = text
        documents.append(DocumentVectors(f"doc-{d}", chunks, vectors, {"n": d}, str(d)))
    return texts, documents


def oracle(query: np.ndarray, vectors: np.ndarray, answer: int, n: int) -> list[int]:
    """The document's chunks by score (the lower index first among equal ones), the answer left out, n kept."""
    scores = vectors.astype(np.float64) @ query.astype(np.float64)
    return [i for i in sorted(range(len(scores)), key=lambda i: (-scores[i], i)) if i != answer][:n]


# int8 codes: the index and Qdrant (LanceDB and pgvector keep float32: test_stores_without_int8_say_so)
@pytest.mark.parametrize("kind, precision", [("index", "float32"), ("lancedb", "float32"), ("qdrant", "float32"),
                                             ("pgserver", "float32"), ("index", "int8"), ("qdrant", "int8")])
def test_evidence_equals_the_oracle_in_every_store(kind, tmp_path, pg_folder, precision):
    texts, documents = corpus()
    if precision == "int8":
        documents = [DocumentVectors(d.id, d.chunks, quantize(d.vectors, "int8"), d.metadata, d.content_hash)
                     for d in documents]
    by_id = {d.id: d for d in documents}
    queries = np.random.default_rng(1).normal(size=(5, DIM)).astype(np.float32)
    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    if precision == "int8":
        queries = quantize(queries, "int8")
    with open_store(store_uri(kind, tmp_path, pg_folder)) as store:
        store.ensure(StoreInfo("test", DIM, precision))
        store.add_documents(documents)
        for query in queries:
            for n in (0, 2, 5):
                hits = search(store, query, k=3, evidence=n)
                assert [h.document for h in hits] == [h.document for h in store.search_documents(query, k=3)]
                for hit in hits:
                    document = by_id[hit.document]
                    assert [e.index for e in hit.evidence] == oracle(query, document.vectors, hit.chunk.index, n)
                    exact = document.vectors.astype(np.float64) @ query.astype(np.float64)
                    for chunk in (hit.chunk, *hit.evidence):
                        assert chunk.score == pytest.approx(exact[chunk.index], abs=1e-5)
                        assert texts[hit.document][chunk.start : chunk.end] == chunk.text
                        assert chunk.metadata == document.metadata
                    assert max(exact) == pytest.approx(exact[hit.chunk.index], abs=1e-5)  # the answer is the best


def test_evidence_past_the_end_of_a_document_is_every_other_chunk(kind, tmp_path, pg_folder):
    _, documents = corpus(3)
    with open_store(store_uri(kind, tmp_path, pg_folder)) as store:
        store.ensure(StoreInfo("test", DIM))
        store.add_documents(documents)
        for hit in search(store, documents[0].vectors[0], k=3, evidence=100):
            length = len(next(d for d in documents if d.id == hit.document).chunks)
            assert sorted([hit.chunk.index] + [e.index for e in hit.evidence]) == list(range(length))
        with pytest.raises(ValueError, match="evidence must be a non-negative integer, got -1"):
            search(store, documents[0].vectors[0], k=3, evidence=-1)
        with pytest.raises(ValueError, match="evidence must be a non-negative integer, got 1.5"):
            search(store, documents[0].vectors[0], k=3, evidence=1.5)


def test_a_store_fetches_documents_by_id(kind, tmp_path, pg_folder):
    _, documents = corpus(4)
    with open_store(store_uri(kind, tmp_path, pg_folder)) as store:
        store.ensure(StoreInfo("test", DIM))
        store.add_documents(documents)
        fetched = store.fetch_documents(["doc-2", "missing", "doc-0"])
        assert [d.id for d in fetched] == ["doc-2", "doc-0"]
        for got, want in zip(fetched, [documents[2], documents[0]]):
            assert got.chunks == want.chunks and got.metadata == want.metadata
            assert got.content_hash == want.content_hash
            np.testing.assert_array_equal(got.vectors, want.vectors)
        assert store.fetch_documents([]) == []


def test_the_reader_view_puts_answer_and_evidence_in_document_order(kind, tmp_path, pg_folder):
    texts, documents = corpus(2)
    with open_store(store_uri(kind, tmp_path, pg_folder)) as store:
        store.ensure(StoreInfo("test", DIM))
        store.add_documents(documents)
        (hit,) = search(store, documents[1].vectors[4], k=1, evidence=2)
    view = reader_view(hit)
    shown = sorted([hit.chunk, *hit.evidence], key=lambda c: c.index)
    assert [view.index(c.text) for c in shown] == sorted(view.index(c.text) for c in shown)
    assert f"«{hit.chunk.text}»" in view
    gaps = sum(1 for a, b in zip([-1] + [c.index for c in shown], [c.index for c in shown]) if b > a + 1)
    assert view.count("[…]") == gaps
