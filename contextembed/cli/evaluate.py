"""`contextembed evaluate`: a model on the shipped sets or a dataset folder, results as JSON and Markdown."""

from __future__ import annotations

import argparse
import sys

from contextembed.cli import options
from contextembed.choices import DATASET_LAYOUTS


def add_commands(commands) -> None:
    evaluate = commands.add_parser(
        "evaluate", help="score a model on a context-bench, ConTEB or BEIR/Q2D-style dataset",
        description="Embeds, searches exhaustively and scores. Without DATA, runs the shipped sets: three "
                    "contextual ones in the context-bench layout (recipes, the Python FAQ, Wikipedia packs; late "
                    "chunking vs each sentence alone vs one vector per document) and a plain-retrieval guard "
                    "(Wikipedia descriptions -> summaries, BEIR layout, one vector per document). The default "
                    "model is English only.")
    evaluate.add_argument("data", nargs="?", help="dataset folder (default: the shipped sets)")
    evaluate.add_argument("--format", choices=DATASET_LAYOUTS, default="context-bench", help="dataset layout")
    options.add_model_options(evaluate, output_dim=False)
    evaluate.add_argument("--k", type=options.positive_int, nargs="+", default=[1, 10], help="K values "
                          "(context-bench)")
    evaluate.add_argument("--max-tokens", type=options.positive_int, default=512,
                          help="truncation for --format beir (Q2D rule)")
    evaluate.add_argument("--chunker", help="for --format beir: split documents into chunks (e.g. sentences)")
    evaluate.add_argument("--precision", choices=["float32", "int8"], default="float32",
                          help="score float vectors or the checkpoint's int8 codes (context-bench layout)")
    evaluate.add_argument("--local-mix", type=options.unit_float, default=0.0, metavar="W",
                          help="late chunking with each sentence's vector mixed with it encoded alone, weight W in "
                               "[0, 1] (encode_documents' local_mix; context-bench layout; default 0)")
    evaluate.add_argument("--store", metavar="URI", help="for --format beir: also write the vectors to this store "
                          "(an index folder or file://, lancedb://, qdrant://, pgserver://, postgresql://) and "
                          "retrieve through it, reported "
                          "beside exact search (Recall@1000, nDCG@10)")
    evaluate.add_argument("--ann", action="store_true", help="with --store: build the store's ANN index and search "
                          "through it (default: the store's exact search)")
    evaluate.add_argument("--out", default="evaluation-results", help="folder for results.json, results.md and the "
                          "figure")
    evaluate.add_argument("--figure", choices=["both", "png", "html", "none"], default="both",
                          help="the figure of the context-bench results written to --out: figure.png, figure.html (a "
                               "self-contained page, inline SVG) or both (default); needs matplotlib: pip install "
                               "'contextembed[plot]'")
    evaluate.set_defaults(func=evaluate_command)


def evaluate_command(args: argparse.Namespace) -> int:
    from contextembed.evaluation.datasets import resolve_datasets
    from contextembed.evaluation.run import distance_setup, evaluate_datasets, write_results
    from contextembed.stores import redact

    datasets = resolve_datasets(args.data, args.format)  # a mistyped folder fails before the model loads
    if args.ann and not args.store:
        raise ValueError("--ann builds a store's ANN index: give the store with --store URI")
    if args.local_mix and args.data and args.format != "context-bench":
        raise ValueError("--local-mix is measured on context-bench datasets (late chunking vs each sentence alone)")
    if args.store and args.format != "beir":
        raise ValueError("--store measures first-stage retrieval: use it with --format beir")
    store = None
    if args.store:
        from contextembed.stores import open_store

        store = open_store(args.store)
    model = options.load_model(args)
    try:
        results, table = evaluate_datasets(model, datasets, ks=args.k, precision=args.precision,
                                           max_tokens=args.max_tokens, chunker=args.chunker,
                                           batch_size=args.batch_size, show_progress_bar=options.progress(args),
                                           store=store, ann=args.ann, local_mix=args.local_mix)
    finally:
        if store is not None:
            store.close()
    precision = "" if args.precision == "float32" else f"; {args.precision} codes"
    precision += f"; local_mix {args.local_mix:g}" if args.local_mix else ""
    header = (f"Model: {args.model or 'default (all-MiniLM-L6-v2 fine-tuned for late chunking)'}; data: "
              f"{', '.join(datasets)}{precision}; metrics in %.\n\n")
    payload = {"datasets": {n: str(p) for n, (p, _) in datasets.items()},
               "store": redact(args.store) if args.store else None, "ann": args.ann,
               "formats": {n: f for n, (_, f) in datasets.items()}, "precision": args.precision,
               "local_mix": args.local_mix, "model": args.model or "default",
               "distance": distance_setup(model) if any(f == "context-bench" for _, f in datasets.values()) else None,
               "results": results}
    json_file, md_file = write_results(args.out, payload, header + table)
    print(header + table)
    print(f"\nwrote {json_file} and {md_file}")
    if args.figure != "none":
        write_figure(args, payload, header + table)
    return 0


def write_figure(args: argparse.Namespace, payload: dict, markdown: str) -> None:
    """The figure of the context-bench results, or one line saying why there is none."""
    from contextembed.evaluation import figure

    data = figure.figure_data(payload["results"])
    if not data:
        print("no figure: only context-bench results are drawn", file=sys.stderr)
        return
    if not figure.figure_available():
        print(f"no figure: matplotlib is not installed; to get one: {figure.INSTALL_HINT}", file=sys.stderr)
        return
    formats = figure.FIGURE_FORMATS if args.figure == "both" else (args.figure,)
    notes = markdown
    if payload["distance"]:
        notes += (f"\n\nDistance: {payload['distance']['unit']}; max_seq_length "
                  f"{payload['distance']['max_seq_length']}, window_head_tokens "
                  f"{payload['distance']['window_head_tokens']}.")
    written = figure.write_figure(args.out, data, formats, title=markdown.split("\n", 1)[0], notes=notes)
    print(f"wrote {' and '.join(str(path) for path in written)}")
