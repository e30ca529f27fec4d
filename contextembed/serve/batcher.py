"""Concurrent requests merged into token-budgeted forward passes, on one worker thread, with a bounded queue.

Requests wait in a queue bounded by chunks; a full queue is refused at once (`Overloaded`, answered 503 with
`Retry-After`) instead of growing memory. The worker takes the oldest job and every queued job with the same
(task, precision, dimension) until `max_tokens_per_batch` tokens are gathered, and runs them in one call of the
model, whose own batching never splits a document; each job gets back exactly its documents' vectors, in order.
Model work never runs on the event loop.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future

import numpy as np

from contextembed.serve.protocol import Job, RequestError

logger = logging.getLogger(__name__)


class Overloaded(RequestError):
    def __init__(self, queued: int, limit: int):
        super().__init__(f"the server is at capacity ({queued} chunks queued, limit {limit}): retry shortly",
                         status=503, headers={"Retry-After": "1"})


class Batcher:
    """Runs jobs on one thread; `submit(job)` returns a `Future` of the job's vectors (one array per document)."""

    def __init__(self, model, *, max_tokens_per_batch: int = 16384, max_queued_chunks: int = 65536,
                 merge: bool = True, on_batch: Callable[[int, int], None] | None = None):
        """`merge=False`: one request per forward pass (what the batching gain is measured against)."""
        self.model, self.max_tokens, self.max_queued = model, max_tokens_per_batch, max_queued_chunks
        self.merge = merge
        self.on_batch = on_batch  # (documents, tokens) of each merged call, for the metrics
        self._queue: deque[tuple[Job, Future]] = deque()
        self._queued_chunks = 0
        self._condition = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="contextembed-batcher", daemon=True)
        self._thread.start()

    @property
    def depth(self) -> int:
        """Chunks waiting (not yet in a forward pass)."""
        return self._queued_chunks

    def submit(self, job: Job) -> Future:
        future: Future = Future()
        chunks = sum(len(d) for d in job.documents)
        with self._condition:
            if self._closed:
                raise RequestError("the server is shutting down", status=503, headers={"Retry-After": "5"})
            if self._queued_chunks and self._queued_chunks + chunks > self.max_queued:
                raise Overloaded(self._queued_chunks, self.max_queued)
            self._queue.append((job, future))
            self._queued_chunks += chunks
            self._condition.notify()
        return future

    def close(self, timeout: float | None = None) -> None:
        """Stop taking jobs; the queued ones still run. Returns when the worker has finished them."""
        with self._condition:
            self._closed = True
            self._condition.notify()
        self._thread.join(timeout)

    def _take(self) -> list[tuple[Job, Future]] | None:
        with self._condition:
            while not self._queue and not self._closed:
                self._condition.wait()
            if not self._queue:
                return None
            first, _ = self._queue[0]
            key = (first.task, first.precision, first.dim)
            taken, kept, tokens = [], deque(), 0
            while self._queue:
                job, future = self._queue.popleft()
                fits = not taken or (self.merge and tokens + job.tokens <= self.max_tokens)
                if (job.task, job.precision, job.dim) == key and fits:
                    taken.append((job, future))
                    tokens += job.tokens
                else:
                    kept.append((job, future))
            self._queue = kept
            self._queued_chunks -= sum(len(d) for job, _ in taken for d in job.documents)
            return taken

    def _run(self) -> None:
        while (taken := self._take()) is not None:
            taken = [(job, future) for job, future in taken if future.set_running_or_notify_cancel()]
            if not taken:
                continue
            documents = [d for job, _ in taken for d in job.documents]
            try:
                vectors = self._encode(taken[0][0], documents)
            except Exception as error:  # a model error fails the jobs of this call, never the worker
                logger.exception("a forward pass failed")
                for _, future in taken:
                    future.set_exception(error)
                continue
            if self.on_batch is not None:
                self.on_batch(len(documents), sum(job.tokens for job, _ in taken))
            start = 0
            for job, future in taken:
                future.set_result(vectors[start : start + len(job.documents)])
                start += len(job.documents)

    def _encode(self, job: Job, documents: list[list[str]]) -> list[np.ndarray]:
        options = {"precision": job.precision, "output_dim": job.dim, "show_progress_bar": False}
        if job.task == "query":  # each chunk alone, as a query
            flat = [c for d in documents for c in d]
            rows = self.model.encode_queries(flat, **options)
            result, start = [], 0
            for document in documents:
                result.append(rows[start : start + len(document)])
                start += len(document)
            return result
        return self.model.encode_documents(documents, max_tokens_per_batch=self.max_tokens, **options)
