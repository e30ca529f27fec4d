"""Scoring: MaxSim of queries against documents' chunk vectors, and chunk-level top-k.

A document's score for a query is the best score among its chunks: s(q, d) = max_c q·c.
Vectors are unit-normalised, so the dot product is the cosine.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def maxsim(queries: np.ndarray, documents: Sequence[np.ndarray]) -> np.ndarray:
    """Document scores, the best chunk per document: (Q, D) and a list of (n_i, D) -> (Q, len(documents)).

    Works on float vectors and on int8 codes (scored with exact integer dot products).

    >>> q = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> docs = [np.array([[0.5, 0.75], [1.0, 0.0]]), np.array([[0.0, 1.0]])]
    >>> maxsim(q, docs).tolist()
    [[1.0, 0.0], [0.75, 1.0]]
    """
    queries = _as_2d(queries, "queries")
    if len(documents) == 0:
        return np.zeros((len(queries), 0), dtype=np.float32)
    chunks = [_as_2d(doc, f"documents[{i}]") for i, doc in enumerate(documents)]
    for i, doc in enumerate(chunks):
        if doc.shape[1] != queries.shape[1]:
            raise ValueError(f"documents[{i}] has dimension {doc.shape[1]}, queries have {queries.shape[1]}")
        if len(doc) == 0:
            raise ValueError(f"documents[{i}] has no chunk vectors")
    scores = dot(queries, np.concatenate(chunks))  # (Q, total chunks)
    starts = np.cumsum([0] + [len(doc) for doc in chunks[:-1]])
    return np.maximum.reduceat(scores, starts, axis=1)


def top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Columns of the k largest scores per row and their scores, best first; ties go to the lower column.

    >>> idx, val = top_k(np.array([[0.1, 0.9, 0.5, 0.9]]), k=3)
    >>> idx.tolist(), val.tolist()
    ([[1, 3, 2]], [[0.9, 0.9, 0.5]])
    """
    if not isinstance(k, (int, np.integer)) or k <= 0:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    scores = np.atleast_2d(scores)
    n_rows, n_cols = scores.shape
    k = min(k, n_cols)
    if k == 0:
        return np.zeros((n_rows, 0), dtype=np.int64), scores[:, :0]
    if k < n_cols:
        import torch

        # torch.topk is several times faster than argpartition here; ties are settled below either way.
        candidates = torch.topk(torch.from_numpy(np.ascontiguousarray(scores)), k, dim=1, sorted=False).indices.numpy()
    else:
        candidates = np.broadcast_to(np.arange(n_cols), (n_rows, n_cols))
    candidate_scores = np.take_along_axis(scores, candidates, axis=1)
    order = np.lexsort((candidates, -candidate_scores.astype(np.float64)), axis=1)
    indices = np.take_along_axis(candidates, order, axis=1).astype(np.int64)
    if k < n_cols:
        # argpartition may cut a run of equal scores arbitrarily; settle those rows by column order.
        kth = candidate_scores.min(axis=1, keepdims=True)
        at_kth = (scores == kth).sum(axis=1) > (candidate_scores == kth).sum(axis=1)
        for row in np.flatnonzero(at_kth):
            cols = np.flatnonzero(scores[row] >= kth[row, 0])
            indices[row] = cols[np.lexsort((cols, -scores[row, cols].astype(np.float64)))[:k]]
    return indices, np.take_along_axis(scores, indices, axis=1)


def dot(queries: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Dot products (Q, D) x (N, D) -> (Q, N); int8 codes are multiplied exactly in integers.

    >>> dot(np.array([[100, -100]], dtype=np.int8), np.array([[127, 127], [-127, 127]], dtype=np.int8)).tolist()
    [[0, -25400]]
    """
    if queries.dtype == np.int8 and vectors.dtype == np.int8:
        import torch

        q, v = torch.from_numpy(np.ascontiguousarray(queries)), torch.from_numpy(np.ascontiguousarray(vectors))
        try:
            # int32 accumulation, exact; the kernel reads the transposed view directly (an "NT" product).
            return torch._int_mm(q, v.t()).numpy()
        except RuntimeError:  # shapes the int8 kernel does not take
            return (q.long() @ v.T.long()).numpy()
    if queries.dtype == np.int8 or vectors.dtype == np.int8:
        raise ValueError("score int8 codes against int8 codes: quantize the queries with the same scheme")
    return np.asarray(queries, dtype=np.float32) @ np.asarray(vectors, dtype=np.float32).T


def _as_2d(array, name: str) -> np.ndarray:
    array = np.asarray(array.cpu() if hasattr(array, "cpu") else array)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 1-D or 2-D array of vectors, got shape {array.shape}")
    return array
