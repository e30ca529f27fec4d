"""Stores side by side: ingest and query throughput of LanceDB, Qdrant (local mode; document search by grouped chunk
search and by a multivector collection scored by MAX_SIM) and PostgreSQL + pgvector (pgserver), beside
contextembed's own index and in-memory `exact_search`, on the same synthetic chunk vectors.

    python bench/stores.py [--sizes 100000 1000000] [--dim 384] [--queries 50] [--max-seconds 900]

Documents of 20 chunks, unit vectors of `--dim` dimensions (float32). Each (store, size) runs in its own process,
so its peak resident memory is its own (PostgreSQL's server is a separate process: its share is the data folder's
size on disk, reported for every store). Ingest: documents written 500 at a time through the store interface
(`add_documents`; the index: `write_index`). Queries: `search_documents(k=10)`, exact (brute force) in every store.
A run that has not finished its ingest within `--max-seconds` stops and reports the rate it reached. Throughputs are
reported as ratios to `exact_search` in the same run, never as bare times.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_result  # noqa: E402

STORES = ("exact_search", "index", "lancedb", "qdrant", "qdrant-multivector", "pgserver")
CHUNKS_PER_DOC = 20


def vectors(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((n, dim), np.float32)
    for start in range(0, n, 100_000):
        block = rng.standard_normal((min(100_000, n - start), dim), dtype=np.float32)
        out[start : start + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def folder_mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def one(store: str, n: int, dim: int, queries: int, max_seconds: float, work: Path) -> dict:
    """Ingest n chunks into one store and run the queries; the numbers of this process alone."""
    from contextembed.chunking import Chunk
    from contextembed.retrieval import exact_search
    from contextembed.stores import DocumentVectors, StoreInfo, open_store

    data, asked = vectors(n, dim, 0), vectors(queries, dim, 1)
    docs = n // CHUNKS_PER_DOC
    doc_of_row = np.repeat(np.arange(docs), CHUNKS_PER_DOC)
    chunks = [Chunk(f"chunk {i}", 10 * i, 10 * i + 8) for i in range(CHUNKS_PER_DOC)]
    result = {"store": store, "chunks": n}
    start = time.perf_counter()
    if store == "exact_search":
        result["ingest_seconds"] = 0.0
        search = lambda q: exact_search(q[None], data, doc_of_row, top_k_documents=10, top_k_chunks=10)  # noqa: E731
    elif store == "index":
        from contextembed.index import read_index, write_index

        records = [{"doc": int(d), "path": f"d{d}", "chunk": i % CHUNKS_PER_DOC, "start": 0, "end": 1, "text": "x"}
                   for i, d in enumerate(doc_of_row)]
        write_index(work / "index", data, records, {"precision": "float32", "output_dim": dim})
        index = read_index(work / "index")
        doc_ids = np.array([r["doc"] for r in index.chunks])
        result["ingest_seconds"] = time.perf_counter() - start
        search = lambda q: exact_search(q[None], index.embeddings, doc_ids, top_k_documents=10,  # noqa: E731
                                        top_k_chunks=10)
    else:
        uri = {"lancedb": f"lancedb://{work / 'lance'}", "qdrant": f"qdrant://{work / 'qdrant'}",
               "qdrant-multivector": f"qdrant://{work / 'qdrant'}?document_search=multivector",
               "pgserver": f"pgserver://{work / 'pg'}"}[store]
        opened = open_store(uri)
        opened.ensure(StoreInfo("bench", dim))
        written = 0
        for first in range(0, docs, 500):
            opened.add_documents(DocumentVectors(f"d{d:08d}", chunks, data[d * CHUNKS_PER_DOC : (d + 1) * CHUNKS_PER_DOC])
                                 for d in range(first, min(docs, first + 500)))
            written = min(docs, first + 500) * CHUNKS_PER_DOC
            if time.perf_counter() - start > max_seconds:
                break
        result["ingest_seconds"] = time.perf_counter() - start
        result["ingested"] = written
        if written < n:
            result["ingest_chunks_per_s"] = written / result["ingest_seconds"]
            result["unfinished"] = True
            result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            opened.close()
            return result
        search = lambda q: opened.search_documents(q, k=10)  # noqa: E731
    if result["ingest_seconds"]:
        result["ingest_chunks_per_s"] = n / result["ingest_seconds"]
    search(asked[0])  # warm-up
    start = time.perf_counter()
    for q in asked:
        search(q)
    result["query_seconds"] = (time.perf_counter() - start) / len(asked)
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["disk_mib"] = folder_mib(work)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES))
    parser.add_argument("--max-seconds", type=float, default=900, help="ingest time limit per store and size")
    parser.add_argument("--one", nargs=2, metavar=("STORE", "CHUNKS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as work:
            print(json.dumps(one(args.one[0], int(args.one[1]), args.dim, args.queries, args.max_seconds,
                                 Path(work))))
        return 0
    rows = []
    for n in args.sizes:
        for store in args.stores:
            command = [sys.executable, __file__, "--one", store, str(n), "--dim", str(args.dim), "--queries",
                       str(args.queries), "--max-seconds", str(args.max_seconds)]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode:
                rows.append({"store": store, "chunks": n, "error": done.stderr.strip().splitlines()[-1]})
            else:
                rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), flush=True)
    lines = ["| chunks | store | ingest, chunks/s | query ÷ exact_search time | peak RSS MiB | on disk MiB |",
             "|---|---|---|---|---|---|"]
    for n in args.sizes:
        base = next((r for r in rows if r["chunks"] == n and r["store"] == "exact_search" and "query_seconds" in r),
                    None)
        for r in (r for r in rows if r["chunks"] == n):
            if "error" in r:
                lines.append(f"| {n:,} | {r['store']} | failed: {r['error']} | | | |")
                continue
            rate = f"{r['ingest_chunks_per_s']:,.0f}" if r.get("ingest_chunks_per_s") else "(in memory)"
            if r.get("unfinished"):
                rate += f" — stopped after {args.max_seconds:.0f} s at {r['ingested']:,} chunks"
            ratio = (f"{r['query_seconds'] / base['query_seconds']:.1f}" if base and "query_seconds" in r else "—")
            disk = f"{r['disk_mib']:,.0f}" if "disk_mib" in r else "—"
            lines.append(f"| {n:,} | {r['store']} | {rate} | {ratio} | {r['peak_rss_mib']:,.0f} | {disk} |")
    write_result("stores", "python bench/stores.py " + " ".join(sys.argv[1:]), lines, {"rows": rows})
    print("\n".join(lines))
    largest = max(args.sizes)
    done = {r["store"]: r for r in rows if r["chunks"] == largest and "ingest_chunks_per_s" in r}
    print(f"ingest chunks/s at {largest:,} chunks: " + ", ".join(f"{name} {r['ingest_chunks_per_s']:,.0f}"
                                                                   for name, r in done.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
