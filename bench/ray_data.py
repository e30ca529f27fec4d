"""Ray Data vs one process: the same documents embedded by `embed_dataset` on a local Ray actor pool and by
`encode_documents` in this process, side by side; the chunk vectors must agree.

    python bench/ray_data.py [--docs N] [--actors A] [--repeats R]

Default model (MiniLM) on the shipped recipes set. A Ray run is what a job pays: starting the actor pool, loading
the model in every actor, scheduling, moving the documents to the actors and the chunk rows back (Ray itself is
started once, before timing). On a 2-core machine two actors share the same two cores as one process: expect no
speed-up. Last line: the ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import interleaved, write_result  # noqa: E402

import contextembed  # noqa: E402
from contextembed.evaluation.datasets import shipped_dataset  # noqa: E402
from contextembed.evaluation.loaders import load_context_bench  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=160, help="documents from the shipped set (default all 160)")
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray
    from ray.data import ActorPoolStrategy

    from contextembed.integrations.ray import ChunkEmbedder

    documents, _ = load_context_bench(shipped_dataset())
    docs = {d.id: d.sentences for d in documents[: args.docs]}
    encoder = contextembed.load()
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    try:
        dataset = ray.data.from_items([{"id": k, "chunks": v} for k, v in docs.items()]).materialize()
        batch = max(1, len(docs) // (4 * args.actors))

        def on_ray():
            return dataset.map_batches(ChunkEmbedder, compute=ActorPoolStrategy(size=args.actors), batch_size=batch,
                                       batch_format="pyarrow").to_pandas()

        def in_process():
            return encoder.encode_documents(list(docs.values()), show_progress_bar=False)

        rows = on_ray().sort_values(["doc_id", "chunk_index"])
        expected = dict(zip(docs, in_process()))
        diff = max(float(np.abs(np.stack(rows[rows.doc_id == k].embedding.to_numpy()) - v).max())
                   for k, v in expected.items())
        seconds = interleaved({"one process": in_process, f"Ray Data, {args.actors} actors": on_ray},
                              repeats=args.repeats, warmup=0)
    finally:
        ray.shutdown()
    ray_name = f"Ray Data, {args.actors} actors"
    ratio = seconds["one process"] / seconds[ray_name]
    chunks = sum(len(v) for v in docs.values())
    lines = [
        f"{len(docs)} documents, {chunks} chunks; {os.cpu_count()} CPUs for both sides.",
        "",
        "| pipeline | median s |",
        "|---|---|",
        *(f"| {name} | {s:.3f} |" for name, s in seconds.items()),
        "",
        f"Throughput of Ray Data / one process: **{ratio:.2f}**; largest chunk-vector difference {diff:.1e}.",
    ]
    print("\n".join(lines))
    write_result("ray_data", "python bench/ray_data.py", lines,
                 {"seconds": seconds, "ratio": ratio, "max_abs_diff": diff, "documents": len(docs), "chunks": chunks,
                  "actors": args.actors})
    print(f"ratio Ray Data/one-process throughput: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
