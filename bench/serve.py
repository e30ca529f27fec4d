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

    python bench/serve.py --against main [--clients 1 4 16] [--repeats 5]

measures a change to the server instead: this checkout's server and the server of a git ref (its `contextembed/`
and `modeling/` from `git archive`, imported through `PYTHONPATH`) run side by side with the same options, their
rounds alternated at each client count, and the result file (`serve_against_<ref>`) gives this ÷ ref throughput per
pair of rounds (median and range), the p50 latency ratio, and each ÷ direct.
"""

from __future__ import annotations

import argparse
import contextlib
import os
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


def start_server(model: str, *extra: str, tree: Path | None = None) -> tuple[subprocess.Popen, str]:
    """`contextembed serve` of this checkout, or of the package extracted into `tree` (`checkout`)."""
    import httpx

    port = free_port()
    arguments = ["serve", model, "--port", str(port), "--served-model-name", "bench", *extra]
    if tree is None:
        command, environment = [str(Path(sys.executable).with_name("contextembed")), *arguments], None
    else:  # -P: nothing before PYTHONPATH on the path, so `contextembed` is imported from `tree`
        command = [sys.executable, "-P", "-c", "import sys; from contextembed.cli import main; sys.exit(main())",
                   *arguments]
        environment = {**os.environ, "PYTHONPATH": str(tree)}
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env=environment)
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
def serving(model: str, options: list[str], client_counts: list[int], warm_up: list[list[str]], workers: int = 1,
            tree: Path | None = None):
    """A server started with `options` (of the package in `tree`, if given) and a pool of clients for each count,
    both closed after: the server's `workers` processes all answer, and one round of the `warm_up` documents
    (connections open, first passes run) comes before any timed round."""
    pools = {count: Clients(count) for count in sorted(set(client_counts))}
    process, url = start_server(model, *options, tree=tree)
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


class Direct:
    """`encode_documents` on the bench's documents in this process: the baseline every round is timed against."""

    def __init__(self, model, documents: list[list[str]]):
        self.model, self.documents = model, documents
        self.times = [self()]

    def __call__(self, group: int | None = None) -> float:
        """Seconds to encode the documents in one call, or in calls of `group` documents (all a server sees at once
        when `group` one-document requests are in flight)."""
        start = time.perf_counter()
        step = group or len(self.documents)
        for i in range(0, len(self.documents), step):
            self.model.encode_documents(self.documents[i : i + step], show_progress_bar=False)
        return time.perf_counter() - start

    def around(self) -> float:
        """Runs once more and returns the mean of the last two runs: the baseline of whatever ran between them."""
        self.times.append(self())
        return (self.times[-2] + self.times[-1]) / 2


def measure_all(args, model, documents: list[list[str]]) -> tuple[dict, list[str]]:
    """The figures of the module docstring: (the numbers, the lines of the result file)."""
    direct = Direct(model, documents)
    top = max(args.clients)
    data = {"documents": len(documents), "chunks": sum(map(len, documents)), "rounds": {}, "repeats": args.repeats,
            "workers": args.workers}

    def measure(name: str, url: str, clients: Clients, wire: str = "base64") -> None:
        """`--repeats` rounds, each against the mean of the direct runs just before and after it (so drift on this
        shared machine hits both alike): the median ratio is reported."""
        rounds = []
        for _ in range(args.repeats):
            seconds, latencies = round_trip(url, documents, clients, wire)
            rounds.append({"seconds": seconds, "latencies": latencies, "direct_seconds": direct.around()})
        data["rounds"][name] = {"repeats": rounds,
                                "throughput_ratio": statistics.median(r["direct_seconds"] / r["seconds"] for r in rounds)}

    with serving(args.model, args.server_option, args.clients, documents[:32]) as (url, pools):
        for clients in args.clients:
            measure(f"merged/{clients}", url, pools[clients])
        measure(f"merged-float/{top}", url, pools[top], wire="float")
        served = {"int8": int8_round(url, documents, pools[top])}
    with serving(args.model, ["--no-request-merging", *args.server_option], [top], documents[:32]) as (url, pools):
        measure(f"unmerged/{top}", url, pools[top])
    if args.workers > 1:
        options = [f"--workers={args.workers}", "--threads-per-worker=1", *args.server_option]
        with serving(args.model, options, args.clients, documents[:32], workers=args.workers) as (url, pools):
            for clients in args.clients:
                measure(f"workers/{clients}", url, pools[clients])
            served["int8_workers"] = int8_round(url, documents, pools[top])
    ceiling = []
    for _ in range(args.repeats):  # what batching can reach when only `top` documents are known at once
        grouped = direct(top)
        ceiling.append(direct.around() / grouped)
    data["groups_ceiling"] = statistics.median(ceiling)
    expected = [model.encode_documents([d], precision="int8", show_progress_bar=False)[0] for d in documents]
    for name, codes in served.items():
        data[name] = moved_codes(codes, expected)
    data["direct_seconds"] = direct.times
    return data, report(args, data, statistics.median(direct.times) / len(documents))


