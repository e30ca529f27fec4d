"""contextembed.mixing: a chunk's contextual vector mixed with its vector encoded alone, against a loop oracle."""

from __future__ import annotations

import numpy as np
import pytest

from contextembed.mixing import check_local_mix, mix_alone


def unit(n, d, seed):
    x = np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("weight", [0.0, 0.1, 0.5, 1.0])
def test_mix_equals_a_loop_oracle(weight):
    contextual, alone = unit(7, 16, 0), unit(7, 16, 1)
    mixed = mix_alone(contextual, alone, weight)
    for row, (c, a) in enumerate(zip(contextual, alone)):
        v = [(1 - weight) * float(ci) + weight * float(ai) for ci, ai in zip(c, a)]
        norm = sum(x * x for x in v) ** 0.5
        np.testing.assert_allclose(mixed[row], [x / norm for x in v], atol=1e-6)
    assert mixed.dtype == np.float32 and np.allclose(np.linalg.norm(mixed, axis=1), 1.0, atol=1e-6)


def test_the_ends_of_the_range_are_each_vector_and_zero_rows_stay_zero():
    contextual, alone = unit(3, 8, 2), unit(3, 8, 3)
    np.testing.assert_allclose(mix_alone(contextual, alone, 0.0), contextual, atol=1e-6)
    np.testing.assert_allclose(mix_alone(contextual, alone, 1.0), alone, atol=1e-6)
    contextual[1] = alone[1] = 0.0  # an empty chunk kept with empty_chunks="zero"
    assert not mix_alone(contextual, alone, 0.3)[1].any()


@pytest.mark.parametrize("weight", [-0.1, 1.5, float("nan"), "0.1", None, True])
def test_bad_weights_are_named(weight):
    with pytest.raises(ValueError, match=r"local_mix must be a number in \[0, 1\]"):
        check_local_mix(weight)


def test_shapes_must_match():
    with pytest.raises(ValueError, match=r"contextual \(2, 8\) and alone \(3, 8\) vectors must have one shape"):
        mix_alone(unit(2, 8, 0), unit(3, 8, 1), 0.5)
