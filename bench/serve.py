"""The server under concurrent clients vs direct `encode_documents` on the same documents, side by side.

    python bench/serve.py [--model contextembed-all-MiniLM-L6-v2] [--documents 160] [--clients 1 4 16]

Starts `contextembed serve` on a free 127.0.0.1 port (loopback only), sends the shipped recipes set's documents (each
a list of its sentences, one document per request, Voyage's shape) from N client threads, and measures the time to
have every document back as float32 vectors in the client (base64, as OpenAI's client asks by default; one round
at the most clients with JSON floats). The same documents are encoded in this process with `encode_documents`
(one call, the library's own batching) before, between and after the rounds. Reports, per client count:
throughput ÷ direct (target ≥ 0.85 at 16 clients), p50 / p99 request latency ÷ the median direct time per document; and the batching
gain: 16 clients with requests merged ÷ 16 clients against a server started with `--no-request-merging`.
Bounded: at most `--documents` documents per round, loopback only.
"""

from __future__ import annotations

import argparse
import concurrent.futures
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


def round_trip(url: str, documents: list[list[str]], clients: int, wire: str = "base64") -> tuple[float, list[float]]:
    """Seconds until every document is back as vectors in the client (each document its own request), and each
    request's latency. `wire`: "base64" (raw float32 bytes, as OpenAI's client asks by default) or "float" (JSON
    numbers)."""
    import base64

    import httpx

    def send(document):
        body = {"inputs": [document], "model": "bench", "input_type": "document"}
        if wire == "base64":
            body["encoding_format"] = "base64"
        with httpx.Client(timeout=600) as client:
            start = time.perf_counter()
            answer = client.post(url + "/v1/contextualizedembeddings", json=body)
            answer.raise_for_status()
            chunks = answer.json()["data"][0]["data"]
            np.stack([np.frombuffer(base64.b64decode(c["embedding"]), np.float32) if wire == "base64"
                      else np.asarray(c["embedding"], np.float32) for c in chunks])
            return time.perf_counter() - start

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        latencies = list(pool.map(send, documents))
    return time.perf_counter() - start, latencies


def int8_round(url: str, documents: list[list[str]], clients: int) -> list[np.ndarray]:
    """Every document's int8 codes as the server returns them (Perplexity's shape, base64_int8) under `clients`."""
    import base64

    import httpx

    def send(document):
        with httpx.Client(timeout=600) as client:
            answer = client.post(url + "/v1/contextualizedembeddings", json={"input": [document], "model": "bench"})
            answer.raise_for_status()
        return np.stack([np.frombuffer(base64.b64decode(c["embedding"]), np.int8)
                         for c in answer.json()["data"][0]["data"]])

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        return list(pool.map(send, documents))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="contextembed-all-MiniLM-L6-v2")
    parser.add_argument("--documents", type=int, default=160)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    args = parser.parse_args()

    import contextembed
    from contextembed.evaluation.datasets import shipped_dataset
    from contextembed.evaluation.loaders import load_context_bench

    loaded, _ = load_context_bench(shipped_dataset("recipes"))
    documents = [d.sentences for d in loaded][: args.documents]
    model = contextembed.load(args.model)

    def direct() -> float:
        start = time.perf_counter()
        model.encode_documents(documents, show_progress_bar=False)
        return time.perf_counter() - start

    direct_times = [direct()]
    rows, data = [], {"documents": len(documents), "chunks": sum(map(len, documents)), "rounds": {}}
    process, url = start_server(args.model)
    try:
        round_trip(url, documents[:16], 4)  # warm-up
        for clients in args.clients:
            seconds, latencies = round_trip(url, documents, clients)
            direct_times.append(direct())  # interleaved, so drift hits both alike
            data["rounds"][f"merged/{clients}"] = {"seconds": seconds, "latencies": latencies}
        seconds, latencies = round_trip(url, documents, max(args.clients), wire="float")
        data["rounds"][f"merged-float/{max(args.clients)}"] = {"seconds": seconds, "latencies": latencies}
        direct_times.append(direct())
        served = int8_round(url, documents, max(args.clients))
    finally:
        process.terminate()
        process.wait(60)
    process, url = start_server(args.model, "--no-request-merging")
    try:
        round_trip(url, documents[:16], 4)
        seconds, latencies = round_trip(url, documents, max(args.clients))
        data["rounds"][f"unmerged/{max(args.clients)}"] = {"seconds": seconds, "latencies": latencies}
        direct_times.append(direct())
    finally:
        process.terminate()
        process.wait(60)

    expected = [model.encode_documents([d], precision="int8", show_progress_bar=False)[0] for d in documents]
    moved = [int((s.astype(int) != e).sum()) for s, e in zip(served, expected)]
    largest = max(int(np.abs(s.astype(int) - e).max()) for s, e in zip(served, expected))
    codes = sum(e.size for e in expected)
    data["int8"] = {"codes": codes, "moved": sum(moved), "documents_with_moved_codes": sum(m > 0 for m in moved),
                    "largest_move": largest}
    base = statistics.median(direct_times)
    per_document = base / len(documents)
    data["direct_seconds"] = direct_times
    lines = [f"{len(documents)} recipes documents ({data['chunks']} chunks), one document per request, model "
             f"`{args.model}`; direct = one `encode_documents` call on the same documents (median of "
             f"{len(direct_times)}, interleaved with the rounds).", "",
             "| clients | requests merged | vectors on the wire | throughput ÷ direct | p50 latency ÷ direct time per "
             "document | p99 latency ÷ direct time per document |", "|---|---|---|---|---|---|"]
    for name, round_ in data["rounds"].items():
        merged, clients = name.split("/")
        ratio = base / round_["seconds"]
        p50, p99 = np.percentile(round_["latencies"], [50, 99])
        round_.update(throughput_ratio=ratio, p50_ratio=p50 / per_document, p99_ratio=p99 / per_document)
        lines.append(f"| {clients} | {'no' if merged == 'unmerged' else 'yes'} | "
                     f"{'JSON floats' if merged == 'merged-float' else 'base64 float32'} | {ratio:.2f} | "
                     f"{p50 / per_document:.1f} | {p99 / per_document:.1f} |")
    top = max(args.clients)
    gain = data["rounds"][f"unmerged/{top}"]["seconds"] / data["rounds"][f"merged/{top}"]["seconds"]
    data["batching_gain"] = gain
    lines += ["", f"Batching gain at {top} clients (merged ÷ one request per pass, throughput): {gain:.2f}.", "",
              f"int8 codes under load ({top} clients, Perplexity's base64_int8): {data['int8']['moved']} of {codes:,} "
              f"codes differ from the codes of each document encoded alone ({data['int8']['documents_with_moved_codes']}"
              f" of {len(documents)} documents), by at most {largest} (a request merged with others runs in another "
              "padded batch, and float noise can move a code across a rounding boundary)."]
    write_result("serve", "python bench/serve.py " + " ".join(sys.argv[1:]), lines, data)
    print("\n".join(lines))
    print(f"throughput ÷ direct at {top} clients: {data['rounds'][f'merged/{top}']['throughput_ratio']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
