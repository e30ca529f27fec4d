"""Deterministic int8 / binary codes and their ranking against float."""

from __future__ import annotations

import numpy as np
import pytest

from contextembed.quantization import PRECISIONS, quantize
from contextembed.scoring import dot


def unit(n, d, seed=0):
    x = np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_codes_depend_only_on_the_vector():
    x = unit(50, 64)
    assert np.array_equal(quantize(x, "int8"), np.concatenate([quantize(x[:7], "int8"), quantize(x[7:], "int8")]))
    assert np.array_equal(quantize(x, "int8"), quantize(x.copy(), "int8"))


@pytest.mark.parametrize("precision", PRECISIONS)
def test_shapes_and_dtypes(precision):
    codes = quantize(unit(5, 64), precision)
    expected = {"float32": (np.float32, 64), "int8": (np.int8, 64), "uint8": (np.uint8, 64),
                "binary": (np.int8, 8), "ubinary": (np.uint8, 8)}[precision]
    assert codes.dtype == expected[0] and codes.shape == (5, expected[1])


def test_binary_is_ubinary_minus_128():
    x = unit(5, 64)
    assert np.array_equal(quantize(x, "binary").astype(np.int16) + 128, quantize(x, "ubinary"))


def test_int8_ranking_agrees_with_float():
    corpus, queries = unit(2000, 256, seed=1), unit(20, 256, seed=2)
    float_top = np.argsort(-(queries @ corpus.T), axis=1)[:, :10]
    int_scores = dot(quantize(queries, "int8"), quantize(corpus, "int8"), "int8")
    int_top = np.argsort(-int_scores, axis=1, kind="stable")[:, :10]
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(float_top, int_top)])
    assert overlap >= 0.9  # stated threshold: top-10 overlap of at least 90%


def test_errors():
    with pytest.raises(ValueError, match=r"precision must be one of .*got 'int4'"):
        quantize(unit(2, 8), "int4")
    with pytest.raises(ValueError, match="divisible by 8"):
        quantize(unit(2, 12), "binary")
