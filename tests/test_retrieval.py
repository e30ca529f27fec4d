"""contextembed.retrieval: MaxSim, the tie rule and the exact scan against brute-force oracles."""

from __future__ import annotations

import numpy as np
import pytest

from contextembed.quantization import quantize
from contextembed.ranking import ChunkHit, first_of, hit_order, rank_of_first, ranking, top_k
from contextembed.retrieval import exact_search, maxsim
from tests.test_scoring import numpy_scores, unit


def test_maxsim_is_best_chunk_per_document():
    docs = [unit(n, 16, seed=n) for n in (1, 5, 3)]
    queries = unit(4, 16, seed=9)
    expected = np.array([[max(q @ c for c in doc) for doc in docs] for q in queries])
    assert np.allclose(maxsim(queries, docs), expected, atol=1e-6)


def test_maxsim_errors():
    with pytest.raises(ValueError, match="documents\\[1\\] has dimension 8, queries have 16"):
        maxsim(unit(1, 16), [unit(2, 16), unit(2, 8)])
    with pytest.raises(ValueError, match="documents\\[0\\] has no chunk vectors"):
        maxsim(unit(1, 16), [np.zeros((0, 16))])


def test_top_k_ties_go_to_lower_index():
    idx, val = top_k(np.array([[0.5, 0.9, 0.5, 0.5, 0.1]]), 3)
    assert idx.tolist() == [[1, 0, 2]]


def brute_force(queries, vectors, doc_ids, k_docs, k_chunks, precision="float32"):
    scores = numpy_scores(queries, vectors, precision).astype(np.float64)
    out = []
    for q in scores:
        chunk_order = sorted(range(len(q)), key=lambda r: (-q[r], r))[:k_chunks]
        best = {}
        for r, d in enumerate(doc_ids):
            if d not in best or q[r] > q[best[d]]:
                best[d] = r
        doc_order = sorted(best, key=lambda d: (-q[best[d]], d))[:k_docs]
        out.append((chunk_order, doc_order, [best[d] for d in doc_order]))
    return out


@pytest.mark.parametrize("precision", ["float32", "int8", "uint8", "binary", "ubinary"])
@pytest.mark.parametrize("block_size", [7, 64, 10_000])
def test_exact_search_equals_brute_force(precision, block_size):
    rng = np.random.default_rng(5)
    doc_ids = np.sort(rng.integers(0, 40, size=300))
    vectors, queries = unit(300, 32, seed=6), unit(9, 32, seed=7)
    vectors[10] = vectors[11]  # exact ties
    if precision != "float32":
        vectors, queries = quantize(vectors, precision), quantize(queries, precision)
    result = exact_search(queries, vectors, doc_ids, top_k_documents=5, top_k_chunks=12, block_size=block_size,
                          precision=precision)
    for q, (chunks, docs, best) in enumerate(brute_force(queries, vectors, doc_ids, 5, 12, precision)):
        assert result.chunk_rows[q].tolist() == chunks
        assert result.doc_ids[q].tolist() == docs
        assert result.doc_best_chunks[q].tolist() == best


