"""The `contextembed` command: search, encode, build, export, convert, evaluate, train and serve.

    contextembed search PATH "query"      embed a folder of .txt/.md files (or an index) and show the best hits
    contextembed encode PATH OUTPUT_DIR   write a corpus's chunk vectors and metadata for later searches
    contextembed build BACKBONE_DIR OUTPUT_DIR   wrap a Hugging Face backbone as a contextembed checkpoint
    contextembed export CHECKPOINT        write the model's core as ONNX or OpenVINO into the checkpoint
    contextembed convert SRC_DIR OUT_DIR  Perplexity's pplx-embed(-v2)-context as a checkpoint needing no remote code
    contextembed evaluate [DATA]          score a model (default: the shipped contextual evaluation sets)
    contextembed train CHECKPOINT DATA OUTPUT_DIR   fine-tune for contextual retrieval
    contextembed serve [MODEL]            the model over HTTP (OpenAI, Perplexity and Voyage embedding APIs)

One module per command group (`corpus`, `checkpoints`, `evaluate`, `train`, `serve`) adds its commands; `options` holds
what they share (model, backend and chunking options, and the one `load_model`). Arguments are parsed before any
command imports what it needs, so `--help` and a mistyped argument cost no model loading. Library modules never
import this package.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from contextembed.cli import checkpoints, corpus, evaluate, serve, train

COMMAND_GROUPS = (corpus, checkpoints, evaluate, train, serve)


def main(argv: Sequence[str] | None = None) -> int:
    from contextembed.quiet import quiet_transformers

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    try:
        # The command owns the process: its output is the result, not weight-loading progress bars.
        with quiet_transformers(progress_bars=False):
            return args.func(args)
    except (ValueError, OSError, ImportError, RuntimeError) as error:
        print(f"contextembed {args.command}: error: {error}", file=sys.stderr)
        return 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="contextembed", description="Contextual chunk embeddings (late chunking). "
                                     "The default model is English only.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the library does")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in COMMAND_GROUPS:
        group.add_commands(commands)
    return parser
