"""Scores in each precision: exact integers for codes, float32 scores that depend on the two vectors alone."""

from __future__ import annotations

import numpy as np
import pytest

from contextembed.quantization import quantize
from contextembed.scoring import dot


def unit(n, d, seed=0):
    x = np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_int8_dot_is_exact():
    a = quantize(unit(5, 2048), "int8")
    b = quantize(unit(40, 2048, seed=3), "int8")
    assert np.array_equal(dot(a, b, "int8"), a.astype(np.int64) @ b.astype(np.int64).T)
    with pytest.raises(ValueError, match="queries are float32, but precision='int8' scores int8 codes"):
        dot(unit(1, 8), quantize(unit(2, 8), "int8"), "int8")
    with pytest.raises(ValueError, match="vectors are int8 codes, but precision='float32' scores float vectors"):
        dot(unit(1, 8), quantize(unit(2, 8), "int8"))


def numpy_scores(queries, vectors, precision):
    """The score each precision stands for, from numpy alone (not from the `dot` under test): float products,
    integer products of the signed codes, and for bits the sum of ±1 products (= d - 2 x Hamming distance)."""
    if precision == "float32":
        return queries.astype(np.float32) @ vectors.astype(np.float32).T
    if precision in ("int8", "uint8"):
        shift = 128 if precision == "uint8" else 0
        return (queries.astype(np.int64) - shift) @ (vectors.astype(np.int64) - shift).T
    shift = 128 if precision == "binary" else 0  # binary bytes are the ubinary bytes minus 128
    signs = [np.unpackbits((x.astype(np.int64) + shift).astype(np.uint8), axis=1).astype(np.int64) * 2 - 1
             for x in (queries, vectors)]
    return signs[0] @ signs[1].T


@pytest.mark.parametrize("precision", ["int8", "uint8", "binary", "ubinary"])
def test_codes_score_the_same_from_any_view_of_the_query(precision):
    """One query as `q[None]` (numpy gives that row a stride of 0, which torch's int8 kernel misread as data) or as a
    read-only memory map's rows scores exactly as a plain copy does."""
    vectors = quantize(unit(33, 64, seed=2), precision)
    query = quantize(unit(1, 64, seed=3), precision)[0]
    expected = numpy_scores(query[None].copy(), vectors, precision)
    assert np.array_equal(dot(query[None], vectors, precision), expected)
    read_only = vectors.copy()
    read_only.flags.writeable = False
    assert np.array_equal(dot(query[None], read_only, precision), expected)


def test_float_scores_do_not_depend_on_the_matrix_they_are_computed_in():
    """A float32 score is the float64 sum rounded: the same in a block of one row as in the whole corpus."""
    vectors, queries = unit(3000, 384, seed=4), unit(17, 384, seed=5)
    whole = dot(queries, vectors)
    for rows in (slice(5, 6), slice(100, 357), slice(2999, 3000)):
        assert np.array_equal(dot(queries, vectors[rows]), whole[:, rows])
    assert np.array_equal(dot(queries[3:4], vectors), whole[3:4])
