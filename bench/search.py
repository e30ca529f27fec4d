"""Exact top-K search over a synthetic corpus: float32 vs int8 codes, same queries, side by side.

Random unit vectors (float32) and their int8 codes (the checkpoint's fixed scheme) are searched with
`contextembed.exact_search` (blocked products, documents ranked by their best chunk). Reports the throughput
ratio int8 / float32 (target >= 2) and the memory of each corpus. `--context-bench-scale` runs only int8 at the
size of context-bench (2,458,072 chunks x 1024-d, 2,099 queries, 38,894 documents), where float32 would not fit
beside its codes on a 24 GB machine.

    python bench/search.py [--chunks 1000000] [--dim 1024] [--queries 256]
    python bench/search.py --context-bench-scale
    python bench/search.py --backends --chunks 200000 --queries 64   # vs usearch / faiss-cpu, if installed

Last line: the int8/float32 throughput ratio (or, at context-bench scale, queries per second).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import interleaved, write_result  # noqa: E402

from contextembed.quantization import quantize  # noqa: E402
from contextembed.retrieval import exact_search  # noqa: E402


def unit_rows(rng, n, dim, chunk=200_000):
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, chunk):
        block = rng.standard_normal((min(chunk, n - start), dim), dtype=np.float32)
        out[start : start + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def int8_rows(rng, n, dim, chunk=200_000):
    out = np.empty((n, dim), dtype=np.int8)
    for start in range(0, n, chunk):
        out[start : start + min(chunk, n - start)] = quantize(unit_rows(rng, min(chunk, n - start), dim), "int8")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--queries", type=int, default=256)
    parser.add_argument("--chunks-per-doc", type=int, default=63)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--context-bench-scale", action="store_true")
    parser.add_argument("--backends", action="store_true",
                        help="compare with usearch (exact int8) and faiss-cpu (knn, float32) where installed")
    args = parser.parse_args()
    rng = np.random.default_rng(0)

    if args.context_bench_scale:
        n, dim, n_queries, n_docs = 2_458_072, 1024, 2_099, 38_894
        codes = int8_rows(rng, n, dim)
        doc_ids = np.sort(rng.integers(0, n_docs, size=n))
        queries = quantize(unit_rows(rng, n_queries, dim), "int8")
        start = time.perf_counter()
        result = exact_search(queries, codes, doc_ids, top_k_documents=10, top_k_chunks=10, best_chunks=False,
                              precision="int8")
        seconds = time.perf_counter() - start
        peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        lines = [f"{n:,} chunks × {dim}-d int8 ({codes.nbytes / 2**30:.2f} GiB), {n_docs:,} documents, "
                 f"{n_queries:,} queries: exhaustive top-10 documents and chunks in **{seconds:.1f} s** "
                 f"({n_queries / seconds:.1f} queries/s); peak resident memory of the whole process "
                 f"{peak_gib:.1f} GiB."]
        assert result.doc_ids.shape == (n_queries, 10)
        print("\n".join(lines))
        write_result("search_context_bench_scale", "python bench/search.py --context-bench-scale", lines,
                     {"seconds": seconds, "queries_per_second": n_queries / seconds, "peak_gib": peak_gib})
        print(f"queries per second at context-bench scale: {n_queries / seconds:.1f}")
        return 0

    vectors = unit_rows(rng, args.chunks, args.dim)
    codes = quantize(vectors, "int8")
    doc_ids = np.arange(args.chunks) // args.chunks_per_doc
    queries = unit_rows(rng, args.queries, args.dim)
    query_codes = quantize(queries, "int8")
    results = {}

    def run(name, q, corpus):
        def go():
            results[name] = exact_search(q, corpus, doc_ids, top_k_documents=10, top_k_chunks=10, best_chunks=False,
                                         precision=name)
        return go

    candidates = {"float32": run("float32", queries, vectors), "int8": run("int8", query_codes, codes)}
    if args.backends:
        try:
            from usearch.index import MetricKind, search as usearch_search

            candidates["usearch exact int8 (chunks only)"] = lambda: usearch_search(codes, query_codes, 10,
                                                                                    MetricKind.IP, exact=True)
        except ImportError:
            print("usearch not installed: skipped", file=sys.stderr)
        try:
            import faiss

            candidates["faiss.knn float32 (chunks only)"] = lambda: faiss.knn(queries, vectors, 10,
                                                                               metric=faiss.METRIC_INNER_PRODUCT)
        except ImportError:
            print("faiss-cpu not installed: skipped", file=sys.stderr)
    seconds = interleaved(candidates, repeats=args.repeats, warmup=1 if args.backends else 0)
    ratio = seconds["float32"] / seconds["int8"]
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(results["float32"].chunk_rows,
                                                                  results["int8"].chunk_rows)])
    lines = [
        f"{args.chunks:,} chunks × {args.dim}-d, {args.queries} queries, exhaustive top-10 documents and chunks.",
        "",
        "| storage | corpus size | median s | queries/s |",
        "|---|---|---|---|",
        f"| float32 | {vectors.nbytes / 2**30:.2f} GiB | {seconds['float32']:.2f} | "
        f"{args.queries / seconds['float32']:.0f} |",
        f"| int8 | {codes.nbytes / 2**30:.2f} GiB | {seconds['int8']:.2f} | {args.queries / seconds['int8']:.0f} |",
        *(f"| {name} | | {value:.2f} | {args.queries / value:.0f} |" for name, value in seconds.items()
          if name not in ("float32", "int8")),
        "",
        f"int8 / float32 throughput: **{ratio:.2f}** (target ≥ 2); top-10 chunk overlap with float32: {overlap:.1%}.",
    ]
    print("\n".join(lines))
    name = "search_backends" if args.backends else "search"
    command = f"python bench/search.py {'--backends ' if args.backends else ''}--chunks {args.chunks} " \
              f"--dim {args.dim} --queries {args.queries}"
    write_result(name, command, lines, {"seconds": seconds, "ratio": ratio, "top10_overlap": overlap})
    print(f"ratio int8/float32 search throughput: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
