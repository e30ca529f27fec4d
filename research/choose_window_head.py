"""Choose how many opening tokens every later window carries (`window_head_tokens`), on the validation sets only.

    python scripts/choose_window_head.py validation/ --model contextembed-all-MiniLM-L6-v2-untrained \\
        --heads 0 32 64 128 --out runs/window-head.json

For each model and each amount it runs late chunking (`run_context_bench`) on the validation sets that scripts/build_training_data.py
wrote (held-out source, held-out generator, long families; never the shipped evaluation sets) and prints
Document@1 / Answer@1 per set, near and far. The default model's `WINDOW_HEAD_TOKENS` is the amount with the best
mean far Answer@1 whose near Answer@1 is within a point of the best near figure (carrying tokens costs a little room
in each window).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import contextembed
from contextembed.evaluation.context_bench import run_context_bench
from contextembed.evaluation.loaders import load_context_bench


def near_far(late: dict, queries) -> dict:
    """Answer@1 over the near and over the far queries (capabilities ending in `/near` or `/far`) of one mode's
    results, weighted by each capability's queries; a distance no query has is left out."""
    counts: dict[str, int] = {}
    for query in queries:
        counts[query.capability] = counts.get(query.capability, 0) + 1
    row = {}
    for distance in ("near", "far"):
        scores = [(c["Answer@1"], counts[name]) for name, c in late.get("by_capability", {}).items()
                  if name.endswith("/" + distance)]
        total = sum(n for _, n in scores)
        if total:
            row[f"Answer@1 {distance}"] = sum(a * n for a, n in scores) / total
    return row


def figures(results: dict, queries) -> dict:
    """Late chunking's Document@1, Answer@1 and Answer@10 overall, and Answer@1 over near and over far queries."""
    late = results["contextual"]
    row = {"Document@1": late["Document@1"], "Answer@1": late["Answer@1"], "Answer@10": late["Answer@10"]}
    return row | {name: round(value, 4) for name, value in near_far(late, queries).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("validation", type=Path, help="folder of validation sets (context-bench)")
    parser.add_argument("--model", nargs="+", default=["contextembed-all-MiniLM-L6-v2-untrained"])
    parser.add_argument("--heads", type=int, nargs="+", default=[0, 32, 64, 128])
    parser.add_argument("--titles", action="store_true",
                        help="also measure caller titles instead: each document's first line as its title (kept in "
                             "every window), nothing else carried")
    parser.add_argument("--out", type=Path, default=Path("runs/window-head.json"))
    args = parser.parse_args()
    sets = {p.name: load_context_bench(p) for p in sorted(args.validation.iterdir())
            if (p / "queries.jsonl").is_file() and (p / "queries.jsonl").stat().st_size}
    table = {}
    for name in args.model:
        model = contextembed.load(name)
        for head in args.heads:
            model.model.config.window_head_tokens = head
            table[f"{name} head={head}"] = {
                s: figures(run_context_bench(model, documents, queries, ks=[1, 10], modes=("contextual",),
                                             show_progress_bar=False), queries)
                for s, (documents, queries) in sets.items()}
            print(f"{name} head={head}: " + json.dumps(table[f"{name} head={head}"]), flush=True)
        if args.titles:
            model.model.config.window_head_tokens = 0
            table[f"{name} titles"] = {
                s: figures(run_context_bench(model, documents, queries, ks=[1, 10], modes=("contextual",),
                                             show_progress_bar=False, titles=[d.sentences[0] for d in documents]),
                           queries)
                for s, (documents, queries) in sets.items()}
            print(f"{name} titles: " + json.dumps(table[f"{name} titles"]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(table, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
