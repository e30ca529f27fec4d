"""The server under concurrent clients vs direct `encode_documents` on the same documents, side by side.

    python bench/serve.py [--model contextembed-all-MiniLM-L6-v2] [--documents 160] [--clients 1 4 16] [--repeats 5]
                          [--workers 2]

Starts `contextembed serve` on a free 127.0.0.1 port (loopback only), sends the shipped recipes set's documents (each
a list of its sentences, one document per request, Voyage's shape) from N client threads, each holding one
connection as the official clients do, and measures the time to have every document back as float32 vectors in the
client (base64, as OpenAI's client asks by default; a setting at the most clients with JSON floats). The same
documents are encoded in this process with `encode_documents` (one call, the library's own batching) between the
rounds. Reports, per client count: throughput ÷ direct (target ≥ 0.85 at 16 clients; each round against the direct
runs beside it, median of `--repeats`), p50 / p99 request latency ÷ the median direct time per document; the batching
gain (16 clients with requests merged ÷ a server started with `--no-request-merging`); a server of `--workers`
processes of one thread each (`contextembed serve --workers N --threads-per-worker 1`) at every client count; and the
ceiling batching can reach: direct encoding in calls of 16 documents ÷ one call. Bounded: at most `--documents`
documents per round, loopback only.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_result  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: str, *extra: str) -> tuple[subprocess.Popen, str]:
    import httpx

    port = free_port()
    command = [str(Path(sys.executable).with_name("contextembed")), "serve", model, "--port", str(port),
               "--served-model-name", "bench", *extra]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        if process.poll() is not None:
            raise RuntimeError(f"the server exited: {process.stderr.read()}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    process.kill()
    raise RuntimeError("the server did not become healthy")


def wait_for_workers(url: str, count: int, timeout: float = 120) -> None:
    """Until `count` server processes answer /health, so no round runs on fewer. Concurrent requests on new
    connections: the kernel hands them to whichever worker is waiting."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    def health(_) -> int | None:
        answer = httpx.get(url + "/health", timeout=5)
        return answer.json()["process"] if answer.status_code == 200 else None

    seen: set[int] = set()
    deadline = time.monotonic() + timeout
    with ThreadPoolExecutor(4 * count) as pool:
        while len(seen) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(seen)} of {count} workers answered")
            seen |= set(pool.map(health, range(8 * count))) - {None}


class Clients:
    """`count` client threads, each holding one `httpx.Client` (one kept-alive connection), as the official clients
    do: OpenAI's, Voyage's and Perplexity's keep one client per process. Opening a client costs tens of milliseconds
    of CPU (its TLS context), on the very cores the server uses, so the clients are opened before any clock starts."""

    def __init__(self, count: int):
        import httpx

        self.clients = [httpx.Client(timeout=600) for _ in range(count)]

    def close(self) -> None:
        for client in self.clients:
            client.close()

    def run(self, work, items: list) -> list:
        """`work(client, item)` for every item, the items shared among the client threads; results in item order."""
        import queue
        import threading

        todo: queue.Queue = queue.Queue()
        for i, item in enumerate(items):
            todo.put((i, item))
        results: list = [None] * len(items)
        failures: list[BaseException] = []

        def worker(client):
            while True:
                try:
                    i, item = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    results[i] = work(client, item)
                except BaseException as problem:  # noqa: BLE001 - reported below, after the threads end
                    failures.append(problem)
                    return

        threads = [threading.Thread(target=worker, args=(client,)) for client in self.clients]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise failures[0]
        return results


@contextlib.contextmanager
def serving(model: str, options: list[str], client_counts: list[int], warm_up: list[list[str]], workers: int = 1):
    """A server started with `options` and a pool of clients for each count, both closed after: the server's
    `workers` processes all answer, and one round of the `warm_up` documents (connections open, first passes run)
    comes before any timed round."""
    pools = {count: Clients(count) for count in sorted(set(client_counts))}
    process, url = start_server(model, *options)
    try:
        wait_for_workers(url, workers)
        round_trip(url, warm_up, pools[max(pools)])
        yield url, pools
    finally:
        process.terminate()
        process.wait(60)
        for pool in pools.values():
            pool.close()


