"""The ASGI application: FastAPI routes over one loaded model and its `Batcher`.

`create_app(model, settings)` serves `POST /v1/embeddings` (OpenAI), `POST /v1/contextualizedembeddings`
(Perplexity's `input` or Voyage's `inputs`), `GET /v1/models`, `GET /health` (200 once the model is loaded and the
worker runs) and `GET /metrics` (Prometheus). No route reads or writes files or loads a model.
"""

from __future__ import annotations

import asyncio
import hmac
import os
import json
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from contextembed.serve.batcher import Batcher
from contextembed.serve.protocol import (
    Job,
    Limits,
    RequestError,
    check_model,
    parse_contextualized,
    parse_embeddings,
    response,
    tokenize_job,
)

try:
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, Response
    from prometheus_client import (
        CONTENT_TYPE_LATEST,
        CollectorRegistry,
        Counter,
        Gauge,
        Histogram,
        generate_latest,
        multiprocess,
    )
    from starlette.concurrency import run_in_threadpool
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("the server needs FastAPI, uvicorn and prometheus-client: pip install 'contextembed[serve]'"
                      ) from error


@dataclass
class ServeSettings:
    model_names: list[str]  # the names requests may use for the served model (the first is its own)
    api_keys: list[str] = field(default_factory=list)  # empty: no authentication
    limits: Limits = field(default_factory=Limits)
    max_tokens_per_batch: int | None = None  # padded tokens per forward pass (None: the encoder's device default)
    batch_size: int = 32  # most documents per forward pass
    max_merged_tokens: int = 65536  # most tokens of the requests merged into one call of the model
    merge_wait: float = 0.02  # most seconds the worker waits for the last call's clients to send again
    max_queued_chunks: int = 65536
    merge_requests: bool = True  # False: one request per forward pass (for measuring what merging gains)


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
    whichever worker answers it, sums them over the workers (gauges over the live ones)."""

    def __init__(self):
        folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")  # set by `contextembed serve --workers`
        self.multiprocess = bool(folder)
        self._tracked: list = []  # (gauge, read) written by `update` when several processes share the metrics
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
        self.in_flight = Gauge("contextembed_requests_in_flight", "Embedding requests being answered",
                               registry=self.registry, multiprocess_mode="livesum")
        self.workers = Gauge("contextembed_workers", "Server processes answering (contextembed serve --workers)",
                             registry=self.registry, multiprocess_mode="livesum")
        self.workers.set(1)

    def track(self, gauge: Gauge, read) -> None:
        """`gauge` reads `read()`: at every scrape in one process; in several, when `update` writes it."""
        if self.multiprocess:
            self._tracked.append((gauge, read))
        else:
            gauge.set_function(read)

    def update(self) -> None:
        """Write the tracked gauges' values (at each request's start and end; one process reads them live)."""
        for gauge, read in self._tracked:
            gauge.set(read())

    def latest(self) -> bytes:
        return generate_latest(self.exposed)


def create_app(model, settings: ServeSettings) -> FastAPI:
    metrics = Metrics()
    state: dict = {"in_flight": 0}  # the event loop alone changes it
    metrics.track(metrics.in_flight, lambda: state["in_flight"])

    def on_batch(documents: int, tokens: int) -> None:
        metrics.batch_documents.observe(documents)
        metrics.tokens.inc(tokens)

    @asynccontextmanager
    async def lifespan(app):
        state["batcher"] = Batcher(model, max_tokens_per_batch=settings.max_tokens_per_batch,
                                   batch_size=settings.batch_size, max_merged_tokens=settings.max_merged_tokens,
                                   merge_wait=settings.merge_wait,
                                   max_queued_chunks=settings.max_queued_chunks, merge=settings.merge_requests,
                                   on_batch=on_batch)
        metrics.track(metrics.queue, lambda: state["batcher"].depth)
        yield
        await run_in_threadpool(state["batcher"].close)  # in-flight and queued jobs finish first

    app = FastAPI(title="contextembed", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    names = set(settings.model_names)
    keys = [k.encode() for k in settings.api_keys]

    def error(problem: RequestError, route: str) -> JSONResponse:
        metrics.requests.labels(route, str(problem.status)).inc()
        return JSONResponse(problem.body(), status_code=problem.status, headers=problem.headers)

    def authorise(request: Request) -> None:
        if not keys:
            return
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        given = token.strip().encode() if scheme.lower() == "bearer" else b""
        if not any(hmac.compare_digest(given, key) for key in keys):  # every key compared: constant time
            raise RequestError("a valid API key is required (Authorization: Bearer <key>)", status=401)

    async def read_json(request: Request) -> dict:
        limit = settings.limits.max_body_bytes
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            raise RequestError(f"the body has {int(declared)} bytes, more than the limit of {limit}", status=413)
        raw = bytearray()
        async for part in request.stream():
            raw += part
            if len(raw) > limit:
                raise RequestError(f"the body is larger than the limit of {limit} bytes", status=413)
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as problem:
            raise RequestError(f"the body is not JSON: {problem}") from None
        if not isinstance(body, dict):
            raise RequestError(f"the body must be a JSON object, got {type(body).__name__}")
        return body

    def check_limits(job: Job) -> None:
        limits = settings.limits
        if len(job.documents) > limits.max_documents:
            raise RequestError(f"{len(job.documents)} documents, more than the limit of {limits.max_documents} per "
                               "request", status=413)
        chunks = sum(len(d) for d in job.documents)
        if chunks > limits.max_chunks:
            raise RequestError(f"{chunks} chunks, more than the limit of {limits.max_chunks} per request", status=413)
        for i, document in enumerate(job.documents):
            if len(document) > limits.max_chunks_per_document:
                raise RequestError(f"document {i} has {len(document)} chunks, more than the limit of "
                                   f"{limits.max_chunks_per_document}", status=413)
        from contextembed.modeling import check_output_dim

        try:
            check_output_dim(model.config, job.dim)
        except ValueError as problem:
            raise RequestError(str(problem).replace("output_dim", "the dimension"), param="dimensions") from None
        # Tokenised once: the counts are those of the tokens the model will see, the rows what it reads.
        for i, tokens in enumerate(tokenize_job(job, model.processor)):
            if tokens > limits.max_document_tokens:
                raise RequestError(f"document {i} has {tokens} tokens, more than the limit of "
                                   f"{limits.max_document_tokens}", status=413)
        if job.tokens > limits.max_tokens:
            raise RequestError(f"{job.tokens} tokens, more than the limit of {limits.max_tokens} per request",
                               status=413)

    def render(job, vectors) -> bytes:
        return json.dumps(response(job, vectors), ensure_ascii=False, allow_nan=False,
                          separators=(",", ":")).encode("utf-8")

    async def embed(request: Request, route: str, parse) -> Response:
        started = time.perf_counter()
        state["in_flight"] += 1
        try:
            authorise(request)
            body = await read_json(request)
            served = check_model(body, names)
            job = parse(body, served)
            await run_in_threadpool(check_limits, job)
            future = state["batcher"].submit(job)
            metrics.update()
            vectors = await asyncio.wrap_future(future)
            payload = await run_in_threadpool(render, job, vectors)  # writing the floats is work too: off the loop
        except RequestError as problem:
            return error(problem, route)
        except ValueError as problem:  # the Python API's own checks, word for word
            return error(RequestError(str(problem)), route)
        finally:
            metrics.latency.labels(route).observe(time.perf_counter() - started)
            state["in_flight"] -= 1
            metrics.update()
        metrics.requests.labels(route, "200").inc()
        return Response(payload, media_type="application/json")

    @app.post("/v1/embeddings")
    async def embeddings(request: Request):
        return await embed(request, "/v1/embeddings", parse_embeddings)

    @app.post("/v1/contextualizedembeddings")
    async def contextualized(request: Request):
        return await embed(request, "/v1/contextualizedembeddings", parse_contextualized)

    def refused(request: Request, route: str) -> JSONResponse | None:
        """The 401 for a request without a valid key, else None."""
        try:
            authorise(request)
        except RequestError as problem:
            return error(problem, route)
        return None

    @app.get("/v1/models")
    async def models(request: Request):
        if (answer := refused(request, "/v1/models")) is not None:
            return answer
        return {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "contextembed"}
                                           for name in settings.model_names]}

    @app.get("/health")
    async def health():
        batcher = state.get("batcher")
        if batcher is None or not batcher._thread.is_alive():
            return JSONResponse({"status": "starting"}, status_code=503)
        return {"status": "ok", "model": settings.model_names[0], "queued_chunks": batcher.depth,
                "requests_in_flight": state["in_flight"], "process": os.getpid()}

    @app.get("/metrics")
    async def prometheus(request: Request):
        if (answer := refused(request, "/metrics")) is not None:
            return answer
        return Response(metrics.latest(), media_type=CONTENT_TYPE_LATEST)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, problem: Exception):  # never a traceback to the client
        return JSONResponse(RequestError(f"internal error: {type(problem).__name__}", status=500).body(),
                            status_code=500)

    return app
