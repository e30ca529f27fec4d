"""Mixing a chunk's contextual vector with its vector encoded alone (`encode_documents(..., local_mix=w)`).

Late chunking's vector of a chunk carries its document; training for a document's identity makes it carry mostly
that, so inside a document the chunks lose their own words and the supporting context ranks lower than it should.
The same model's vector of the chunk encoded by itself keeps those words. `mix_alone` takes
`normalize((1 - w) * contextual + w * alone)`: copies of one sentence in near-identical documents get the same
alone vector, so which copy ranks first is still decided by the contextual part.
"""

from __future__ import annotations

import math
import numbers

import numpy as np


def check_local_mix(weight) -> float:
    """The weight as a float in [0, 1], or a ValueError naming what is wrong.

    >>> check_local_mix(0.1)
    0.1
    >>> check_local_mix(np.float32(0.5))
    0.5
    >>> check_local_mix(True)
    Traceback (most recent call last):
    ...
    ValueError: local_mix must be a number in [0, 1], got True
    """
    if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not math.isfinite(weight) \
            or not 0 <= weight <= 1:
        raise ValueError(f"local_mix must be a number in [0, 1], got {weight!r}")
    return float(weight)


def mix_alone(contextual: np.ndarray, alone: np.ndarray, weight: float) -> np.ndarray:
    """Unit rows of `(1 - weight) * contextual + weight * alone` (rows of unit vectors); an all-zero row (an empty
    chunk kept with `empty_chunks="zero"`) stays zero.

    >>> mix_alone(np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]), 0.5).round(4)
    array([[0.7071, 0.7071]], dtype=float32)
    >>> mix_alone(np.array([[0.6, 0.8], [0.0, 0.0]]), np.array([[0.6, 0.8], [0.0, 0.0]]), 0.3).round(4)
    array([[0.6, 0.8],
           [0. , 0. ]], dtype=float32)
    """
    if contextual.shape != alone.shape:
        raise ValueError(f"contextual {contextual.shape} and alone {alone.shape} vectors must have one shape")
    mixed = (1 - weight) * contextual.astype(np.float32) + weight * alone.astype(np.float32)
    norms = np.linalg.norm(mixed, axis=-1, keepdims=True)
    return np.divide(mixed, norms, out=np.zeros_like(mixed), where=norms > 0).astype(np.float32)
