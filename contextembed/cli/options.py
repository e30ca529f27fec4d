"""The options several commands share (model, backend, chunking) and the one way a command loads its model."""

from __future__ import annotations

import argparse

from contextembed.choices import BACKENDS, CHUNKERS, DTYPES


def _count(least: int):
    """An argparse `type` for an integer option of at least `least`, checked by the one count check of the library
    and the server (`check_count`); argparse puts the flag's name in front of the message
    (`argument --top-k: must be a positive integer, got 0`). A valid count needs no import: the check (and the model
    package it lives in) is loaded only to word a refusal."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = text  # not an integer: the check says so, quoting it
        if isinstance(value, int) and value >= least:
            return value
        from contextembed.modeling import check_count

        try:
            return check_count(value, least=least)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    parse.__name__ = "positive_int" if least == 1 else "non_negative_int"
    return parse


def _number(kind: type, ok, expected: str):
    """An argparse `type` that parses `kind` and checks `ok`, for options that are not counts."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {expected}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"must be {expected}, got {value}")
        return value

    parse.__name__ = expected.replace(" ", "_")
    return parse


positive_int = _count(1)
non_negative_int = _count(0)
positive_float = _number(float, lambda v: v > 0, "a positive number")
non_negative_float = _number(float, lambda v: v >= 0 and v != float("inf"), "a non-negative number")
unit_float = _number(float, lambda v: 0 <= v <= 1, "a number in [0, 1]")


def add_model_options(parser: argparse.ArgumentParser, *, output_dim: bool = True) -> None:
    parser.add_argument("--model", help="checkpoint folder or Hub id (default: the packaged default model, "
                        "English only)")
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")
    parser.add_argument("--dtype", choices=DTYPES, help="weights' dtype (default float32; auto: bfloat16 where the "
                        "device computes it natively, else float32)")
    parser.add_argument("--backend", choices=BACKENDS, default="torch",
                        help="torch (default), or a graph written by 'contextembed export' (CPU, float32)")
    parser.add_argument("--backend-file", help="which exported graph to run (e.g. onnx/model_qint8.onnx)")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="documents per forward pass (default 32)")
    if output_dim:
        parser.add_argument("--output-dim", type=positive_int, help="Matryoshka dimension (default: the full size)")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")


def add_chunk_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--chunker", choices=CHUNKERS, default="sentences", help="how to split documents "
                        "(default sentences)")
    parser.add_argument("--chunk-tokens", type=positive_int, default=128, help="window size for --chunker tokens")
    parser.add_argument("--chunk-overlap", type=non_negative_int, default=0, help="overlap for --chunker tokens")


def load_model(args: argparse.Namespace, model: str | None = None, **extra):
    """The model `args` names (or `model`), on its device, dtype and backend: the one loader of every command.
    `extra`: more loading options (`num_threads` for a backend)."""
    import contextembed

    kwargs = {"device": args.device, "dtype": args.dtype}
    if args.backend != "torch" or args.backend_file is not None:
        kwargs = {"backend": args.backend, "file_name": args.backend_file,
                  **{k: v for k, v in kwargs.items() if v not in (None, "cpu")}}
    kwargs.update(extra)
    return contextembed.load(model or args.model, **kwargs)


def chunker(args: argparse.Namespace):
    """The chunker `add_chunk_options` describes: a name, or a `TokenChunks`."""
    from contextembed.chunking import TokenChunks

    if args.chunker != "tokens":
        return args.chunker
    if args.chunk_overlap >= args.chunk_tokens:
        raise ValueError(f"--chunk-overlap ({args.chunk_overlap}) must be smaller than --chunk-tokens "
                         f"({args.chunk_tokens})")
    return TokenChunks(args.chunk_tokens, args.chunk_overlap)


def progress(args: argparse.Namespace) -> bool | None:
    return False if args.no_progress else None
