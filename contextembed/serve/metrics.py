"""The server's Prometheus metrics, and the ASGI middleware that counts and times the API's requests.

`Metrics` holds the series `/metrics` exposes; `MetricsMiddleware` feeds the request series (count by route and
status, latency, requests in flight) for every request under the API's prefix, whatever answers it: a route, an
exception handler, or the server's 500 for an exception that escapes. `/health` and `/metrics` themselves, polled by
probes and scrapers, are not counted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

try:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, multiprocess
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("the server needs FastAPI, uvicorn and prometheus-client: pip install 'contextembed[serve]'"
                      ) from error


def forget_dead_workers(folder: str) -> list[int]:
    """Drop the live gauges (queue, requests in flight) of worker processes that are gone from the shared metrics
    `folder`, so a worker that died mid-request does not count forever; a worker that replaces it calls this as it
    starts. Counters and histograms keep the dead worker's counts. Returns the processes forgotten."""
    gone = set()
    for path in Path(folder).glob("gauge_live*_*.db"):
        pid = path.stem.rpartition("_")[2]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)  # signal 0: is there such a process?
        except ProcessLookupError:
            gone.add(int(pid))
        except PermissionError:  # there is, run by someone else
            pass
    for pid in gone:
        multiprocess.mark_process_dead(pid, folder)
    return sorted(gone)


class Metrics:
    """The server's Prometheus metrics. In one process they are read live; when `contextembed serve --workers` runs
    several processes (`PROMETHEUS_MULTIPROC_DIR` set), each writes its values to that folder and `/metrics`, in
    whichever worker answers it, sums them over the workers (gauges over the live ones).

    >>> metrics = Metrics()
    >>> metrics.request_started()
    >>> metrics.requests_in_flight
    1
    >>> metrics.request_finished("/v1/embeddings", 200, 0.02)
    >>> b'contextembed_requests_total{code="200",route="/v1/embeddings"} 1.0' in metrics.latest()
    True
    """

    def __init__(self):
        folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")  # set by `contextembed serve --workers`
        self.multiprocess = bool(folder)
        self.requests_in_flight = 0  # this process's API requests being answered (the event loop alone changes it)
        self._tracked: list[tuple[Gauge, Callable[[], float]]] = []  # written by `update` in several processes
        self.registry = CollectorRegistry()
        if folder:
            forget_dead_workers(folder)
            self.exposed = CollectorRegistry()
            multiprocess.MultiProcessCollector(self.exposed)
        else:
            self.exposed = self.registry
        self.requests = Counter("contextembed_requests_total", "Requests by route and status code",
                                ["route", "code"], registry=self.registry)
        self.latency = Histogram("contextembed_request_seconds", "Request latency", ["route"], registry=self.registry,
                                 buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
        self.queue = Gauge("contextembed_queue_chunks", "Chunks waiting for a forward pass", registry=self.registry,
                           multiprocess_mode="livesum")
        self.batch_documents = Histogram("contextembed_batch_documents", "Documents per merged model call",
                                         registry=self.registry, buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512))
        self.tokens = Counter("contextembed_tokens_total", "Tokens embedded (rate() gives tokens/s)",
                              registry=self.registry)
        self.in_flight = Gauge("contextembed_requests_in_flight", "API requests (/v1/...) being answered",
                               registry=self.registry, multiprocess_mode="livesum")
        self.workers = Gauge("contextembed_workers", "Server processes answering (contextembed serve --workers)",
                             registry=self.registry, multiprocess_mode="livesum")
        self.workers.set(1)
        self.track(self.in_flight, lambda: self.requests_in_flight)

    def track(self, gauge: Gauge, read: Callable[[], float]) -> None:
        """`gauge` reads `read()`: at every scrape in one process; in several, when `update` writes it."""
        if self.multiprocess:
            self._tracked.append((gauge, read))
        else:
            gauge.set_function(read)

    def update(self) -> None:
        """Write the tracked gauges' values (at each request's start and end and after each merged call; one process
        reads them live)."""
        for gauge, read in self._tracked:
            gauge.set(read())

    def request_started(self) -> None:
        self.requests_in_flight += 1
        self.update()

    def request_finished(self, route: str, status: int, seconds: float) -> None:
        self.requests_in_flight -= 1
        self.requests.labels(route, str(status)).inc()
        self.latency.labels(route).observe(seconds)
        self.update()

    def batch_done(self, documents: int, tokens: int) -> None:
        """A merged call of the model ran (the batcher's worker thread calls this)."""
        self.batch_documents.observe(documents)
        self.tokens.inc(tokens)
        self.update()

    def latest(self) -> bytes:
        return generate_latest(self.exposed)


class MetricsMiddleware:
    """Counts and times every HTTP request under `prefix` by its route and the status it was answered with.

    A pure ASGI middleware: it reads the status off the response as it is sent, and counts an exception that escapes
    the application as the 500 the server error handler answers for it. The route is the matched route's path
    template (so label values stay few), `unmatched` for a path no route serves.
    """

    def __init__(self, app, metrics: Metrics, prefix: str):
        self.app, self.metrics, self.prefix = app, metrics, prefix

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(self.prefix):
            await self.app(scope, receive, send)
            return
        status = 500  # what the server error handler answers when an exception escapes

        async def send_and_read_status(message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        started = time.perf_counter()
        self.metrics.request_started()
        try:
            await self.app(scope, receive, send_and_read_status)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")  # the router writes the matched route here
            self.metrics.request_finished(route, status, time.perf_counter() - started)
