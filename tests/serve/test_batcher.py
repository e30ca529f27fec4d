"""The server's `Batcher` on a tiny model: merged calls give every request exactly its own vectors, requests of
another kind or over the merge budget wait for the next call, a full queue is refused, closing finishes the queue."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import contextembed
from contextembed.serve.batcher import Batcher, Overloaded
from contextembed.serve.protocol import Job, RequestError, tokenize_job
from tests.modeling.test_windowing import long_document

DOCUMENTS = [["The rent is due on the first.", "She pays it late."], ["Ocean Drive 88."],
             ["A short one.", "Then a second sentence", "and a third."], long_document(40, seed=3)]


class Recording:
    """The model, with every call recorded; `gate` holds calls until it is set, `entered` says one has begun."""

    def __init__(self, model):
        self.model, self.calls = model, []
        self.gate, self.entered = threading.Event(), threading.Event()
        self.device = model.device

    def encode_tokenized(self, rows, **options):
        self.calls.append((len(rows), options))
        self.entered.set()
        self.gate.wait(30)
        return self.model.encode_tokenized(rows, **options)

    def hold(self, batcher, model):
        """A request the worker is busy with until `gate` is set: what is submitted next queues behind it."""
        blocker = batcher.submit(job(model, [["Hold the worker."]]))
        assert self.entered.wait(30)
        return blocker


@pytest.fixture(scope="module")
def model(built):
    return contextembed.load(built["bert"][0])


def job(model, documents, precision="float32", task="document") -> Job:
    result = Job(api="voyage", model="tiny", documents=documents, task=task, precision=precision, output_dim=None,
                 encoding="float")
    tokenize_job(result, model.processor)
    return result


def test_merged_requests_get_their_own_vectors(model):
    recording = Recording(model)
    batcher = Batcher(recording, max_tokens_per_batch=64)
    try:
        blocker = recording.hold(batcher, model)
        futures = [batcher.submit(job(model, [d])) for d in DOCUMENTS] + [batcher.submit(job(model, DOCUMENTS[:2]))]
        recording.gate.set()
        blocker.result(30)
        got = [f.result(30) for f in futures]
    finally:
        batcher.close()
    assert [n for n, _ in recording.calls] == [1, len(DOCUMENTS) + 2]  # the queued requests: one call
    assert recording.calls[1][1]["max_tokens_per_batch"] == 64  # its passes keep the pass budget
    for document, vectors in zip(DOCUMENTS + [None], got):
        expected = model.encode_documents([document] if document else DOCUMENTS[:2])
        assert len(vectors) == len(expected)
        for a, b in zip(vectors, expected):
            assert a.shape == b.shape  # one vector per chunk
            np.testing.assert_allclose(a, b, atol=1e-6)


def test_other_kinds_and_the_merge_budget_wait_for_the_next_call(model):
    recording = Recording(model)
    small = job(model, [DOCUMENTS[1]])
    batcher = Batcher(recording, max_merged_tokens=small.tokens * 2)
    try:
        blocker = recording.hold(batcher, model)
        futures = [batcher.submit(small), batcher.submit(job(model, [DOCUMENTS[1]], precision="int8")),
                   batcher.submit(job(model, [DOCUMENTS[1]])), batcher.submit(job(model, [DOCUMENTS[1]]))]
        recording.gate.set()
        blocker.result(30)
        got = [f.result(30) for f in futures]
    finally:
        batcher.close()
    # float32 ×2 (the budget), then int8 (another kind, the oldest left), then the last float32
    assert [(n, o["precision"]) for n, o in recording.calls[1:]] == [(2, "float32"), (1, "int8"), (1, "float32")]
    assert got[1][0].dtype == np.int8
    np.testing.assert_array_equal(got[1][0], model.encode_documents([DOCUMENTS[1]], precision="int8")[0])


def test_without_merging_each_request_is_its_own_call(model):
    recording = Recording(model)
    batcher = Batcher(recording, merge=False, merge_wait=0.05)
    try:
        blocker = recording.hold(batcher, model)
        futures = [batcher.submit(job(model, [d])) for d in DOCUMENTS]
        recording.gate.set()
        blocker.result(30)
        [f.result(30) for f in futures]
    finally:
        batcher.close()
    assert [n for n, _ in recording.calls] == [1] * (len(DOCUMENTS) + 1)


def test_the_worker_waits_briefly_for_more_requests_when_clients_are_concurrent(model):
    recording = Recording(model)
    batcher = Batcher(recording, merge_wait=2.0)  # far longer than the pauses below
    try:
        blocker = recording.hold(batcher, model)
        merged = [batcher.submit(job(model, [d])) for d in DOCUMENTS[:2]]
        recording.gate.set()
        [f.result(30) for f in [blocker, *merged]]  # the last call merged two requests: clients are concurrent
        first = batcher.submit(job(model, [DOCUMENTS[0]]))
        time.sleep(0.2)
        second = batcher.submit(job(model, [DOCUMENTS[1]]))
        first.result(30), second.result(30)
        alone = batcher.submit(job(model, [DOCUMENTS[2]]))  # after a call of two: waits 2 s, finds none, runs alone
        alone.result(30)
        lone = batcher.submit(job(model, [DOCUMENTS[0]]))  # the last call held one request: no waiting
        time.sleep(0.2)
        after = batcher.submit(job(model, [DOCUMENTS[1]]))
        lone.result(30), after.result(30)
    finally:
        batcher.close()
    assert [n for n, _ in recording.calls] == [1, 2, 2, 1, 1, 1]


def test_queries_are_embedded_one_chunk_each(model):
    batcher = Batcher(model)
    try:
        got = batcher.submit(job(model, [["rent due", "who pays"]], task="query")).result(30)
    finally:
        batcher.close()
    np.testing.assert_allclose(got[0], model.encode_queries(["rent due", "who pays"]), atol=1e-6)


def test_a_full_queue_is_refused_and_closing_finishes_the_queue(model):
    recording = Recording(model)
    batcher = Batcher(recording, max_queued_chunks=3)
    blocker = recording.hold(batcher, model)
    queued = batcher.submit(job(model, [DOCUMENTS[2]]))  # 3 chunks: the queue is full
    with pytest.raises(Overloaded, match=r"at capacity \(3 chunks queued, limit 3\)") as refused:
        batcher.submit(job(model, [DOCUMENTS[1]]))
    assert refused.value.status == 503 and refused.value.headers == {"Retry-After": "1"}
    assert batcher.alive
    closing = threading.Thread(target=batcher.close)
    closing.start()
    recording.gate.set()
    closing.join(30)
    assert not batcher.alive  # what /health reads: closed, its worker gone
    assert blocker.result(0).__len__() == 1 and len(queued.result(0)[0]) == 3  # both finished before close returned
    with pytest.raises(RequestError, match="shutting down"):
        batcher.submit(job(model, [DOCUMENTS[1]]))


def test_a_full_call_does_not_wait(model):
    recording = Recording(model)
    one = job(model, [DOCUMENTS[1]])
    batcher = Batcher(recording, merge_wait=60.0, max_merged_tokens=one.tokens * 2)
    try:
        blocker = recording.hold(batcher, model)
        merged = [batcher.submit(job(model, [DOCUMENTS[1]])) for _ in range(2)]
        recording.gate.set()
        [f.result(30) for f in [blocker, *merged]]  # the last call merged two: the next one may wait
        full = [batcher.submit(job(model, [DOCUMENTS[1]])) for _ in range(2)]
        [f.result(10) for f in full]  # the queue holds a full call: it runs at once, not after 60 s
    finally:
        batcher.close()
    assert [n for n, _ in recording.calls] == [1, 2, 2]


def test_the_wait_ends_when_as_many_requests_as_clients_at_work_are_back(model):
    """The clients at work are the last call's requests plus those that arrived while it ran; once that many are
    queued again the call runs at once, however long `merge_wait` is."""
    recording = Recording(model)
    batcher = Batcher(recording, merge_wait=60.0)
    try:
        blocker = recording.hold(batcher, model)
        merged = [batcher.submit(job(model, [d])) for d in DOCUMENTS[:2]]  # arrive while the blocker runs
        recording.gate.set()
        blocker.result(30)
        third = batcher.submit(job(model, [DOCUMENTS[2]]))  # the blocker's client is back: three at work
        [f.result(10) for f in [*merged, third]]
        again = [batcher.submit(job(model, [d])) for d in DOCUMENTS[:2]]
        time.sleep(0.2)  # the third client is slower: the worker waits for it, not for 60 s
        again.append(batcher.submit(job(model, [DOCUMENTS[2]])))
        [f.result(10) for f in again]
    finally:
        batcher.close()
    assert [n for n, _ in recording.calls] == [1, 3, 3]


def test_a_request_is_tokenised_once_into_the_rows_the_model_reads(model):
    documents = [DOCUMENTS[0], DOCUMENTS[3]]
    counts = [sum(len(ids) for ids in model.processor.tokenize_text(d)) for d in documents]
    document_job = Job(api="voyage", model="tiny", documents=documents, task="document", precision="float32",
                       output_dim=None, encoding="float")
    assert tokenize_job(document_job, model.processor) == counts  # each document's tokens, for the limits
    assert document_job.rows == model.processor.tokenize_documents(documents, task="document")
    assert document_job.tokens == sum(counts)  # the usage
    query_job = job(model, documents, task="query")  # each chunk alone, as a query
    assert query_job.rows == model.processor.tokenize_documents([[c] for d in documents for c in d], task="query")
    assert query_job.tokens == sum(counts)


def test_a_chunk_with_no_tokens_fails_its_request_before_it_is_queued(model):
    """Characters the tokenizer drops leave a chunk with nothing to embed: the Python API's own error, raised when
    the request is checked, so it never reaches a merged call and fails other clients' requests with it."""
    with pytest.raises(ValueError, match="document 0, chunk 1 is empty: it has no tokens"):
        job(model, [["The rent is due.", "\x00\x01"]])
    with pytest.raises(ValueError, match="query 2 is empty: it has no tokens"):
        job(model, [["rent", "due"], ["\x00"]], task="query")
