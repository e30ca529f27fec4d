"""`contextembed evaluate`: run a protocol on a dataset folder and write results.json + results.md."""

from __future__ import annotations

import argparse
import json
from importlib.resources import files
from pathlib import Path

FORMATS = ("context-bench", "conteb", "beir")


def shipped_dataset() -> Path:
    """The contextual evaluation set that ships with the package (see its SOURCE.md)."""
    return Path(str(files("contextembed").joinpath("evaluation", "data", "recipes")))


def add_evaluate_command(commands) -> None:
    evaluate = commands.add_parser(
        "evaluate", help="score a model on a context-bench, ConTEB or BEIR/Q2D-style dataset",
        description="Embeds, searches exhaustively and scores. Without DATA, runs the shipped contextual "
                    "evaluation set (context-bench style): late chunking vs each sentence alone vs one vector "
                    "per document.")
    evaluate.add_argument("data", nargs="?", help="dataset folder (default: the shipped recipes set)")
    evaluate.add_argument("--format", choices=FORMATS, default="context-bench", help="dataset layout")
    evaluate.add_argument("--model", help="checkpoint folder or Hub id (default: the default model)")
    evaluate.add_argument("--device", default="cpu")
    evaluate.add_argument("--batch-size", type=int, default=32)
    evaluate.add_argument("--k", type=int, nargs="+", default=[1, 10], help="K values (context-bench)")
    evaluate.add_argument("--max-tokens", type=int, default=512, help="truncation for --format beir (Q2D rule)")
    evaluate.add_argument("--chunker", help="for --format beir: split documents into chunks (e.g. sentences)")
    evaluate.add_argument("--out", default="evaluation-results", help="folder for results.json and results.md")
    evaluate.add_argument("--no-progress", action="store_true", help="hide progress bars")
    evaluate.set_defaults(func=evaluate_command)


def evaluate_command(args) -> int:
    import contextembed
    from contextembed.evaluation import loaders, protocols, report
    from contextembed.evaluation.context_bench import run_context_bench

    data = Path(args.data) if args.data else shipped_dataset()
    if not data.is_dir():
        raise ValueError(f"dataset folder {str(data)!r} does not exist")
    if any(k <= 0 for k in args.k):
        raise ValueError(f"--k values must be positive integers, got {args.k}")
    encoder = contextembed.load(args.model, device=args.device)
    options = {"batch_size": args.batch_size, "show_progress_bar": False if args.no_progress else None}
    if args.format == "context-bench":
        documents, queries = loaders.load_context_bench(data)
        results = run_context_bench(encoder, documents, queries, ks=sorted(set(args.k)), **options)
        columns = [f"{m}@{k}" for m in ("Document", "Answer", "EvidenceRecall", "AllEvidence") for k in sorted(args.k)]
        table = report.context_bench_table(results, columns)
        if any("by_capability" in r for r in results.values()):
            table += "\n\n" + report.capability_table(results, [f"Answer@{k}" for k in sorted(set(args.k))])
    elif args.format == "conteb":
        folders = [data] if any(data.glob("documents.*")) else sorted(p for p in data.iterdir() if p.is_dir())
        results = protocols.run_conteb(encoder, [loaders.load_conteb_task(f) for f in folders], **options)
        table = report.conteb_table(results)
    else:
        results = protocols.run_q2d(encoder, loaders.load_beir(data), max_tokens=args.max_tokens,
                                    chunker=args.chunker, **options)
        table = report.q2d_table(results)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    payload = {"dataset": str(data), "format": args.format, "model": args.model or "default", "results": results}
    (out / "results.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    header = f"Model: {args.model or 'default (all-MiniLM-L6-v2, late chunking)'}; data: {data.name}; metrics in %.\n\n"
    (out / "results.md").write_text(header + table + "\n", encoding="utf-8")
    print(header + table)
    print(f"\nwrote {out / 'results.json'} and {out / 'results.md'}")
    return 0