def round_trip(url: str, documents: list[list[str]], clients: Clients, wire: str = "base64"
               ) -> tuple[float, list[float]]:
    """Seconds until every document is back as vectors in the client (each document its own request), and each
    request's latency. `wire`: "base64" (raw float32 bytes, as OpenAI's client asks by default) or "float" (JSON
    numbers)."""
    import base64

    def send(client, document):
        body = {"inputs": [document], "model": "bench", "input_type": "document"}
        if wire == "base64":
            body["encoding_format"] = "base64"
        start = time.perf_counter()
        answer = client.post(url + "/v1/contextualizedembeddings", json=body)
        answer.raise_for_status()
        chunks = answer.json()["data"][0]["data"]
        np.stack([np.frombuffer(base64.b64decode(c["embedding"]), np.float32) if wire == "base64"
                  else np.asarray(c["embedding"], np.float32) for c in chunks])
        return time.perf_counter() - start

    start = time.perf_counter()
    latencies = clients.run(send, documents)
    return time.perf_counter() - start, latencies


def int8_round(url: str, documents: list[list[str]], clients: Clients) -> list[np.ndarray]:
    """Every document's int8 codes as the server returns them (Perplexity's shape, base64_int8)."""
    import base64

    def send(client, document):
        answer = client.post(url + "/v1/contextualizedembeddings", json={"input": [document], "model": "bench"})
        answer.raise_for_status()
        return np.stack([np.frombuffer(base64.b64decode(c["embedding"]), np.int8)
                         for c in answer.json()["data"][0]["data"]])

    return clients.run(send, documents)


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="contextembed-all-MiniLM-L6-v2")
    parser.add_argument("--documents", type=int, default=160)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--repeats", type=int, default=5, help="rounds per setting (median reported)")
    parser.add_argument("--workers", type=int, default=2,
                        help="processes of the multi-process server measured beside the one-process one (1: skip it)")
    parser.add_argument("--server-option", action="append", default=[],
                        help="one more argument for `contextembed serve` (repeatable), e.g. --server-option=--torch-threads=1")
    args = parser.parse_args()

    import contextembed
    from contextembed.evaluation.datasets import shipped_dataset
    from contextembed.evaluation.loaders import load_context_bench

    loaded, _ = load_context_bench(shipped_dataset("recipes"))
    documents = [d.sentences for d in loaded][: args.documents]
    model = contextembed.load(args.model)

    def direct(group: int | None = None) -> float:
        """Seconds to encode the documents in one call, or in calls of `group` documents (all a server sees at once
        when `group` one-document requests are in flight)."""
        start = time.perf_counter()
        step = group or len(documents)
        for i in range(0, len(documents), step):
            model.encode_documents(documents[i : i + step], show_progress_bar=False)
        return time.perf_counter() - start

    direct_times = [direct()]
    top = max(args.clients)
    data = {"documents": len(documents), "chunks": sum(map(len, documents)), "rounds": {}, "repeats": args.repeats,
            "workers": args.workers}

    def measure(name: str, url: str, clients: Clients, wire: str = "base64") -> None:
        """`--repeats` rounds, each against the mean of the direct runs just before and after it (so drift on this
        shared machine hits both alike): the median ratio is reported."""
        rounds = []
        for _ in range(args.repeats):
            seconds, latencies = round_trip(url, documents, clients, wire)
            direct_times.append(direct())
            rounds.append({"seconds": seconds, "latencies": latencies,
                           "direct_seconds": (direct_times[-2] + direct_times[-1]) / 2})
        data["rounds"][name] = {"repeats": rounds,
                                "throughput_ratio": statistics.median(r["direct_seconds"] / r["seconds"] for r in rounds)}

    with serving(args.model, args.server_option, args.clients, documents[:32]) as (url, pools):
        for clients in args.clients:
            measure(f"merged/{clients}", url, pools[clients])
        measure(f"merged-float/{top}", url, pools[top], wire="float")
        served = int8_round(url, documents, pools[top])
    with serving(args.model, ["--no-request-merging", *args.server_option], [top], documents[:32]) as (url, pools):
        measure(f"unmerged/{top}", url, pools[top])
    if args.workers > 1:
        options = [f"--workers={args.workers}", "--threads-per-worker=1", *args.server_option]
        with serving(args.model, options, args.clients, documents[:32], workers=args.workers) as (url, pools):
            for clients in args.clients:
                measure(f"workers/{clients}", url, pools[clients])
            served_by_workers = int8_round(url, documents, pools[top])
    ceiling = []
    for _ in range(args.repeats):  # what batching can reach when only `top` documents are known at once
        grouped = direct(top)
        direct_times.append(direct())
        ceiling.append((direct_times[-2] + direct_times[-1]) / 2 / grouped)
    data["groups_ceiling"] = statistics.median(ceiling)

    expected = [model.encode_documents([d], precision="int8", show_progress_bar=False)[0] for d in documents]
    codes = sum(e.size for e in expected)

    def moved_codes(served: list[np.ndarray]) -> dict:
        moved = [int((s.astype(int) != e).sum()) for s, e in zip(served, expected)]
        return {"codes": codes, "moved": sum(moved), "documents_with_moved_codes": sum(m > 0 for m in moved),
                "largest_move": max(int(np.abs(s.astype(int) - e).max()) for s, e in zip(served, expected))}

    data["int8"] = moved_codes(served)
    if args.workers > 1:
        data["int8_workers"] = moved_codes(served_by_workers)
    base = statistics.median(direct_times)
    per_document = base / len(documents)
    data["direct_seconds"] = direct_times
    lines = [f"{len(documents)} recipes documents ({data['chunks']} chunks), one document per request, model "
             f"`{args.model}`, clients holding one connection each; direct = one `encode_documents` call on the same "
             f"documents in the bench process. Each round is timed against the mean of the direct runs just before "
             f"and after it; median of {args.repeats} rounds.", "",
             "| clients | server processes × threads | requests merged | vectors on the wire | throughput ÷ direct | "
             "p50 latency ÷ direct time per document | p99 latency ÷ direct time per document |",
             "|---|---|---|---|---|---|---|"]
    for name, round_ in data["rounds"].items():
        merged, clients = name.split("/")
        processes = f"{args.workers} × 1" if merged == "workers" else f"1 × {torch_threads()}"
        latencies = [x for r in round_["repeats"] for x in r["latencies"]]
        p50, p99 = np.percentile(latencies, [50, 99])
        round_.update(p50_ratio=p50 / per_document, p99_ratio=p99 / per_document)
        lines.append(f"| {clients} | {processes} | {'no' if merged == 'unmerged' else 'yes'} | "
                     f"{'JSON floats' if merged == 'merged-float' else 'base64 float32'} | "
                     f"{round_['throughput_ratio']:.3f} | {p50 / per_document:.1f} | {p99 / per_document:.1f} |")
    gain = data["rounds"][f"merged/{top}"]["throughput_ratio"] / data["rounds"][f"unmerged/{top}"]["throughput_ratio"]
    data["batching_gain"] = gain
    lines += ["", f"Batching gain at {top} clients (merged ÷ one request per call, throughput): {gain:.2f}.", "",
              f"Ceiling: `encode_documents` on the documents in calls of {top} (all that {top} one-document requests "
              f"in flight let a server see at once) runs at {data['groups_ceiling']:.2f} of one call on all of them.",
              "",
              f"int8 codes under load ({top} clients, Perplexity's base64_int8): {data['int8']['moved']} of {codes:,} "
              f"codes differ from the codes of each document encoded alone ({data['int8']['documents_with_moved_codes']}"
              f" of {len(documents)} documents), by at most {data['int8']['largest_move']} (a request merged with "
              "others runs in another padded batch, and float noise can move a code across a rounding boundary)."]
    if args.workers > 1:
        w = data["int8_workers"]
        lines.append(f"With {args.workers} workers: {w['moved']} codes differ ({w['documents_with_moved_codes']} "
                     f"documents), by at most {w['largest_move']}.")
    write_result("serve", "python bench/serve.py " + " ".join(sys.argv[1:]), lines, data)
    print("\n".join(lines))
    print(f"throughput ÷ direct at {top} clients: {data['rounds'][f'merged/{top}']['throughput_ratio']:.3f}"
          + (f", {args.workers} workers: {data['rounds'][f'workers/{top}']['throughput_ratio']:.3f}"
             if args.workers > 1 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
