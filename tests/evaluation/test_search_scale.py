"""Exact search keeps memory bounded by its block size, whatever the corpus size."""

from __future__ import annotations

import tracemalloc

import numpy as np

from contextembed.retrieval import exact_search


def test_memory_is_bounded_by_the_block(tmp_path):
    rng = np.random.default_rng(0)
    n, dim, n_queries, block = 400_000, 64, 8, 16_384
    vectors = rng.standard_normal((n, dim), dtype=np.float32)
    doc_ids = np.arange(n) // 20  # 20,000 documents of 20 chunks
    queries = rng.standard_normal((n_queries, dim), dtype=np.float32)
    corpus_bytes = vectors.nbytes
    tracemalloc.start()
    result = exact_search(queries, vectors, doc_ids, top_k_documents=10, top_k_chunks=10, block_size=block)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    per_block = n_queries * block * 8 * 6  # a few (Q, block) score-sized temporaries
    per_doc = n_queries * (n // 20) * 8 * 4  # running best score and row per document, and their updates
    assert peak < per_block + per_doc + 2_000_000
    assert peak < corpus_bytes / 4  # far below a full (Q, N) score matrix or a copy of the corpus
    best = np.argmax(queries @ vectors.T, axis=1)
    assert np.array_equal(result.chunk_rows[:, 0], best)
