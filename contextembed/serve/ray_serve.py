"""The same application as Ray Serve replicas: `contextembed serve --replicas N` (extras `serve` and `ray-serve`).

Each replica is a Ray actor that loads the model itself (the model is never pickled across processes) and runs
`create_app` behind Ray Serve's HTTP proxy, with its own batcher, limits and metrics; the proxy spreads requests
over the replicas. On one machine Ray is started locally; with `RAY_ADDRESS` set the replicas join that cluster,
which is the route past one machine.
"""

from __future__ import annotations

from collections.abc import Callable

from contextembed.serve.app import ServeSettings, create_app


def ray_application(load: Callable[[], object], settings: ServeSettings, *, replicas: int = 2,
                    cpus_per_replica: float = 1.0):
    """A bound Ray Serve application of `replicas` copies of the server; `load()` makes the model in each one.

    `load` is pickled to the replicas, so it must be a module-level function or a `functools.partial` of one.
    """
    try:
        from ray import serve
    except ImportError as error:
        raise ImportError("--replicas needs Ray Serve: pip install 'contextembed[serve,ray-serve]'") from error
    if replicas < 1:
        raise ValueError(f"replicas must be a positive integer, got {replicas}")

    def build():  # runs in each replica
        return create_app(load(), settings)

    deployment = serve.deployment(serve.ingress(build)(), name="contextembed", num_replicas=replicas,
                                  ray_actor_options={"num_cpus": cpus_per_replica},
                                  # Ray's default (5 at a time per replica) would starve the batcher; its own
                                  # queue is bounded too, so an overload is a 503 at the proxy or in a replica.
                                  max_ongoing_requests=256, max_queued_requests=1024)
    return deployment.bind()


def run(application, *, host: str, port: int) -> None:
    """Start Ray (or join `RAY_ADDRESS`) and Ray Serve's proxy on host:port, deploy, and block until stopped."""
    import signal
    import threading

    import ray
    from ray import serve

    stopped = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopped.set())
    ray.init(include_dashboard=False, log_to_driver=False)
    try:
        serve.start(http_options={"host": host, "port": port})
        serve.run(application, name="contextembed", route_prefix="/", blocking=False)
        print(f"serving on http://{host}:{port} (Ray Serve)", flush=True)
        stopped.wait()
    finally:
        serve.shutdown()  # replicas drain their in-flight requests first (Ray's graceful shutdown)
        ray.shutdown()
