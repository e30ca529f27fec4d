"""contextembed.search: answers with their evidence from one function, against an oracle on the vectors; the reader
view; the same result from any document's chunks and scores (as the HTTP API's vectors give them)."""

from __future__ import annotations

import numpy as np
import pytest

from contextembed.chunking import Chunk
from contextembed.ranking import ChunkHit, DocumentHit
from contextembed.search import document_evidence, reader_view, search
from contextembed.stores import DocumentVectors, StoreInfo
from contextembed.stores.index import IndexStore


def test_document_evidence_ranks_the_rest_by_score_and_chunk_index():
    scores = np.array([0.2, 0.9, 0.5, 0.5, 0.1, 0.5], dtype=np.float32)
    hit = document_evidence("d", ["a", "b", "c", "d", "e", "f"], scores, evidence=3)
    assert (hit.chunk.index, hit.score) == (1, pytest.approx(0.9))
    assert [e.index for e in hit.evidence] == [2, 3, 5]  # three tied at 0.5: the lower index first
    # string chunks are placed as if joined by one space
    assert [(c.start, c.end) for c in (hit.chunk, *hit.evidence)] == [(2, 3), (4, 5), (6, 7), (10, 11)]
    given = document_evidence("d", ["a", "b", "c"], [0.1, 0.9, 0.5], evidence=1, answer=2)
    assert (given.chunk.index, [e.index for e in given.evidence]) == (2, [1])  # the answer a store chose stays
    everything = document_evidence("d", ["a", "b"], [0.1, 0.9], evidence=10)
    assert [e.index for e in everything.evidence] == [0]  # at most what the document has
    codes = document_evidence("d", ["a", "b"], np.array([3, 7], dtype=np.int32), evidence=1)
    assert isinstance(codes.score, int) and isinstance(codes.evidence[0].score, int)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: document_evidence("d", ["a", "b"], [0.1], 1), r"scores must hold one number per chunk \(2 chunks\)"),
    (lambda: document_evidence("d", [], [], 1), r"scores must hold one number per chunk \(0 chunks\)"),
    (lambda: document_evidence("d", ["a"], [0.1], -1), "evidence must be a non-negative integer, got -1"),
    (lambda: document_evidence("d", ["a"], [0.1], 1, answer=3), r"answer must be a chunk index in \[0, 1\), got 3"),
    (lambda: document_evidence("d", [3], [0.1], 1), r"chunks\[0\] must be a Chunk or a string, got int"),
])
def test_bad_arguments_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_reader_view_marks_the_answer_and_every_gap():
    def chunk(i, text):
        return ChunkHit("d", 0.0, i, 10 * i, 10 * i + len(text), text)

    hit = DocumentHit("d", 0.9, chunk(4, "She pays."), (chunk(0, "Jane Doe, tenant."), chunk(5, "Monthly.")))
    assert reader_view(hit) == "Jane Doe, tenant. […] «She pays.» Monthly."
    assert reader_view(DocumentHit("d", 0.9, chunk(2, "Rent.\n  Due  now."))) == "[…] «Rent. Due now.»"
    assert reader_view(hit, gap="...", marks=("**", "**")) == "Jane Doe, tenant. ... **She pays.** Monthly."


def test_search_with_evidence_equals_an_oracle_from_the_vectors():
    """An in-memory index of random documents: for every returned document, its evidence is its chunks ranked by
    the query's score (the answer removed), and k, evidence and the documents do not depend on each other."""
    rng = np.random.default_rng(0)
    store = IndexStore()
    store.ensure(StoreInfo("test", 8))
    documents = []
    for d in range(12):
        vectors = rng.normal(size=(2 + d % 5, 8)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        chunks = [Chunk(f"d{d} c{i}", 6 * i, 6 * i + len(f"d{d} c{i}")) for i in range(len(vectors))]
        documents.append(DocumentVectors(f"doc-{d:02}", chunks, vectors))
    store.replace(documents)
    by_id = {d.id: d for d in documents}
    for query in rng.normal(size=(10, 8)).astype(np.float32):
        plain = search(store, query, k=5)
        assert all(h.evidence == () for h in plain)
        for n in (1, 3):
            hits = search(store, query, k=5, evidence=n)
            assert [(h.document, h.chunk) for h in hits] == [(h.document, h.chunk) for h in plain]
            for hit in hits:
                scores = by_id[hit.document].vectors.astype(np.float64) @ query.astype(np.float64)
                order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
                assert hit.chunk.index == order[0]
                assert [e.index for e in hit.evidence] == order[1 : n + 1]
    with pytest.raises(ValueError, match="k must be a positive integer, got 0"):
        search(store, query, k=0)
    with pytest.raises(ValueError, match="evidence must be a non-negative integer, got True"):
        search(store, query, evidence=True)
