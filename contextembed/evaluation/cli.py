"""`contextembed evaluate`: run a protocol on a dataset folder and write results.json + results.md."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

from contextembed.encoder import DTYPES

FORMATS = ("context-bench", "conteb", "beir")


# The sets that ship with the package (see each SOURCE.md), in the format each is in: three contextual sets and a
# plain-retrieval guard.
SHIPPED_FORMATS = {"recipes": "context-bench", "pyfaq": "context-bench", "wikipacks": "context-bench",
                   "wikiguard": "beir"}
SHIPPED = tuple(SHIPPED_FORMATS)


def shipped_dataset(name: str = "recipes") -> Path:
    """An evaluation set that ships with the package (see its SOURCE.md): one of `SHIPPED`."""
    if name not in SHIPPED:
        raise ValueError(f"shipped sets are {SHIPPED}, got {name!r}")
    return Path(str(files("contextembed").joinpath("evaluation", "data", name)))


def add_evaluate_command(commands) -> None:
    from contextembed.cli import add_backend_options

    evaluate = commands.add_parser(
        "evaluate", help="score a model on a context-bench, ConTEB or BEIR/Q2D-style dataset",
        description="Embeds, searches exhaustively and scores. Without DATA, runs the shipped sets: three "
                    "contextual ones in the context-bench layout (recipes, the Python FAQ, Wikipedia packs; late "
                    "chunking vs each sentence alone vs one vector per document) and a plain-retrieval guard "
                    "(Wikipedia descriptions -> summaries, BEIR layout, one vector per document).")
    evaluate.add_argument("data", nargs="?", help="dataset folder (default: the shipped sets)")
    evaluate.add_argument("--format", choices=FORMATS, default="context-bench", help="dataset layout")
    evaluate.add_argument("--model", help="checkpoint folder or Hub id (default: the default model)")
    evaluate.add_argument("--device", default="cpu")
    evaluate.add_argument("--dtype", choices=DTYPES, help="weights' dtype (default float32; auto: bfloat16 where "
                          "the device computes it natively)")
    add_backend_options(evaluate)
    evaluate.add_argument("--batch-size", type=int, default=32)
    evaluate.add_argument("--k", type=int, nargs="+", default=[1, 10], help="K values (context-bench)")
    evaluate.add_argument("--max-tokens", type=int, default=512, help="truncation for --format beir (Q2D rule)")
    evaluate.add_argument("--chunker", help="for --format beir: split documents into chunks (e.g. sentences)")
    evaluate.add_argument("--precision", choices=["float32", "int8"], default="float32",
                          help="score float vectors or the checkpoint's int8 codes (context-bench layout)")
    evaluate.add_argument("--out", default="evaluation-results", help="folder for results.json and results.md")
    evaluate.add_argument("--no-progress", action="store_true", help="hide progress bars")
    evaluate.set_defaults(func=evaluate_command)


def evaluate_command(args) -> int:
    from contextembed.cli import load_model
    from contextembed.evaluation import loaders, protocols, report
    from contextembed.evaluation.context_bench import run_context_bench

    if args.data is not None and not Path(args.data).is_dir():
        raise ValueError(f"dataset folder {args.data!r} does not exist")
    if any(k <= 0 for k in args.k):
        raise ValueError(f"--k values must be positive integers, got {args.k}")
    if args.data is None and args.format != "context-bench":
        raise ValueError("the shipped sets are in the context-bench layout: pass DATA for other formats")
    encoder = load_model(args)
    options = {"batch_size": args.batch_size, "show_progress_bar": False if args.no_progress else None}
    if args.data:
        datasets = {Path(args.data).name: (Path(args.data), args.format)}
    else:
        datasets = {n: (shipped_dataset(n), f) for n, f in SHIPPED_FORMATS.items()}
    results, tables = {}, []
    for name, (data, data_format) in datasets.items():
        if data_format == "context-bench":
            documents, queries = loaders.load_context_bench(data)
            ks = sorted(set(args.k))
            results[name] = run_context_bench(encoder, documents, queries, ks=ks, precision=args.precision,
                                              **options)
            columns = [f"{m}@{k}" for m in ("Document", "Answer", "EvidenceRecall", "AllEvidence") for k in ks]
            table = report.context_bench_table(results[name], columns)
            if any("by_capability" in r for r in results[name].values()):
                table += "\n\n" + report.capability_table(results[name], [f"Answer@{k}" for k in ks])
        elif data_format == "conteb":
            folders = [data] if any(data.glob("documents.*")) else sorted(p for p in data.iterdir() if p.is_dir())
            results[name] = protocols.run_conteb(encoder, [loaders.load_conteb_task(f) for f in folders], **options)
            table = report.conteb_table(results[name])
        else:
            results[name] = protocols.run_q2d(encoder, loaders.load_beir(data), max_tokens=args.max_tokens,
                                              chunker=args.chunker, **options)
            table = report.q2d_table(results[name])
        tables.append(f"#### {name}\n\n{table}")
    table = "\n\n".join(tables)
    data = ", ".join(datasets)
    precision = "" if args.precision == "float32" else f"; {args.precision} codes"

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    payload = {"datasets": {n: str(p) for n, (p, _) in datasets.items()},
               "formats": {n: f for n, (_, f) in datasets.items()}, "precision": args.precision,
               "model": args.model or "default", "results": results}
    (out / "results.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    header = (f"Model: {args.model or 'default (all-MiniLM-L6-v2 fine-tuned for late chunking)'}; data: {data}"
              f"{precision}; metrics in %.\n\n")
    (out / "results.md").write_text(header + table + "\n", encoding="utf-8")
    print(header + table)
    print(f"\nwrote {out / 'results.json'} and {out / 'results.md'}")
    return 0
