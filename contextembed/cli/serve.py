"""`contextembed serve`: the model behind the OpenAI, Perplexity and Voyage embedding APIs (extra `serve`).

One process by default. `--workers N` runs N server processes behind the one port (uvicorn's supervisor: it
restarts a worker that dies), each with its own copy of the model, its own request merging and
`--threads-per-worker` threads; the parent hands them the parsed arguments in `CONTEXTEMBED_SERVE_ARGS` and a
fresh metrics folder in `PROMETHEUS_MULTIPROC_DIR`, so `/metrics` in any worker sums them all.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import tempfile
from pathlib import Path

from contextembed.cli import options


def add_commands(commands) -> None:
    serve = commands.add_parser(
        "serve", help="serve a model over HTTP (OpenAI, Perplexity and Voyage embedding APIs)",
        description="POST /v1/embeddings (OpenAI; each input embedded as a query unless input_type is document), "
                    "POST /v1/contextualizedembeddings (Perplexity's `input` or Voyage's `inputs`: documents as "
                    "lists of chunks, one vector per chunk, late chunking), GET /v1/models, /health, /metrics. "
                    "Binds to 127.0.0.1 unless --host says otherwise. Needs pip install 'contextembed[serve]'.")
    serve.add_argument("model_path", nargs="?", metavar="MODEL", help="checkpoint folder or name (default: the packaged default model)")
    options.add_model_options(serve, output_dim=False)
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=options.positive_int, default=8000, help="port (default 8000)")
    serve.add_argument("--served-model-name", action="append", default=None, metavar="NAME",
                       help="a name requests may give as `model` (repeatable; default: the model's own name)")
    serve.add_argument("--api-key-file", type=Path, help="file of accepted API keys, one per line (Bearer auth)")
    serve.add_argument("--max-documents", type=options.positive_int, default=512, help="per request (default 512)")
    serve.add_argument("--max-chunks", type=options.positive_int, default=16_000, help="per request (default 16000)")
    serve.add_argument("--max-tokens", type=options.positive_int, default=120_000, help="per request (default 120000)")
    serve.add_argument("--max-document-tokens", type=options.positive_int, default=32_768,
                       help="per document (default 32768)")
    serve.add_argument("--max-body-mb", type=options.positive_float, default=16.0, help="request body (default 16)")
    serve.add_argument("--max-tokens-per-batch", type=options.positive_int,
                       help="padded tokens per forward pass (default 2048 on CPU, 16384 on an accelerator)")
    serve.add_argument("--max-merged-tokens", type=options.positive_int, default=65536,
                       help="most tokens of concurrent requests merged into one call of the model, which sorts "
                            "them by length into forward passes (default 65536)")
    serve.add_argument("--merge-wait-ms", type=options.non_negative_float, default=20.0,
                       help="most time the worker waits, before a call that is not full, for as many requests as "
                            "there were clients at work during the last call (default 20 ms; 0: never waits)")
    serve.add_argument("--max-queued-chunks", type=options.positive_int, default=65536,
                       help="chunks waiting before requests are refused with 503 (default 65536)")
    serve.add_argument("--no-docs", action="store_true",
                       help="do not serve the OpenAPI schema (/openapi.json) and its browser (/docs); they are behind "
                            "the API key when keys are set")
    serve.add_argument("--no-request-merging", action="store_true",
                       help="one request per forward pass (to measure what merging concurrent requests gains)")
    serve.add_argument("--workers", type=options.positive_int, default=1,
                       help="server processes behind the port, each with its own copy of the model (default 1; on "
                            "a CPU, one per core with --threads-per-worker 1 gives the most throughput)")
    serve.add_argument("--threads-per-worker", type=options.positive_int,
                       help="threads of each worker's forward passes (default: the CPUs this process may use, "
                            "divided among the workers)")
    serve.add_argument("--replicas", type=options.positive_int,
                       help="run N copies as Ray Serve replicas behind one port (needs contextembed[ray-serve]; "
                            "joins the cluster at RAY_ADDRESS when set)")
    serve.add_argument("--cpus-per-replica", type=options.positive_float, default=1.0,
                       help="Ray CPUs reserved by each replica (default 1)")
    serve.set_defaults(func=serve_command)


def api_keys(path: Path | None) -> list[str]:
    if path is None:
        return []
    keys = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not keys:
        raise ValueError(f"--api-key-file {str(path)!r} holds no key")
    return keys


ARGS_ENVIRONMENT = "CONTEXTEMBED_SERVE_ARGS"  # the parent's parsed arguments, for `worker_app` in each worker
WORKER_HEALTHCHECK_SECONDS = 60  # how long uvicorn's supervisor waits for a worker's answer before killing it


def threads_per_worker(args: argparse.Namespace) -> int | None:
    """Each worker's threads: `--threads-per-worker`, else with several workers the CPUs this process may use shared
    among them, else None (the libraries' own default)."""
    if args.threads_per_worker is not None or args.workers == 1:
        return args.threads_per_worker
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cpus // args.workers)


def settings_from(args: argparse.Namespace):
    """(`ServeSettings`, the model's name) from the arguments; a bad key file fails here, before any model loads."""
    from contextembed.default_model import DEFAULT_MODEL_NAME
    from contextembed.serve import Limits, ServeSettings

    keys = api_keys(args.api_key_file)
    name = args.model_path or args.model or DEFAULT_MODEL_NAME
    limits = Limits(max_documents=args.max_documents, max_chunks=args.max_chunks, max_tokens=args.max_tokens,
                    max_document_tokens=args.max_document_tokens, max_body_bytes=int(args.max_body_mb * 2**20))
    settings = ServeSettings(model_names=args.served_model_name or [Path(name).name or name], api_keys=keys,
                             limits=limits, max_tokens_per_batch=args.max_tokens_per_batch,
                             batch_size=args.batch_size, max_merged_tokens=args.max_merged_tokens,
                             merge_wait=args.merge_wait_ms / 1000,
                             max_queued_chunks=args.max_queued_chunks,
                             merge_requests=not args.no_request_merging, docs=not args.no_docs)
    return settings, name


def build_app(args: argparse.Namespace, settings, name: str):
    """The application serving `name` with `settings`, its model loaded on `threads_per_worker(args)` threads."""
    from contextembed.serve import create_app

    threads = threads_per_worker(args)
    if threads is None:
        return create_app(options.load_model(args, name), settings)
    import torch

    torch.set_num_threads(threads)  # torch's threads are the process's (a backend's pooling runs in torch too)
    extra = {} if args.backend == "torch" else {"num_threads": threads}
    return create_app(options.load_model(args, name, **extra), settings)


def worker_app():
    """One worker's application (uvicorn's factory, called in each worker process) from the parent's arguments in
    `CONTEXTEMBED_SERVE_ARGS`."""
    from contextembed.quiet import quiet_transformers

    if ARGS_ENVIRONMENT not in os.environ:
        raise RuntimeError(f"worker_app builds the workers of `contextembed serve --workers N`, which sets "
                           f"{ARGS_ENVIRONMENT}; it is not set here")
    saved = json.loads(os.environ[ARGS_ENVIRONMENT])
    if saved.get("api_key_file") is not None:
        saved["api_key_file"] = Path(saved["api_key_file"])
    args = argparse.Namespace(**saved)
    with quiet_transformers(progress_bars=False):  # as `contextembed` itself loads it: no weight-loading bars
        return build_app(args, *settings_from(args))


def serve_command(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        import contextembed.serve  # noqa: F401 - the server's own dependencies, named before any model loads
    except ImportError as error:
        raise ImportError("contextembed serve needs FastAPI and uvicorn: pip install 'contextembed[serve]'") from error
    if args.replicas is not None and (args.workers > 1 or args.threads_per_worker is not None):
        raise ValueError("--workers and --threads-per-worker run processes on this machine, --replicas runs Ray Serve "
                         "replicas (their CPUs: --cpus-per-replica): pass one")
    settings, name = settings_from(args)
    if args.replicas is not None:
        from contextembed.serve import ray_serve

        application = ray_serve.ray_application(functools.partial(options.load_model, args, name), settings,
                                                replicas=args.replicas, cpus_per_replica=args.cpus_per_replica)
        ray_serve.run(application, host=args.host, port=args.port)
        return 0
    where = f"serving {settings.model_names[0]} on http://{args.host}:{args.port}"
    if args.workers == 1:
        app = build_app(args, settings, name)
        print(where, flush=True)
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning", timeout_graceful_shutdown=30)
        return 0
    # Several workers: uvicorn's supervisor starts them, and each builds the application itself (`worker_app`).
    saved = {key: (str(value) if isinstance(value, Path) else value) for key, value in vars(args).items()
             if key != "func"}
    metrics = tempfile.mkdtemp(prefix="contextembed-metrics-")  # the workers' shared metrics, removed at exit
    os.environ[ARGS_ENVIRONMENT] = json.dumps(saved)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics
    try:
        print(f"{where} ({args.workers} workers, {threads_per_worker(args)} thread(s) each)", flush=True)
        uvicorn.run("contextembed.cli.serve:worker_app", factory=True, workers=args.workers, host=args.host,
                    port=args.port, log_level="warning", timeout_graceful_shutdown=30,
                    # uvicorn kills a worker that does not answer its ping within this many seconds (default 5): one
                    # importing torch and loading its model on a busy machine can take longer, and was killed and
                    # restarted over and over (measured on 2 cores under load: 5 restarts before one started)
                    timeout_worker_healthcheck=WORKER_HEALTHCHECK_SECONDS)
    finally:
        shutil.rmtree(metrics, ignore_errors=True)
    return 0