def moved_codes(served: list[np.ndarray], expected: list[np.ndarray]) -> dict:
    """How many of the served int8 codes differ from each document's codes encoded alone, and by how much."""
    moved = [int((s.astype(int) != e).sum()) for s, e in zip(served, expected)]
    return {"codes": sum(e.size for e in expected), "moved": sum(moved),
            "documents_with_moved_codes": sum(m > 0 for m in moved),
            "largest_move": max(int(np.abs(s.astype(int) - e).max()) for s, e in zip(served, expected))}


def report(args, data: dict, per_document: float) -> list[str]:
    """The result file's lines for `measure_all`'s numbers (latencies in units of the direct time per document)."""
    top = max(args.clients)
    lines = [f"{data['documents']} recipes documents ({data['chunks']} chunks), one document per request, model "
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
    int8 = data["int8"]
    lines += ["", f"Batching gain at {top} clients (merged ÷ one request per call, throughput): {gain:.2f}.", "",
              f"Ceiling: `encode_documents` on the documents in calls of {top} (all that {top} one-document requests "
              f"in flight let a server see at once) runs at {data['groups_ceiling']:.2f} of one call on all of them.",
              "",
              f"int8 codes under load ({top} clients, Perplexity's base64_int8): {int8['moved']} of {int8['codes']:,} "
              f"codes differ from the codes of each document encoded alone ({int8['documents_with_moved_codes']}"
              f" of {data['documents']} documents), by at most {int8['largest_move']} (a request merged with "
              "others runs in another padded batch, and float noise can move a code across a rounding boundary)."]
    if args.workers > 1:
        w = data["int8_workers"]
        lines.append(f"With {args.workers} workers: {w['moved']} codes differ ({w['documents_with_moved_codes']} "
                     f"documents), by at most {w['largest_move']}.")
    return lines


def checkout(ref: str, folder: Path) -> str:
    """The package as it is at git `ref` (`contextembed/` and `modeling/`, laid out as the editable install maps
    them) extracted into `folder`; returns the commit `ref` names."""
    import io
    import tarfile

    repo = Path(__file__).resolve().parents[1]
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", ref], check=True, capture_output=True,
                            text=True).stdout.strip()
    archive = subprocess.run(["git", "-C", str(repo), "archive", commit, "contextembed", "modeling"], check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    (folder / "contextembed" / "modeling").symlink_to("../modeling")  # pyproject maps contextembed.modeling there
    return commit


def measure_against(args, model, documents: list[list[str]]) -> tuple[dict, list[str]]:
    """This checkout's server against git `--against`'s, both running, alternated round by round (which goes first
    alternates too) at each client count, with a direct run after each pair: (the numbers, the result file's
    lines). Each pair's ratio compares two rounds timed back to back, so drift on a shared machine hits both."""
    import tempfile

    direct = Direct(model, documents)
    data = {"documents": len(documents), "chunks": sum(map(len, documents)), "repeats": args.repeats, "clients": {}}
    with tempfile.TemporaryDirectory(prefix="contextembed-bench-") as folder, contextlib.ExitStack() as stack:
        data["against"] = f"{args.against} ({checkout(args.against, Path(folder))})"
        ours, pools = stack.enter_context(serving(args.model, args.server_option, args.clients, documents[:32]))
        theirs, _ = stack.enter_context(serving(args.model, args.server_option, [1], documents[:32],
                                                tree=Path(folder)))
        for clients in args.clients:
            pairs = []
            for k in range(args.repeats):
                order = [("this", ours), ("ref", theirs)][:: 1 if k % 2 == 0 else -1]
                timed = {name: round_trip(url, documents, pools[clients]) for name, url in order}
                pairs.append({name: {"seconds": seconds, "latencies": latencies}
                              for name, (seconds, latencies) in timed.items()} | {"direct_seconds": direct.around()})
            data["clients"][clients] = summarise(pairs)
    lines = [f"This checkout's server against the server of `{data['against']}`, both started with the same options "
             f"and the same model (`{args.model}`), {data['documents']} recipes documents ({data['chunks']} chunks) "
             f"sent one per request in Voyage's shape (base64 float32) by clients holding one connection each; the "
             f"two servers' rounds alternate (and which goes first), {args.repeats} pairs per client count, with a "
             "direct `encode_documents` run after each pair.", "",
             "| clients | throughput, this ÷ ref: median (range over the pairs) | p50 latency, this ÷ ref | "
             "throughput ÷ direct, this | throughput ÷ direct, ref |", "|---|---|---|---|---|"]
    for clients, row in data["clients"].items():
        lines.append(f"| {clients} | **{row['throughput_ratio']:.3f}** ({min(row['throughput_ratios']):.3f}–"
                     f"{max(row['throughput_ratios']):.3f}) | {row['p50_ratio']:.3f} | {row['this_vs_direct']:.3f} | "
                     f"{row['ref_vs_direct']:.3f} |")
    data["direct_seconds"] = direct.times
    return data, lines


def summarise(pairs: list[dict]) -> dict:
    """One client count's pairs of rounds: this ÷ ref throughput per pair and its median, the p50 latency ratio over
    every request, and each server's median throughput ÷ direct."""
    ratios = [pair["ref"]["seconds"] / pair["this"]["seconds"] for pair in pairs]
    p50 = {name: float(np.median([x for pair in pairs for x in pair[name]["latencies"]])) for name in ("this", "ref")}
    return {"pairs": pairs, "throughput_ratios": ratios, "throughput_ratio": statistics.median(ratios),
            "p50_ratio": p50["this"] / p50["ref"],
            **{f"{name}_vs_direct": statistics.median(pair["direct_seconds"] / pair[name]["seconds"] for pair in pairs)
               for name in ("this", "ref")}}


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
    parser.add_argument("--against", metavar="GIT_REF",
                        help="instead: this checkout's server against the server of GIT_REF (e.g. main), rounds "
                             "alternated, reported as ratios (result file serve_against_<ref>)")
    args = parser.parse_args()

    import contextembed
    from contextembed.evaluation.datasets import shipped_dataset
    from contextembed.evaluation.loaders import load_context_bench

    loaded, _ = load_context_bench(shipped_dataset("recipes"))
    documents = [d.sentences for d in loaded][: args.documents]
    model = contextembed.load(args.model)
    if args.against:
        data, lines = measure_against(args, model, documents)
        name = "serve_against_" + "".join(c if c.isalnum() else "_" for c in args.against)
        summary = "throughput, this ÷ " + args.against + ": " + ", ".join(
            f"{row['throughput_ratio']:.3f} at {clients} clients" for clients, row in data["clients"].items())
    else:
        data, lines = measure_all(args, model, documents)
        name, top = "serve", max(args.clients)
        summary = (f"throughput ÷ direct at {top} clients: {data['rounds'][f'merged/{top}']['throughput_ratio']:.3f}"
                   + (f", {args.workers} workers: {data['rounds'][f'workers/{top}']['throughput_ratio']:.3f}"
                      if args.workers > 1 else ""))
    write_result(name, "python bench/serve.py " + " ".join(sys.argv[1:]), lines, data)
    print("\n".join(lines))
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
