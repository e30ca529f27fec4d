"""The ASGI application: FastAPI routes over one loaded model and its `Batcher`.

`create_app(model, settings)` serves `POST /v1/embeddings` (OpenAI), `POST /v1/contextualizedembeddings`
(Perplexity's `input` or Voyage's `inputs`) and `GET /v1/models`, behind the API key when keys are set; `GET /health`
(200 once the model is loaded and the batcher runs, no key) and `GET /metrics` (Prometheus). No route reads or writes
files or loads a model.

Errors, by the exception handlers: a `RequestError` (raised by the validation layer, or by the batcher when its queue
is full) is answered with its status and message; Starlette's own HTTP errors (no such route, a body over the limit)
in the same shape; any other exception is a bug of ours: 500 naming only its type, the traceback in the server's log.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated

from contextembed.serve.batcher import Batcher
from contextembed.serve.metrics import Metrics, MetricsMiddleware
from contextembed.serve.protocol import Job, Limits, RequestError, parse_contextualized, parse_embeddings, response
from contextembed.serve.validation import Validator

try:
    from fastapi import APIRouter, Depends, FastAPI, Request
    from fastapi.responses import JSONResponse, Response
    from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
    from prometheus_client import CONTENT_TYPE_LATEST
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("the server needs FastAPI, uvicorn and prometheus-client: pip install 'contextembed[serve]'"
                      ) from error

API_PREFIX = "/v1"


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


class Service:
    """What the routes share (`app.state.service`): the model, its settings, validator and metrics, and the batcher
    while the application runs."""

    def __init__(self, model, settings: ServeSettings):
        self.model, self.settings = model, settings
        self.validator = Validator(model, settings.model_names, settings.limits)
        self.metrics = Metrics()
        self.keys = [key.encode() for key in settings.api_keys]
        self.batcher: Batcher | None = None

    def start(self) -> None:
        settings = self.settings
        self.batcher = Batcher(self.model, max_tokens_per_batch=settings.max_tokens_per_batch,
                               batch_size=settings.batch_size, max_merged_tokens=settings.max_merged_tokens,
                               merge_wait=settings.merge_wait, max_queued_chunks=settings.max_queued_chunks,
                               merge=settings.merge_requests, on_batch=self.metrics.batch_done)
        self.metrics.track(self.metrics.queue, lambda: self.batcher.depth)

    async def answer(self, job: Job) -> Response:
        vectors = await asyncio.wrap_future(self.batcher.submit(job))
        payload = await run_in_threadpool(render, job, vectors)  # writing the floats is work too: off the loop
        return Response(payload, media_type="application/json")


def render(job: Job, vectors) -> bytes:
    return json.dumps(response(job, vectors), ensure_ascii=False, allow_nan=False,
                      separators=(",", ":")).encode("utf-8")


async def service(request: Request) -> Service:  # async: FastAPI would run a plain `def` in the thread pool
    return request.app.state.service


Served = Annotated[Service, Depends(service)]
bearer = HTTPBearer(auto_error=False)  # a missing or malformed header is our 401 below, in our error shape


async def require_key(served: Served,
                      credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> None:
    if not served.keys:
        return
    given = credentials.credentials.encode() if credentials is not None else b""
    if not any([hmac.compare_digest(given, key) for key in served.keys]):  # a list: every key compared, every time
        raise RequestError("a valid API key is required (Authorization: Bearer <key>)", status=401)


async def openai_job(request: Request, served: Served) -> Job:
    return await served.validator.job(request, parse_embeddings)


async def contextualized_job(request: Request, served: Served) -> Job:
    return await served.validator.job(request, parse_contextualized)


api = APIRouter(prefix=API_PREFIX, dependencies=[Depends(require_key)])


@api.post("/embeddings")
async def embeddings(job: Annotated[Job, Depends(openai_job)], served: Served) -> Response:
    return await served.answer(job)


@api.post("/contextualizedembeddings")
async def contextualized(job: Annotated[Job, Depends(contextualized_job)], served: Served) -> Response:
    return await served.answer(job)


@api.get("/models")
async def models(served: Served) -> dict:
    return {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "contextembed"}
                                       for name in served.settings.model_names]}


probes = APIRouter()


@probes.get("/health")
async def health(served: Served) -> JSONResponse:
    batcher = served.batcher
    if batcher is None or not batcher.alive:
        return JSONResponse({"status": "starting" if batcher is None else "stopped"}, status_code=503)
    return JSONResponse({"status": "ok", "model": served.settings.model_names[0], "queued_chunks": batcher.depth,
                         "requests_in_flight": served.metrics.requests_in_flight, "process": os.getpid()})


@probes.get("/metrics", dependencies=[Depends(require_key)])
async def prometheus(served: Served) -> Response:
    return Response(served.metrics.latest(), media_type=CONTENT_TYPE_LATEST)


async def refused(request: Request, problem: RequestError) -> JSONResponse:
    return JSONResponse(problem.body(), status_code=problem.status, headers=problem.headers)


async def http_error(request: Request, problem: HTTPException) -> JSONResponse:
    """Starlette's own refusals (no such route or method, a body over `max_body_size`) in the API's error shape."""
    message = problem.detail
    if problem.status_code == 413:
        message = f"the request body is larger than the limit of {request.app.max_body_size} bytes"
    return await refused(request, RequestError(message, status=problem.status_code, headers=problem.headers))


async def internal_error(request: Request, problem: Exception) -> JSONResponse:
    """Anything else is a bug of ours: 500 naming only the exception's type. Starlette raises the exception again
    once this answer is sent, so the server logs its traceback (uvicorn: "Exception in ASGI application")."""
    return await refused(request, RequestError(f"internal error: {type(problem).__name__}", status=500))


@asynccontextmanager
async def lifespan(app: FastAPI):
    served: Service = app.state.service
    served.start()
    yield
    await run_in_threadpool(served.batcher.close)  # in-flight and queued jobs finish first


def create_app(model, settings: ServeSettings) -> FastAPI:
    app = FastAPI(title="contextembed", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None,
                  max_body_size=settings.limits.max_body_bytes)
    app.state.service = Service(model, settings)
    app.include_router(api)
    app.include_router(probes)
    app.add_middleware(MetricsMiddleware, metrics=app.state.service.metrics, prefix=API_PREFIX)
    app.add_exception_handler(RequestError, refused)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, internal_error)
    return app
