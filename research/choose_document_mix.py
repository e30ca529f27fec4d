"""Measure `document_mix` (each chunk's pooled state moved toward its document's mean) on the validation sets only.

    python scripts/choose_document_mix.py validation/ --model contextembed-all-MiniLM-L6-v2 \\
        --mixes 0 0.1 0.2 0.3 --out runs/document-mix.json

For each model and each weight it runs late chunking (`run_context_bench`, float32, the model's own
`window_head_tokens`) on the six validation sets (scripts/build_training_data.py's held-out source, held-out generator,
long families and held-out FAQ; scripts/handwritten_families.py's near and far families; never the shipped evaluation
sets) and prints, per weight, the decision figures the default model's builds are chosen by:

- the decision mean: the mean of hand-written near and far Answer@1, held-out near and far Answer@1 (each the mean of
  the held-out source's and the held-out generator's), long-family Answer@1 and held-out FAQ Answer@10;
- the EvidenceRecall@10 mean over the six sets, and each set's Document@1, AllEvidence@10 and Answer@10;
- beside them, where the folder holds it, `handwritten-pronoun`'s Copy@1 (never part of the decision mean).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import contextembed  # noqa: E402
from choose_window_head import near_far  # noqa: E402
from contextembed.evaluation.context_bench import run_context_bench  # noqa: E402
from contextembed.evaluation.loaders import load_context_bench  # noqa: E402

SETS = ("heldout-source", "heldout-generator", "long-family", "heldout-faq", "handwritten-near", "handwritten-far")
# Reported beside the decision figures where the folder holds it, never part of them (written after build 30).
EXTRA_SETS = ("handwritten-pronoun",)


def decision(per_set: dict) -> dict:
    """The decision figures and their mean, and the EvidenceRecall@10 mean, from each set's figures."""
    figures = {
        "handwritten-near": per_set["handwritten-near"]["Answer@1"],
        "handwritten-far": per_set["handwritten-far"]["Answer@1"],
        "heldout near": (per_set["heldout-source"]["Answer@1 near"] + per_set["heldout-generator"]["Answer@1 near"]) / 2,
        "heldout far": (per_set["heldout-source"]["Answer@1 far"] + per_set["heldout-generator"]["Answer@1 far"]) / 2,
        "long-family": per_set["long-family"]["Answer@1"],
        "heldout-faq Answer@10": per_set["heldout-faq"]["Answer@10"],
    }
    evidence = {name: per_set[name]["EvidenceRecall@10"] for name in SETS}
    return {"decision figures": {k: round(v, 4) for k, v in figures.items()},
            "decision mean": round(sum(figures.values()) / len(figures), 4),
            "EvidenceRecall@10 mean": round(sum(evidence.values()) / len(evidence), 4)}


def set_figures(late: dict, queries) -> dict:
    """One validation set's figures from late chunking's results: every metric, and Answer@1 near and far."""
    return {k: v for k, v in late.items() if k != "by_capability"} | near_far(late, queries)


def print_row(name: str, row: dict) -> None:
    extra = "".join(f", {s} Copy@1 {row['sets'][s]['Copy@1']:.4f}" for s in EXTRA_SETS if s in row["sets"])
    print(f"{name}: decision mean {row['decision mean']}, EvidenceRecall@10 mean {row['EvidenceRecall@10 mean']}, "
          f"{json.dumps(row['decision figures'])}{extra}", flush=True)


def write_table(out: Path, table: dict) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(table, indent=2) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("validation", type=Path, help="folder holding the six validation sets")
    parser.add_argument("--model", nargs="+", default=["contextembed-all-MiniLM-L6-v2"])
    parser.add_argument("--mixes", type=float, nargs="+", default=[0.0, 0.1, 0.2, 0.3])
    parser.add_argument("--out", type=Path, default=Path("runs/document-mix.json"))
    args = parser.parse_args()
    sets = {name: load_context_bench(args.validation / name) for name in SETS}
    sets |= {name: load_context_bench(args.validation / name) for name in EXTRA_SETS
             if (args.validation / name).is_dir()}
    table = {}
    for name in args.model:
        model = contextembed.load(name)
        for mix in args.mixes:
            model.model.config.document_mix = mix
            per_set = {}
            for s, (documents, queries) in sets.items():
                late = run_context_bench(model, documents, queries, ks=[1, 10], modes=("contextual",),
                                         show_progress_bar=False)["contextual"]
                per_set[s] = set_figures(late, queries)
            table[f"{name} mix={mix}"] = {"sets": per_set, **decision(per_set)}
            print_row(f"{name} mix={mix}", table[f"{name} mix={mix}"])
    write_table(args.out, table)


if __name__ == "__main__":
    main()
