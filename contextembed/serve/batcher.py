"""Concurrent requests merged into token-budgeted forward passes, on one worker thread, with a bounded queue.

Requests wait in a queue bounded by chunks; a full queue is refused at once (`Overloaded`, answered 503 with
`Retry-After`) instead of growing memory. The worker takes the oldest job and every queued job with the same
(task, precision, dimension) until `max_merged_tokens` tokens are gathered (when clients are concurrent, waiting up
to `merge_wait` for as many requests as there were clients at work during the last call), and runs them in one call
of the model on the rows each job was tokenised into when it was checked (`tokenize_job`: once per request), which
sorts the documents by length into forward passes of `max_tokens_per_batch` padded tokens and never splits a
document; each job gets back exactly its documents' vectors, in order. Model work never runs on the event loop.
"""

from __future__ import annotations

import logging
import threading
import time
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

    def __init__(self, model, *, max_tokens_per_batch: int | None = None, batch_size: int = 32,
                 max_merged_tokens: int = 65536, merge_wait: float = 0.0, max_queued_chunks: int = 65536,
                 merge: bool = True, on_batch: Callable[[int, int], None] | None = None):
        """`max_tokens_per_batch`, `batch_size`: the model's forward passes (`None`: the encoder's default for the
        model's device). `max_merged_tokens`: most tokens of the requests merged into one call of the model, which
        sorts them by length and splits them into passes. `merge_wait`: the most seconds the worker waits, before a
        call that is not full, for as many requests as there were clients at work during the last call (its requests
        and those that came while it ran; one: no wait). `merge=False`: one request per call (what merging is measured
        against)."""
        self.model, self.max_tokens, self.max_queued = model, max_tokens_per_batch, max_queued_chunks
        self.batch_size, self.max_merged, self.merge_wait = batch_size, max_merged_tokens, merge_wait
        self.merge = merge
        self.on_batch = on_batch  # (documents, tokens) of each merged call, for the metrics
        self._queue: deque[tuple[Job, Future]] = deque()
        self._queued_chunks = 0
        self._queued_tokens = 0  # tokens of the queued jobs, so the merge wait knows when a call is full
        self._condition = threading.Condition()
        self._closed = False
        self._concurrent = 1  # requests in the last call plus those that arrived while it ran: the clients at work
        self._thread = threading.Thread(target=self._run, name="contextembed-batcher", daemon=True)
        self._thread.start()

    @property
    def depth(self) -> int:
        """Chunks waiting (not yet in a forward pass)."""
        return self._queued_chunks

    @property
    def alive(self) -> bool:
        """Whether jobs submitted now will run: not closed, and the worker thread is running."""
        return not self._closed and self._thread.is_alive()

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
            self._queued_tokens += job.tokens
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
            if self.merge and self.merge_wait > 0 and self._concurrent > 1:
                # Concurrent clients send their next requests moments after their answers: wait for as many
                # requests as there were clients at work during the last call (its own and those that came while
                # it ran), while the call is not full, rather than run the first few now and leave the rest for
                # the next call (clients would then settle into two halves taking turns, in calls half as large).
                # A lone client's requests never wait.
                deadline = time.monotonic() + self.merge_wait
                while (not self._closed and self._queued_tokens < self.max_merged
                       and len(self._queue) < self._concurrent):
                    left = deadline - time.monotonic()
                    if left <= 0 or not self._condition.wait(left):
                        break
            first, _ = self._queue[0]
            key = (first.task, first.precision, first.output_dim)
            taken, kept, tokens = [], deque(), 0
            while self._queue:
                job, future = self._queue.popleft()
                fits = not taken or (self.merge and tokens + job.tokens <= self.max_merged)
                if (job.task, job.precision, job.output_dim) == key and fits:
                    taken.append((job, future))
                    tokens += job.tokens
                else:
                    kept.append((job, future))
            self._queue = kept
            self._queued_chunks -= sum(len(d) for job, _ in taken for d in job.documents)
            self._queued_tokens -= tokens
            return taken

    def _run(self) -> None:
        while (taken := self._take()) is not None:
            taken = [(job, future) for job, future in taken if future.set_running_or_notify_cancel()]
            if not taken:
                continue
            documents = sum(len(job.documents) for job, _ in taken)  # for the metrics
            try:
                vectors = self._encode([job for job, _ in taken])
            except Exception as error:  # a model error fails the jobs of this call, never the worker
                logger.exception("a forward pass failed")
                for _, future in taken:
                    future.set_exception(error)
                vectors = None
            with self._condition:
                self._concurrent = len(taken) + len(self._queue)
            if vectors is None:
                continue
            if self.on_batch is not None:
                self.on_batch(documents, sum(job.tokens for job, _ in taken))
            for (_, future), result in zip(taken, vectors):
                future.set_result(result)

    def _encode(self, jobs: list[Job]) -> list[list[np.ndarray]]:
        """Each job's vectors (one array per document), from the rows it was tokenised into, in one call of the
        model."""
        rows = [row for job in jobs for row in job.rows]
        vectors = self.model.encode_tokenized(rows, precision=jobs[0].precision, output_dim=jobs[0].output_dim,
                                              show_progress_bar=False, batch_size=self.batch_size,
                                              max_tokens_per_batch=self.max_tokens)
        results, start = [], 0
        for job in jobs:
            mine = vectors[start : start + len(job.rows)]
            start += len(job.rows)
            if job.task == "query":  # a row per chunk: each document's rows stacked
                mine = np.split(np.concatenate(mine), np.cumsum([len(d) for d in job.documents])[:-1])
            results.append(mine)
        return results
