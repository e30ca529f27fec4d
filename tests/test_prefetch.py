"""contextembed.prefetch: items produced in a thread ahead of the caller keep their order, lose nothing, raise in the
caller, and stop when the caller stops; the encoder with prefetching gives what it gives without."""

from __future__ import annotations

import itertools
import threading
import time

import numpy as np
import pytest

import contextembed
from contextembed.prefetch import prefetched


@pytest.mark.parametrize("depth", [1, 3])
def test_order_is_kept_and_nothing_is_lost(depth):
    assert list(prefetched(iter(range(5000)), depth=depth)) == list(range(5000))
    assert list(prefetched(iter([]))) == []


def test_an_error_while_producing_surfaces_in_the_caller_after_what_came_before():
    def items():
        yield from range(7)
        raise ValueError("document 7 is broken")

    received = []
    with pytest.raises(ValueError, match="document 7 is broken"):
        for item in prefetched(items()):
            received.append(item)
    assert received == list(range(7))


def producer_threads() -> int:
    return sum(t.name == "contextembed-prefetch" and t.is_alive() for t in threading.enumerate())


def test_a_caller_that_stops_stops_the_producer():
    """An interrupt (or any error) in the caller, or a caller that stops early: the thread ends, nothing runs on."""
    produced = []

    def endless():
        for i in itertools.count():
            produced.append(i)
            yield i

    before = producer_threads()
    with pytest.raises(KeyboardInterrupt):
        for item in prefetched(endless(), depth=2):
            if item == 10:
                raise KeyboardInterrupt
    assert producer_threads() == before
    count = len(produced)
    time.sleep(0.3)
    assert len(produced) == count <= 10 + 2 + 2  # what was in flight, then nothing more

    source = prefetched(endless())
    assert next(source) == 0
    source.close()
    assert producer_threads() == before


@pytest.fixture
def encoder(built):
    return contextembed.load(str(built["bert"][0]))


def documents(count: int, seed: int = 0) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    words = "the lease rent tenant company street table row she pays monthly".split()
    return [[" ".join(rng.choice(words, size=int(rng.integers(2, 12)))) for _ in range(int(rng.integers(1, 6)))]
            for _ in range(count)]


def test_the_encoder_gives_the_same_vectors_with_and_without_prefetching(encoder):
    docs = documents(300)
    encoder.prefetch, encoder.prepare_group = 2, 256
    streamed = encoder.encode_documents(docs, batch_size=8, max_tokens_per_batch=128)
    encoder.prefetch, encoder.prepare_group = 0, None
    at_once = encoder.encode_documents(docs, batch_size=8, max_tokens_per_batch=128)
    assert len(streamed) == len(at_once) == 300
    for a, b, doc in zip(streamed, at_once, docs):
        assert a.shape == (len(doc), 16)
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_a_bad_document_in_a_later_group_is_named_by_its_own_index(encoder):
    docs = documents(200)
    docs[150][0] = "   "
    encoder.prefetch, encoder.prepare_group = 2, 32
    with pytest.raises(ValueError, match=r"document 150, chunk 0 is empty"):
        encoder.encode_documents(docs)
