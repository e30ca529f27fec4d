"""The ASGI application: FastAPI routes over one loaded model and its `Batcher`.

`create_app(model, settings)` serves `POST /v1/embeddings` (OpenAI), `POST /v1/contextualizedembeddings`
(Perplexity's `input` or Voyage's `inputs`) and `GET /v1/models`, behind the API key when keys are set; `GET /health`
(200 once the model is loaded and the batcher runs, no key), `GET /metrics` (Prometheus), and the OpenAPI schema of
all of them (`GET /openapi.json`, browsable at `GET /docs`; behind the key when keys are set, off with `docs=False`).
Request bodies are typed (`contextembed.serve.schemas`). No route reads or writes files or loads a model.

Errors, by the exception handlers, in the error shape of the API the request speaks (`{"error": {...}}` for OpenAI
and Perplexity, `{"detail": ...}` for Voyage): a body that does not match its schema is a 400 naming the field; a
`RequestError` (raised by the validation layer, or by the batcher when its queue is full) is answered with its status
and message; Starlette's own HTTP errors (no such route, a body over the limit) in the same shape; any other
exception is a bug of ours: 500 naming only its type, the traceback in the server's log.
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
from contextembed.serve.schemas import (
    ERRORS,
    ContextualizedRequest,
    ContextualizedResponse,
    EmbeddingsResponse,
    ModelList,
    OpenAIEmbeddingsRequest,
    PerplexityRequest,
    VoyageRequest,
    describe,
    field_name,
)
from contextembed.serve.validation import Validator

try:
    from fastapi import APIRouter, Depends, FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.responses import HTMLResponse, JSONResponse, Response
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
    docs: bool = True  # serve the OpenAPI schema (/openapi.json) and its browser (/docs)


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


api = APIRouter(prefix=API_PREFIX, dependencies=[Depends(require_key)])


@api.post("/embeddings", response_class=Response, responses={200: {"model": EmbeddingsResponse}, **ERRORS})
async def embeddings(body: OpenAIEmbeddingsRequest, request: Request, served: Served) -> Response:
    """OpenAI's embeddings: each text embedded as a query (or, with `input_type: document`, as a one-chunk document)."""
    request.state.api = "openai"
    return await served.answer(await served.validator.job(body.model_dump(), parse_embeddings))


@api.post("/contextualizedembeddings", response_class=Response,
          responses={200: {"model": ContextualizedResponse}, **ERRORS})
async def contextualized(body: ContextualizedRequest, request: Request, served: Served) -> Response:
    """Contextual chunk embeddings: Perplexity's shape (`input`) or Voyage's (`inputs`), every chunk's vector made
    with its whole document in view."""
    request.state.api = "voyage" if isinstance(body, VoyageRequest) else "perplexity"
    return await served.answer(await served.validator.job(body.model_dump(), parse_contextualized))


@api.get("/models", response_model=ModelList)
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
    return JSONResponse(problem.body(getattr(request.state, "api", None)), status_code=problem.status,
                        headers=problem.headers)


async def malformed(request: Request, problem: RequestValidationError) -> JSONResponse:
    """A body that does not match its route's schema: 400, naming the first field that does not (what it must be,
    what came), in the shape of the API the body speaks."""
    errors = problem.errors() or [{"type": "", "loc": ("body",), "msg": "the body is malformed"}]
    first, body = errors[0], problem.body
    if request.url.path.endswith("/contextualizedembeddings"):
        request.state.api = "voyage" if isinstance(body, dict) and "inputs" in body else "perplexity"
        schema = VoyageRequest if request.state.api == "voyage" else PerplexityRequest
    else:
        schema = OpenAIEmbeddingsRequest
    if first["type"] == "json_invalid":
        message = f"the body is not JSON: {first.get('ctx', {}).get('error', first['msg'])}"
    elif isinstance(body, dict) and "input" in body and "inputs" in body:
        message = "send either input (Perplexity's shape) or inputs (Voyage's), not both"
    else:
        message = describe(first, list(schema.model_fields))
    located = len(first.get("loc", ())) > 1 and first["type"] != "json_invalid"
    return await refused(request, RequestError(message, param=field_name(tuple(first["loc"])) if located else None))


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


docs = APIRouter(dependencies=[Depends(require_key)], include_in_schema=False)


@docs.get("/openapi.json")
async def openapi(request: Request, served: Served) -> JSONResponse:
    return JSONResponse(schema_of(request.app, served.settings.model_names))


def schema_of(app: FastAPI, model_names: list[str]) -> dict:
    """The app's OpenAPI schema, with `model` in every request listed as the names served here."""
    schema = app.openapi()
    for name, component in schema.get("components", {}).get("schemas", {}).items():
        if name.endswith("Request") and "model" in component.get("properties", {}):
            component["properties"]["model"]["enum"] = list(model_names)
    return schema


@docs.get("/docs")
async def swagger() -> HTMLResponse:
    return get_swagger_ui_html(openapi_url="/openapi.json", title="contextembed")


def create_app(model, settings: ServeSettings) -> FastAPI:
    from contextembed import __version__

    # FastAPI's own schema routes carry no key check: ours (`docs`) do.
    app = FastAPI(title="contextembed", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None, max_body_size=settings.limits.max_body_bytes,
                  description="Contextual chunk embeddings (late chunking): OpenAI's, Perplexity's and Voyage's "
                              "embedding APIs over one model.")
    app.state.service = Service(model, settings)
    app.include_router(api)
    app.include_router(probes)
    if settings.docs:
        app.include_router(docs)
    app.add_middleware(MetricsMiddleware, metrics=app.state.service.metrics, prefix=API_PREFIX)
    app.add_exception_handler(RequestError, refused)
    app.add_exception_handler(RequestValidationError, malformed)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, internal_error)
    return app
