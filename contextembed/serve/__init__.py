"""An embedding server for a contextembed model (`contextembed serve`, extra `serve`).

`protocol` (the OpenAI, Perplexity and Voyage request and response shapes, pure), `validation` (the user-input
boundary: a request checked into a job, or a 4xx naming the problem), `batcher` (requests merged into
token-budgeted forward passes on one worker thread, a bounded queue), `metrics` (the Prometheus series and the
middleware that counts requests) and `app` (the FastAPI application: routes, API keys, exception handlers).
Importing `contextembed.serve` needs FastAPI, uvicorn and prometheus-client.
"""

from __future__ import annotations

from contextembed.serve.app import ServeSettings, create_app
from contextembed.serve.batcher import Batcher
from contextembed.serve.protocol import Limits, RequestError

__all__ = ["Batcher", "Limits", "RequestError", "ServeSettings", "create_app"]