@pytest.mark.parametrize("precision", ["float32", "int8"])
@pytest.mark.parametrize("block_size", [7, 10_000])
def test_left_out_documents_rank_as_if_absent(precision, block_size):
    """`live_documents` (an index's deletions, a filter) ranks exactly as searching the rows of the rest would."""
    rng = np.random.default_rng(8)
    doc_ids = np.sort(rng.integers(0, 40, size=300))
    vectors, queries = unit(300, 32, seed=9), unit(5, 32, seed=10)
    if precision != "float32":
        vectors, queries = quantize(vectors, precision), quantize(queries, precision)
    live = rng.random(40) < 0.3
    live[doc_ids[:20]] = False  # whole blocks of dead rows too
    result = exact_search(queries, vectors, doc_ids, top_k_documents=6, top_k_chunks=9, block_size=block_size,
                          precision=precision, live_documents=live)
    rows = np.flatnonzero(live[doc_ids])
    for q, (chunks, docs, best) in enumerate(brute_force(queries, vectors[rows], doc_ids[rows], 6, 9, precision)):
        assert result.chunk_rows[q].tolist() == rows[chunks].tolist()
        assert result.doc_ids[q].tolist() == docs
        assert result.doc_best_chunks[q].tolist() == rows[best].tolist()
    nothing = exact_search(queries, vectors, doc_ids, live_documents=np.zeros(40, bool), precision=precision)
    assert nothing.doc_ids.shape == (5, 0) and nothing.chunk_rows.shape == (5, 0)


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_a_non_finite_vector_is_named_not_ranked(value):
    vectors, doc_ids = unit(50, 8, seed=11), np.arange(50) // 5
    vectors[23, 3] = value
    with pytest.raises(ValueError, match="the chunk vector at row 23 holds NaN or infinite values"):
        exact_search(unit(2, 8), vectors, doc_ids, block_size=16)
    query = unit(3, 8)
    query[2, 0] = value
    with pytest.raises(ValueError, match="query 2 holds NaN or infinite values"):
        exact_search(query, unit(50, 8), doc_ids)
    with pytest.raises(ValueError, match="live_documents must be 10 booleans"):
        exact_search(unit(1, 8), unit(50, 8), doc_ids, live_documents=np.ones(9, bool))


def test_exact_search_rejects_unsorted_documents():
    with pytest.raises(ValueError, match="non-decreasing"):
        exact_search(unit(1, 8), unit(3, 8), np.array([0, 2, 1]))
    with pytest.raises(ValueError, match="top_k_chunks must be a positive integer"):
        exact_search(unit(1, 8), unit(3, 8), np.array([0, 0, 1]), top_k_chunks=0)


def test_ranking_and_rank_of_first_match_a_sorting_oracle():
    """Scores on a coarse grid (many exact ties): sorting by (score desc, position asc) is the rule, written as
    plainly as possible."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        scores = rng.integers(0, 5, size=12) / 10
        is_hit = rng.random(12) < 0.3
        order = sorted(range(12), key=lambda i: (-scores[i], i))
        assert ranking(scores).tolist() == order
        rank, tied = rank_of_first(scores, is_hit)
        expected = next((r for r, i in enumerate(order, 1) if is_hit[i]), None)
        assert rank == expected
        assert first_of(scores, is_hit) == (order[expected - 1] if expected else None)
        if expected:  # a tie decided it: a non-hit with the hit's score, nothing above
            best = order[expected - 1]
            assert tied == (scores.max() == scores[best] and bool((scores[~is_hit] == scores[best]).any()))


def test_hits_sort_by_score_then_document_id_in_code_points_then_chunk():
    hits = [ChunkHit("a", 0.5, 2, 0, 1, "x"), ChunkHit("B", 0.5, 9, 0, 1, "x"), ChunkHit("a", 0.5, 1, 0, 1, "x"),
            ChunkHit("é", 0.9, 0, 0, 1, "x"), ChunkHit("e", 0.5, 0, 0, 1, "x")]
    assert [(h.document, h.index) for h in sorted(hits, key=hit_order)] == [
        ("é", 0), ("B", 9), ("a", 1), ("a", 2), ("e", 0)]


@pytest.mark.parametrize("precision", ["float32", "int8", "binary"])
def test_exact_search_keeps_every_tie_at_the_cut_off(precision):
    """Many chunks share the k-th score (copies of one vector across documents): whatever the block size, the
    returned documents and chunks are the lowest positions of the run, as the rule says."""
    vectors = unit(200, 32, seed=8)
    vectors[::3] = vectors[0]  # 67 copies, in documents 0, 3, 6, ...
    queries = vectors[:1].copy()
    doc_ids = np.arange(200)
    if precision != "float32":
        vectors, queries = quantize(vectors, precision), quantize(queries, precision)
    for block_size in (5, 64, 1000):
        found = exact_search(queries, vectors, doc_ids, top_k_documents=4, top_k_chunks=6, block_size=block_size,
                             precision=precision)
        assert found.doc_ids[0].tolist() == [0, 3, 6, 9]
        assert found.chunk_rows[0].tolist() == [0, 3, 6, 9, 12, 15]
