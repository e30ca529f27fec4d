"""Exact search over a corpus of chunk vectors: blocked matrix products with bounded memory.

Rows of `vectors` are chunks; `doc_ids` gives each row's document (rows of one document are
contiguous). Documents are ranked by their best chunk (MaxSim). Codes (int8, uint8, binary, ubinary) are
scored exactly in integers in the precision the caller names (see `contextembed.scoring`), block by block, so
no float copy of the code matrix is ever made.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from contextembed.modeling import Precision
from contextembed.scoring import check_codes, dot, top_k


@dataclass
class SearchResult:
    """Per query, best first. Scores are float32 for float vectors, int32 for codes."""

    doc_ids: np.ndarray  # (Q, k_docs) document ids
    doc_scores: np.ndarray  # (Q, k_docs)
    doc_best_chunks: np.ndarray  # (Q, k_docs) row of each document's best chunk
    chunk_rows: np.ndarray  # (Q, k_chunks) rows of the best chunks in the whole corpus
    chunk_scores: np.ndarray  # (Q, k_chunks)


def exact_search(
    queries: np.ndarray,
    vectors: np.ndarray,
    doc_ids: np.ndarray,
    *,
    top_k_documents: int = 10,
    top_k_chunks: int = 10,
    block_size: int | None = None,
    best_chunks: bool = True,
    precision: Precision = "float32",
) -> SearchResult:
    """Top documents (by best chunk) and top chunks for each query, scanning `vectors` in blocks.

    Args:
        queries: (Q, D) float vectors, or codes of the same `precision` as `vectors`.
        vectors: (N, D) chunk vectors of the corpus (float, or codes of `precision`).
        doc_ids: (N,) document id of each row, non-decreasing (each document's rows contiguous).
        top_k_documents / top_k_chunks: how many to return per query.
        block_size: rows scored at once; memory is O(Q * block_size + Q * num_documents). Default: about
            16M scores per block.
        best_chunks: also return each returned document's best chunk (re-scored at the end, only for the
            returned documents); `doc_best_chunks` is empty otherwise.
        precision: what `queries` and `vectors` hold: `float32`, or codes made by `quantize` at `int8`, `uint8`,
            `binary` or `ubinary` (scored as in `contextembed.scoring.dot`).

    Ties go to the lower document id / row index.

    >>> v = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]], dtype=np.float32)
    >>> r = exact_search(np.array([[0.0, 1.0]], dtype=np.float32), v, np.array([0, 0, 1]), top_k_documents=2,
    ...                  top_k_chunks=2, block_size=2)
    >>> r.doc_ids.tolist(), r.doc_scores.tolist(), r.doc_best_chunks.tolist(), r.chunk_rows.tolist()
    ([[0, 1]], [[1.0, 0.5]], [[1, 2]], [[1, 2]])
    """
    queries = np.atleast_2d(np.asarray(queries))
    doc_ids = np.asarray(doc_ids)
    if block_size is None:
        block_size = max(1024, (1 << 24) // max(len(queries), 1))
    _check_inputs(queries, vectors, doc_ids, precision, top_k_documents=top_k_documents, top_k_chunks=top_k_chunks,
                  block_size=block_size)

    integer = precision != "float32"
    score_dtype = np.int32 if integer else np.float32
    lowest = np.iinfo(np.int32).min if integer else -np.inf
    num_docs = int(doc_ids[-1]) + 1 if len(doc_ids) else 0
    n_queries = len(queries)
    doc_best = np.full((n_queries, num_docs), lowest, dtype=score_dtype)
    top_rows = np.zeros((n_queries, 0), dtype=np.int64)
    top_scores = np.zeros((n_queries, 0), dtype=score_dtype)

    for start in range(0, len(vectors), block_size):
        block = vectors[start : start + block_size]
        scores = dot(queries, block, precision).astype(score_dtype, copy=False)  # (Q, n)
        block_docs = doc_ids[start : start + len(block)]
        segment_starts = np.flatnonzero(np.r_[True, block_docs[1:] != block_docs[:-1]])
        segment_docs = block_docs[segment_starts]
        segment_max = np.maximum.reduceat(scores, segment_starts, axis=1)  # (Q, documents in block)
        # A document split across blocks keeps the max of its parts.
        doc_best[:, segment_docs] = np.maximum(doc_best[:, segment_docs], segment_max)
        rows = np.broadcast_to(np.arange(start, start + len(block)), scores.shape)
        top_rows, top_scores = _merge_top(top_rows, top_scores, rows, scores, top_k_chunks)

    doc_order, doc_scores = top_k(doc_best, top_k_documents)
    best_rows = (_best_rows(queries, vectors, doc_ids, doc_order, precision) if best_chunks
                 else np.zeros((n_queries, 0), np.int64))
    return SearchResult(
        doc_ids=doc_order,
        doc_scores=doc_scores,
        doc_best_chunks=best_rows,
        chunk_rows=top_rows,
        chunk_scores=top_scores,
    )


def _check_inputs(queries, vectors, doc_ids, precision: str, **counts) -> None:
    check_codes(queries, precision, "queries")
    check_codes(vectors, precision, "vectors")
    if vectors.ndim != 2 or queries.shape[1] != vectors.shape[1]:
        raise ValueError(f"queries {queries.shape} and vectors {vectors.shape} must be 2-D with the same dimension")
    if len(doc_ids) != len(vectors):
        raise ValueError(f"doc_ids has {len(doc_ids)} entries for {len(vectors)} vectors")
    if len(doc_ids) and (np.any(np.diff(doc_ids) < 0) or doc_ids[0] < 0):
        raise ValueError("doc_ids must be non-negative and non-decreasing (each document's rows contiguous)")
    for name, value in counts.items():
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _best_rows(queries, vectors, doc_ids, doc_order, precision) -> np.ndarray:
    """Row of each listed document's best chunk (the first of equal scores), re-scored exactly."""
    starts = np.searchsorted(doc_ids, np.arange(int(doc_ids[-1]) + 2)) if len(doc_ids) else np.zeros(1, int)
    best = np.empty(doc_order.shape, dtype=np.int64)
    for q in range(len(queries)):
        for j, doc in enumerate(doc_order[q]):
            rows = np.arange(starts[doc], starts[doc + 1])
            best[q, j] = rows[int(np.argmax(dot(queries[q : q + 1], vectors[rows], precision)[0]))]
    return best


def _merge_top(rows_a, scores_a, rows_b, scores_b, k):
    """Keep the k best (score desc, row asc) of the running top and a new block."""
    block_idx, block_scores = top_k(scores_b, k)
    block_rows = np.take_along_axis(rows_b, block_idx, axis=1)
    rows = np.concatenate([rows_a, block_rows], axis=1)
    scores = np.concatenate([scores_a, block_scores], axis=1)
    order = np.lexsort((rows, -scores.astype(np.float64)), axis=1)[:, :k]
    return np.take_along_axis(rows, order, axis=1), np.take_along_axis(scores, order, axis=1)
