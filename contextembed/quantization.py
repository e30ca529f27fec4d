"""Deterministic int8 / uint8 / binary codes for unit vectors, with the scheme stored in the checkpoint.

sentence-transformers' `precision="int8"` calibrates ranges on each call, so the same text gets
different codes in different calls. Here the scale depends only on the dimension and the
checkpoint's `int8_clip_sigmas`: a unit vector's coordinates have standard deviation about
1/sqrt(d), and the code range [-127, 127] covers `int8_clip_sigmas` of them.
"""

from __future__ import annotations

import math

import numpy as np

from contextembed.modeling import INT8_SCHEMES, PRECISIONS, Int8Scheme, Precision


def int8_scale(dim: int, clip_sigmas: float = 5.0) -> float:
    """Multiplier that maps a coordinate of a unit vector of size `dim` to int8 code units.

    >>> round(int8_scale(4, clip_sigmas=2.0), 3)
    127.0
    """
    return 127.0 * math.sqrt(dim) / clip_sigmas


def codes_raw_vectors(scheme: Int8Scheme) -> bool:
    """Whether a scheme's int8 codes are made from the model's unnormalised output (pplx-embed's schemes) rather
    than from unit vectors.

    >>> codes_raw_vectors("unit"), codes_raw_vectors("tanh"), codes_raw_vectors("bounded")
    (False, True, True)
    """
    return scheme != "unit"


def check_finite(vectors: np.ndarray, what: str) -> None:
    """A `ValueError` naming the first row of `vectors` (..., d) that holds NaN or an infinity."""
    finite = np.isfinite(vectors)
    if not finite.all():
        row = np.argwhere(~finite.all(axis=-1))[0]
        raise ValueError(f"{what} hold NaN or infinite values (row {', '.join(map(str, row))}): a NaN has no code")


def quantize(embeddings: np.ndarray, precision: Precision, clip_sigmas: float = 5.0,
             scheme: Int8Scheme = "unit") -> np.ndarray:
    """Code float vectors (..., d) at `precision`; the same vector always gets the same code.

    int8, `scheme="unit"` (unit vectors): `clip(round(x * 127 * sqrt(d) / clip_sigmas), -127, 127)`;
    `scheme="tanh"` (unnormalised vectors, pplx-embed-context-v1): `round(tanh(x) * 127)`; `scheme="bounded"` (a
    tanh head's unnormalised output, in (-1, 1): pplx-embed-v2-context): `round(x * 127)`; uint8: int8 plus 128.
    ubinary: sign bits `x > 0` packed into d/8 uint8; binary: the same bytes minus 128, as int8.

    >>> x = np.array([[0.5, -0.5, 0.5, -0.5]], dtype=np.float32)
    >>> quantize(x, "int8", clip_sigmas=2.0).tolist()
    [[64, -64, 64, -64]]
    >>> quantize(np.array([[3.0, -0.5, 0.004, 0.0]]), "int8", scheme="tanh").tolist()
    [[126, -59, 1, 0]]
    >>> quantize(np.tanh(np.array([[3.0, -0.5, 0.004, 0.0]])), "int8", scheme="bounded").tolist()
    [[126, -59, 1, 0]]
    >>> quantize(x, "uint8", clip_sigmas=2.0).tolist()
    [[192, 64, 192, 64]]
    >>> quantize(np.array([[1, -1, 1, 1, -1, -1, -1, 1.0]]), "ubinary").tolist()
    [[177]]
    >>> quantize(np.array([[0.5, np.nan]]), "int8")
    Traceback (most recent call last):
    ...
    ValueError: the vectors to code hold NaN or infinite values (row 0): a NaN has no code
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    embeddings = np.asarray(embeddings, dtype=np.float32)
    if precision == "float32":
        return embeddings
    check_finite(embeddings, "the vectors to code")
    dim = embeddings.shape[-1]
    if scheme not in INT8_SCHEMES:
        raise ValueError(f"scheme must be one of {INT8_SCHEMES}, got {scheme!r}")
    if precision in ("int8", "uint8"):
        if scheme == "unit":
            scaled = embeddings * int8_scale(dim, clip_sigmas)
        else:
            scaled = (np.tanh(embeddings) if scheme == "tanh" else embeddings) * 127.0
        codes = np.clip(np.rint(scaled), -127, 127).astype(np.int8)
        return codes if precision == "int8" else (codes.astype(np.int16) + 128).astype(np.uint8)
    if dim % 8:
        raise ValueError(f"binary precision needs a dimension divisible by 8, got {dim}")
    bits = np.packbits(embeddings > 0, axis=-1)
    return bits if precision == "ubinary" else (bits.astype(np.int16) - 128).astype(np.int8)
