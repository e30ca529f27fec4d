"""Choose how much consecutive windows overlap (`window_overlap`), by quality against cost, on validation sets only.

    python data_builders/handwritten_families.py validation/
    python research/choose_window_overlap.py validation/ --out research/window_overlap.json

For each model and each overlap it runs late chunking (`run_context_bench`, contextual only) on the long-document
validation sets (`handwritten-long`: copies of ~2,000 tokens, four 512-token windows, asked lines in the last ones;
`handwritten-far`: ~660 tokens, two windows) and records Document@1 / Answer@1 / Answer@10, and what the windows
cost: the tokens the backbone processed over the documents' tokens (one pass would be 1). The default overlap is the
cheapest whose mean Answer@1 over both sets, for each model, is within a point of the best overlap's: these are
validation figures (the sets chose the setting), never reported as results.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import contextembed
from contextembed.evaluation.context_bench import run_context_bench
from contextembed.evaluation.loaders import load_context_bench

SETS = ("handwritten-long", "handwritten-far")


def measured(model, documents, queries) -> dict:
    """Late chunking's figures on one set, and tokens processed by the backbone over the documents' tokens."""
    processed = []

    def count(module, args, kwargs):
        mask = kwargs.get("attention_mask")
        ids = kwargs["input_ids"]
        processed.append(int(mask.sum()) if mask is not None else ids.numel())

    hook = model.model.backbone.register_forward_pre_hook(count, with_kwargs=True)
    try:
        results = run_context_bench(model, documents, queries, ks=[1, 10], modes=("contextual",),
                                    show_progress_bar=False)["contextual"]
    finally:
        hook.remove()
    rows = model.processor.tokenize_documents([d.sentences for d in documents], task="document")
    tokens = sum(len(r["input_ids"]) for r in rows)
    return {"Document@1": results["Document@1"], "Answer@1": results["Answer@1"], "Answer@10": results["Answer@10"],
            "tokens_processed_per_token": round(sum(processed) / tokens, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("validation", type=Path, help="folder holding the handwritten validation sets")
    parser.add_argument("--model", nargs="+", default=["", "contextembed-all-MiniLM-L6-v2-untrained"])
    parser.add_argument("--overlaps", type=float, nargs="+", default=[0.5, 0.25, 0.125, 0.0625, 0.0])
    parser.add_argument("--out", type=Path, default=Path("research/window_overlap.json"))
    args = parser.parse_args()
    sets = {name: load_context_bench(args.validation / name) for name in SETS}
    table: dict[str, dict] = {}
    for name in args.model:
        model = contextembed.load(name)
        label = name or "default"
        for overlap in args.overlaps:
            model.config.window_overlap = overlap
            row = {s: measured(model, *sets[s]) for s in SETS}
            row["mean Answer@1"] = round(sum(row[s]["Answer@1"] for s in SETS) / len(SETS), 4)
            table.setdefault(label, {})[str(overlap)] = row
            print(f"{label} overlap={overlap}: {json.dumps(row)}", flush=True)
    chosen = []
    for overlap in sorted(args.overlaps):
        if all(rows[str(overlap)]["mean Answer@1"] >= max(r["mean Answer@1"] for r in rows.values()) - 0.01
               for rows in table.values()):
            chosen.append(overlap)
    table["chosen"] = min(chosen) if chosen else None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(table, indent=2) + "\n", encoding="utf-8")
    print(f"chosen overlap: {table['chosen']}")


if __name__ == "__main__":
    main()
