"""Scoring: MaxSim of queries against documents' chunk vectors, and chunk-level top-k.

A document's score for a query is the best score among its chunks: s(q, d) = max_c q·c.
Vectors are unit-normalised, so the dot product is the cosine.

Codes are scored in the precision they were made with, which the caller states (an int8 array may hold
int8 codes or packed binary bits; nothing in the array tells them apart):

- `float32`: float dot products (the cosine);
- `int8` / `uint8`: exact integer dot products of the codes (uint8 shifted back by 128 first);
- `binary` / `ubinary`: packed sign bits, scored as `d - 2 * Hamming distance` (the dot product of the ±1
  vectors, d = 8 × bytes), exact in integers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from contextembed.modeling import PRECISIONS, Precision

# The array type each precision's codes come in (see `contextembed.quantization.quantize`).
CODE_DTYPES = {"int8": np.int8, "uint8": np.uint8, "binary": np.int8, "ubinary": np.uint8}


def maxsim(queries: np.ndarray, documents: Sequence[np.ndarray], precision: Precision = "float32") -> np.ndarray:
    """Document scores, the best chunk per document: (Q, D) and a list of (n_i, D) -> (Q, len(documents)).

    `precision` is that of both queries and chunk vectors (see the module docstring); integer scores for codes.

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
    scores = dot(queries, np.concatenate(chunks), precision)  # (Q, total chunks)
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


def dot(queries: np.ndarray, vectors: np.ndarray, precision: Precision = "float32") -> np.ndarray:
    """Scores (Q, d) x (N, d) -> (Q, N) in `precision`; codes are multiplied exactly in integers (int32 scores).

    >>> dot(np.array([[100, -100]], dtype=np.int8), np.array([[127, 127], [-127, 127]], dtype=np.int8), "int8").tolist()
    [[0, -25400]]
    >>> q, v = np.packbits([[1, 1, 1, 1, 0, 0, 0, 0]], axis=1), np.packbits([[1, 1, 1, 0, 0, 0, 0, 1]], axis=1)
    >>> dot(q, v, "ubinary").tolist()   # 8 bits, 2 differ: 8 - 2 * 2
    [[4]]
    """
    check_codes(queries, precision, "queries")
    check_codes(vectors, precision, "vectors")
    if precision == "float32":
        return np.asarray(queries, dtype=np.float32) @ np.asarray(vectors, dtype=np.float32).T
    import torch

    q, v = (torch.from_numpy(np.ascontiguousarray(_signed_codes(x, precision))) for x in (queries, vectors))
    try:
        # int32 accumulation, exact; the kernel reads the transposed view directly (an "NT" product).
        return torch._int_mm(q, v.t()).numpy()
    except RuntimeError:  # shapes the int8 kernel does not take
        return (q.long() @ v.T.long()).numpy()


def check_codes(array: np.ndarray, precision: str, name: str = "vectors") -> None:
    """Raise a `ValueError` unless `array` can hold vectors of `precision` (float for float32, int8 or uint8 codes).

    >>> check_codes(np.zeros((1, 4), np.float32), "int8", "queries")
    Traceback (most recent call last):
    ...
    ValueError: queries are float32, but precision='int8' scores int8 codes: quantize them with the same precision
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    dtype = np.asarray(array).dtype
    if precision == "float32":
        if not np.issubdtype(dtype, np.floating):
            raise ValueError(
                f"{name} are {dtype} codes, but precision='float32' scores float vectors: pass the precision the "
                f"codes were made with ({', '.join(repr(p) for p in PRECISIONS[1:])})"
            )
        return
    expected = CODE_DTYPES[precision]
    if dtype != expected:
        raise ValueError(
            f"{name} are {dtype}, but precision={precision!r} scores {np.dtype(expected)} codes: quantize them with "
            "the same precision"
        )


def _signed_codes(codes: np.ndarray, precision: str) -> np.ndarray:
    """int8 operands whose integer dot product is the score: int8 as is, uint8 shifted, bits as ±1."""
    if precision == "int8":
        return codes
    if precision == "uint8":
        return (codes.astype(np.int16) - 128).astype(np.int8)
    packed = codes if precision == "ubinary" else (codes.astype(np.int16) + 128).astype(np.uint8)
    return (np.unpackbits(packed, axis=-1).astype(np.int8) * 2 - 1).astype(np.int8)


def _as_2d(array, name: str) -> np.ndarray:
    array = np.asarray(array.cpu() if hasattr(array, "cpu") else array)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 1-D or 2-D array of vectors, got shape {array.shape}")
    return array
