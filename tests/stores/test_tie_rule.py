"""One tie rule everywhere: equal scores rank by document id in code-point order, then by chunk index. Search in
memory (`exact_search`), evaluation (`per_query_metrics`) and every store (the folder index, LanceDB, Qdrant, and
PostgreSQL, where the rule is SQL's `ORDER BY ... COLLATE "C"`) return the same order on tied scores, also when the
cut-off falls inside a run of equal scores."""

from __future__ import annotations

import numpy as np
import pytest

from contextembed.chunking import Chunk
from contextembed.evaluation.context_bench import ContextQuery, per_query_metrics
from contextembed.retrieval import exact_search
from contextembed.search import search
from contextembed.stores import DocumentVectors, StoreInfo, open_store
from tests.stores.conftest import store_uri

DIM = 8
# Written in this order; the rule's order is code points: "B" < "a" < "b" < "c" < "d" < "é" (a locale's collation
# would put "a" before "B", and "é" beside "e").
IDS = ["d", "b", "é", "a", "B", "c", "z"]
TIED = sorted(["d", "b", "é", "a", "B", "c"])  # every document but "z" holds the query's own vector


def corpus() -> tuple[np.ndarray, list[DocumentVectors]]:
    rng = np.random.default_rng(0)
    query = np.zeros(DIM, np.float32)
    query[0] = 1.0
    documents = []
    for n, doc_id in enumerate(IDS):
        vectors = rng.normal(size=(4, DIM)).astype(np.float32)
        vectors[:, 0] = -np.abs(vectors[:, 0])  # every other chunk scores below 0
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        if doc_id != "z":
            vectors[1 + n % 3] = query  # the tied chunk, at different positions
        if doc_id == "b":
            vectors[3] = query  # two tied chunks in one document: the lower index is its best
        texts = [f"{doc_id} chunk {i}" for i in range(4)]
        chunks = [Chunk(t, 12 * i, 12 * i + len(t)) for i, t in enumerate(texts)]
        documents.append(DocumentVectors(doc_id, chunks, vectors, {}, doc_id))
    return query, documents


def expected_chunks(documents) -> list[tuple[str, int]]:
    """Every tied chunk by the rule: document id, then chunk index."""
    query = corpus()[0]
    tied = [(d.id, i) for d in documents for i, v in enumerate(d.vectors) if np.array_equal(v, query)]
    return sorted(tied)


def test_in_memory_search_and_evaluation_follow_the_rule():
    query, documents = corpus()
    ordered = sorted(documents, key=lambda d: d.id)  # rows in the rule's order, as every index keeps them
    vectors = np.concatenate([d.vectors for d in ordered])
    doc_of_row = np.repeat(np.arange(len(ordered)), [len(d.chunks) for d in ordered])
    found = exact_search(query[None], vectors, doc_of_row, top_k_documents=len(ordered), top_k_chunks=7)
    assert [ordered[d].id for d in found.doc_ids[0][: len(TIED)]] == TIED
    rows = [(ordered[doc_of_row[r]].id, int(r - np.flatnonzero(doc_of_row == doc_of_row[r])[0]))
            for r in found.chunk_rows[0]]
    assert rows == expected_chunks(documents)
    # Evaluation gets the documents in the order they were written (not by id); the rank of each tied target
    # is its place in the rule's order.
    flat = np.concatenate([d.vectors for d in documents])
    row_doc = np.repeat(np.arange(len(documents)), [len(d.chunks) for d in documents])
    row_ids = [f"{d.id}#{i}" for d in documents for i in range(len(d.chunks))]
    queries = [ContextQuery(f"q{d}", "q", [d], []) for d in TIED]
    ks = list(range(1, len(IDS) + 1))
    records = per_query_metrics(np.stack([query] * len(TIED)), flat, row_doc, row_ids, IDS, queries, ks)
    ranks = [min(k for k in ks if record[f"Document@{k}"]) for record in records]
    assert ranks == list(range(1, len(TIED) + 1))


@pytest.mark.parametrize("k", [2, 4, 7])  # cut-offs inside the run of equal scores, and past it
def test_every_store_returns_the_rule_s_order_on_tied_scores(kind, tmp_path, pg_folder, k):
    query, documents = corpus()
    with open_store(store_uri(kind, tmp_path, pg_folder)) as store:
        store.ensure(StoreInfo("test", DIM))
        for document in documents:  # one write each, in the order of IDS
            store.add_documents([document])
        hits = store.search_documents(query, k=k)
        assert [h.document for h in hits] == (TIED + ["z"])[:k]
        by_id = {d.id: d for d in documents}
        for hit in hits[: len(TIED)]:
            assert hit.chunk.index == expected_chunks([by_id[hit.document]])[0][1]  # "b": the first of its two
        chunks = store.search_chunks(query, k=k)
        assert [(c.document, c.index) for c in chunks] == expected_chunks(documents)[:k]
        # search() with evidence: the same documents, and within "b" the other tied chunk comes first
        found = search(store, query, k=min(k, len(TIED)), evidence=1)
        assert [h.document for h in found] == TIED[: min(k, len(TIED))]
        if "b" in [h.document for h in found]:
            b = next(h for h in found if h.document == "b")
            assert [b.chunk.index, b.evidence[0].index] == [i for _, i in expected_chunks([by_id["b"]])]
