"""Scores of queries against vectors, in the precision the vectors were made with (MaxSim, the tie rule and search
are in `contextembed.retrieval`). Vectors are unit-normalised, so the float dot product is the cosine.

Codes are scored in the precision they were made with, which the caller states (an int8 array may hold
int8 codes or packed binary bits; nothing in the array tells them apart):

- `float32`: float dot products (the cosine), summed in float64 and rounded to float32, so that a score depends on
  the two vectors alone: a float32 matrix product moves a score by an ulp or two with the shape of the matrices,
  which would let the shape of a batch decide between two copies of one vector;
- `int8` / `uint8`: exact integer dot products of the codes (uint8 shifted back by 128 first);
- `binary` / `ubinary`: packed sign bits, scored as `d - 2 * Hamming distance` (the dot product of the ±1
  vectors, d = 8 × bytes), exact in integers.
"""

from __future__ import annotations

import numpy as np

from contextembed.modeling import PRECISIONS, Precision

# The array type each precision's codes come in (see `contextembed.quantization.quantize`).
CODE_DTYPES = {"int8": np.int8, "uint8": np.uint8, "binary": np.int8, "ubinary": np.uint8}
_FLOAT_BLOCK = 16384  # vectors turned into float64 at once


def dot(queries: np.ndarray, vectors: np.ndarray, precision: Precision = "float32") -> np.ndarray:
    """Scores (Q, d) x (N, d) -> (Q, N) in `precision`: float32 scores that depend on the two vectors alone (see the
    module docstring), or codes multiplied exactly in integers (int32 scores).

    >>> v = np.random.default_rng(0).normal(size=(500, 64)).astype(np.float32)
    >>> q = v[:3]
    >>> bool((dot(q, v)[:, 7] == dot(q, v[7:8])[:, 0]).all())   # the same score in any matrix
    True

    >>> dot(np.array([[100, -100]], dtype=np.int8), np.array([[127, 127], [-127, 127]], dtype=np.int8), "int8").tolist()
    [[0, -25400]]
    >>> q, v = np.packbits([[1, 1, 1, 1, 0, 0, 0, 0]], axis=1), np.packbits([[1, 1, 1, 0, 0, 0, 0, 1]], axis=1)
    >>> dot(q, v, "ubinary").tolist()   # 8 bits, 2 differ: 8 - 2 * 2
    [[4]]
    """
    check_codes(queries, precision, "queries")
    check_codes(vectors, precision, "vectors")
    if precision == "float32":
        queries = np.asarray(queries, dtype=np.float32).astype(np.float64)
        vectors = np.asarray(vectors, dtype=np.float32)
        out = np.empty((len(queries), len(vectors)), dtype=np.float32)
        for start in range(0, len(vectors), _FLOAT_BLOCK):  # bounds the float64 copy of the vectors
            block = vectors[start : start + _FLOAT_BLOCK].astype(np.float64)
            # One query: einsum's loop is several times faster than a float64 BLAS call on these small shapes.
            out[:, start : start + _FLOAT_BLOCK] = (np.einsum("nd,d->n", block, queries[0])[None] if len(queries) == 1
                                                    else queries @ block.T)
        return out
    import torch

    # Fresh C-ordered copies: torch takes writable arrays only (an index's vectors are a read-only memory map), and
    # its int8 kernel misreads a row stride of 0 (numpy's `q[None]` of one query) as data.
    q, v = (torch.from_numpy(np.array(_signed_codes(x, precision), order="C")) for x in (queries, vectors))
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
