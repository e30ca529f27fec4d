"""The grouping rule every adapter shares: chunks back into documents, in order, or a clear error."""

from __future__ import annotations

import numpy as np
import pytest

import contextembed
from contextembed.integrations import encode_grouped, group_chunks

DOCUMENTS = [["the lease of the street", "the rent is monthly"], ["the lease of the company", "the rent is monthly",
                                                                 "she is the tenant"]]


def test_shuffled_chunks_get_the_vectors_of_their_documents(built):
    encoder = contextembed.load(str(built["bert"][0]))
    expected = encoder.encode_documents(DOCUMENTS)
    flat = [(d, k, text) for d, chunks in enumerate(DOCUMENTS) for k, text in enumerate(chunks)]
    order = np.random.default_rng(0).permutation(len(flat))
    shuffled = [flat[i] for i in order]
    vectors = encode_grouped(encoder, [t for _, _, t in shuffled], [f"doc{d}" for d, _, _ in shuffled],
                             [k for _, k, _ in shuffled])
    for (d, k, _), vector in zip(shuffled, vectors):
        np.testing.assert_allclose(vector, expected[d][k], atol=1e-6)
    # The shared sentence has a different vector in each document: the grouping is what makes it contextual.
    assert np.abs(expected[0][1] - expected[1][1]).max() > 1e-4


@pytest.mark.parametrize(("sources", "positions", "kwargs", "message"), [
    (["a", None], [0, 1], {}, "chunk 1 has no source document id"),
    (["a", "a"], [0, None], {}, "chunk 1 of document 'a' has no position"),
    (["a", "a"], [0, True], {}, "chunk 1 of document 'a' has no position"),
    (["a", "a"], [3, 3], {}, "chunks 0 and 1 of document 'a' both claim position 3"),
    (["a"], [0, 1], {}, "1 source ids for 2 positions"),
    (["a"], [0], {"missing_source": "skip"}, "missing_source must be one of"),
])
def test_bad_groupings_name_the_chunk(sources, positions, kwargs, message):
    with pytest.raises(ValueError, match=message):
        group_chunks(sources, positions, **kwargs)


def test_empty_text_is_refused_before_encoding(built):
    encoder = contextembed.load(str(built["bert"][0]))
    with pytest.raises(ValueError, match=r"chunk 1 \(document 'a'\) has empty text"):
        encode_grouped(encoder, ["rent", "  "], ["a", "a"], [0, 1])
