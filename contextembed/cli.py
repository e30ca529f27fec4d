"""The `contextembed` command: search, encode, build and evaluate.

    contextembed search PATH "query"      embed a folder of .txt/.md files (or an index) and show the best hits
    contextembed encode PATH OUTPUT_DIR   write a corpus's chunk vectors and metadata for later searches
    contextembed build BACKBONE_DIR OUTPUT_DIR   wrap a Hugging Face backbone as a contextembed checkpoint
    contextembed evaluate [DATA]          score a model (default: the shipped contextual evaluation set)
    contextembed export CHECKPOINT        write the model's core as ONNX or OpenVINO into the checkpoint
    contextembed convert SRC_DIR OUT_DIR  Perplexity's pplx-embed-context-v1 as a checkpoint that needs no remote code
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from contextembed.chunking import CHUNKERS, TokenWindows
from contextembed.backends.runtime import BACKENDS
from contextembed.backends.export import FORMATS, QUANTIZATIONS
from contextembed.encoder import DTYPES
from contextembed.quantization import PRECISIONS

logger = logging.getLogger("contextembed")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    _quiet_transformers()
    try:
        return args.func(args)
    except (ValueError, OSError, ImportError, RuntimeError) as error:
        print(f"contextembed {args.command}: error: {error}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="contextembed", description="Contextual chunk embeddings (late chunking).")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the library does")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    search = commands.add_parser("search", help="search a folder of .txt/.md documents (or an encoded index)",
                                 description="Embed every chunk of every document with its whole document in "
                                             "view, then rank documents by their best chunk for the query.")
    search.add_argument("path", help="a .txt/.md file, a folder of them, or an index written by 'encode'")
    search.add_argument("query", help="the question to search for")
    _model_options(search)
    _chunk_options(search)
    search.add_argument("--top-k", type=int, default=3, help="documents to show (default 3)")
    search.add_argument("--chunks-per-doc", type=int, default=2, help="best chunks to show per document (default 2)")
    search.add_argument("--context", type=int, default=80, help="characters of context around a chunk (default 80)")
    search.add_argument("--compare", action="store_true",
                        help="also rank the chunks encoded one by one, without their document (the usual RAG "
                             "pipeline), to see what context changes")
    search.set_defaults(func=_search)

    encode = commands.add_parser("encode", help="write a corpus's chunk vectors and metadata to a folder",
                                 description="Writes embeddings.npy (one row per chunk), chunks.jsonl (document, "
                                             "chunk index, character offsets, text) and index.json (metadata): a "
                                             "self-contained index that 'search' reads without the source files.")
    encode.add_argument("path", help="a .txt/.md file or a folder of them")
    encode.add_argument("output_dir", help="folder to write the index to (new or empty; or an index, with --overwrite)")
    _model_options(encode)
    _chunk_options(encode)
    encode.add_argument("--precision", choices=PRECISIONS, default="float32", help="vector precision to store")
    encode.add_argument("--overwrite", action="store_true", help="replace an index already in OUTPUT_DIR")
    encode.add_argument("--ray-actors", type=int, metavar="N",
                        help="embed on Ray Data with N actors and write Parquet (one row per chunk: doc_id, "
                             "chunk_index, start, end, text, embedding) instead of an index; needs "
                             "pip install 'contextembed[ray]'")
    encode.add_argument("--ray-address", help="Ray cluster to join (default: start a local Ray)")
    encode.set_defaults(func=_encode)

    build = commands.add_parser("build", help="wrap a local Hugging Face backbone as a contextembed checkpoint",
                                description="Adds <|chunk_sep|>, an optional projection, and writes a folder that "
                                            "transformers and sentence-transformers load with "
                                            "trust_remote_code=False (after 'import contextembed').")
    build.add_argument("backbone_dir", help="local folder with the backbone's weights and tokenizer")
    build.add_argument("output_dir", help="folder to write the checkpoint to")
    build.add_argument("--embedding-dim", type=int, help="projection size (default: none, keep the hidden size)")
    build.add_argument("--matryoshka-dims", type=int, nargs="+", help="dimensions the vectors may be cut to")
    build.add_argument("--max-seq-length", type=int,
                       help="tokens per forward pass (default: the backbone's position limit)")
    build.add_argument("--preset", choices=["reference"],
                       help="reference: 2048-d projection, Matryoshka 1024/2048, 32,768 tokens, int8")
    build.add_argument("--query-prefix", default="", help="text put before every query")
    build.add_argument("--document-prefix", default="", help="text put before every document")
    build.add_argument("--window-head-tokens", type=int, default=0,
                       help="opening tokens of a long document carried into every later window")
    build.add_argument("--base-model", help="Hub id of the backbone, for the card's metadata (base_model)")
    build.add_argument("--license", help="the checkpoint's licence, for the card's metadata (e.g. apache-2.0)")
    build.add_argument("--language", nargs="+", help="language codes, for the card's metadata (e.g. en)")
    build.set_defaults(func=_build)

    export = commands.add_parser("export", help="export a checkpoint's core to ONNX or OpenVINO",
                                 description="Writes onnx/model.onnx (--quantize int8: also onnx/model_qint8.onnx) "
                                             "or openvino/openvino_model.xml into the checkpoint folder, after "
                                             "checking it against torch on batch shapes it was not traced with. "
                                             "Load it with contextembed.load(CHECKPOINT, backend='onnx') or "
                                             "--backend onnx. Needs pip install 'contextembed[onnx]' (or "
                                             "[openvino]).")
    export.add_argument("checkpoint", help="local checkpoint folder")
    export.add_argument("--format", choices=FORMATS, default="onnx", help="onnx (default) or openvino")
    export.add_argument("--quantize", choices=QUANTIZATIONS,
                        help="int8: also write dynamically quantised int8 weights (ONNX only)")
    export.set_defaults(func=_export)

    convert = commands.add_parser("convert", help="convert a pplx-embed-context-v1 folder (no remote code needed)",
                                  description="Reads Perplexity's pplx-embed-context-v1 (0.6B / 4B) from a local "
                                              "folder (its Qwen3 weights, config and tokenizer; its .py files are "
                                              "never run) and writes a contextembed checkpoint that transformers "
                                              "and sentence-transformers load with trust_remote_code=False.")
    convert.add_argument("source", help="local pplx-embed-context-v1 folder (e.g. a huggingface-cli download)")
    convert.add_argument("output_dir", help="folder to write the checkpoint to")
    convert.add_argument("--source-id", help="the Hub id it came from, for the card (base_model)")
    convert.set_defaults(func=_convert)

    from contextembed.evaluation.cli import add_evaluate_command

    add_evaluate_command(commands)

    train = commands.add_parser("train", help="fine-tune a checkpoint for contextual retrieval (SPEC §2 recipe)",
                                description="LoRA + separator row, L_doc + L_dist, a chunking drawn per batch, "
                                            "Matryoshka, int8 QAT at the end and a soup of the last checkpoints. "
                                            "Writes OUTPUT_DIR/checkpoint (a full checkpoint), "
                                            "OUTPUT_DIR/delta.safetensors, train_log.jsonl and train_config.json. "
                                            "Needs pip install 'contextembed[train]'.")
    train.add_argument("checkpoint", help="contextembed checkpoint folder or Hub id to start from")
    train.add_argument("data", help="training documents (JSON lines, see contextembed.training.data)")
    train.add_argument("output_dir", help="folder for checkpoints, logs and the result")
    train.add_argument("--config", help="JSON file of TrainConfig fields (seed, max_steps, weights, ...)")
    train.add_argument("--max-steps", type=int, help="optimizer steps (overrides the config)")
    train.add_argument("--max-minutes", type=float, help="stop after this many minutes (a hard stop)")
    train.add_argument("--seed", type=int, help="random seed (overrides the config)")
    train.add_argument("--resume", action="store_true", help="continue from the last checkpoint in OUTPUT_DIR")
    train.set_defaults(func=_train)
    return parser


def _model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="checkpoint folder or Hub id (default: the packaged MiniLM default model)")
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")
    parser.add_argument("--dtype", choices=DTYPES, help="weights' dtype (default float32; auto: bfloat16 where the "
                        "device computes it natively, else float32)")
    add_backend_options(parser)
    parser.add_argument("--batch-size", type=int, default=32, help="documents per forward pass (default 32)")
    parser.add_argument("--output-dim", type=int, help="Matryoshka dimension (default: the full size)")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")


def add_backend_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=BACKENDS, default="torch",
                        help="torch (default), or a graph written by 'contextembed export' (CPU, float32)")
    parser.add_argument("--backend-file", help="which exported graph to run (e.g. onnx/model_qint8.onnx)")


def load_model(args, model=None):
    """The model an `args` namespace of `_model_options` names, on its device, dtype and backend."""
    import contextembed

    kwargs = {"device": args.device, "dtype": args.dtype}
    if args.backend != "torch" or args.backend_file is not None:
        kwargs = {"backend": args.backend, "file_name": args.backend_file,
                  **{k: v for k, v in kwargs.items() if v not in (None, "cpu")}}
    return contextembed.load(model or args.model, **kwargs)


def _chunk_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--chunker", choices=CHUNKERS, default="sentences", help="how to split documents "
                        "(default sentences)")
    parser.add_argument("--chunk-tokens", type=int, default=128, help="window size for --chunker tokens")
    parser.add_argument("--chunk-overlap", type=int, default=0, help="overlap for --chunker tokens")


def _load(args, model=None):
    return load_model(args, model)


def _chunker(args):
    return TokenWindows(args.chunk_tokens, args.chunk_overlap) if args.chunker == "tokens" else args.chunker


def _embed(model, args, precision: str = "float32"):
    from contextembed.corpus import embed_corpus, read_corpus

    _, documents = read_corpus(args.path)
    vectors, records = embed_corpus(model, documents, _chunker(args), batch_size=args.batch_size,
                                    output_dim=args.output_dim, precision=precision,
                                    show_progress_bar=False if args.no_progress else None)
    return documents, vectors, records


def _encode(args) -> int:
    from contextembed.index import check_index_target, write_index

    if args.ray_actors is not None or args.ray_address is not None:
        return _encode_on_ray(args)
    check_index_target(args.output_dir, args.overwrite)  # before the embedding, not after
    model = _load(args)
    documents, vectors, records = _embed(model, args, args.precision)
    meta = {"model": args.model or "default", "output_dim": args.output_dim or model.output_dim,
            "precision": args.precision, "int8_clip_sigmas": model.config.int8_clip_sigmas,
            "int8_scheme": model.config.int8_scheme,
            "chunker": str(_chunker(args)), "num_documents": len(documents), "documents": [d.path for d in documents]}
    out = write_index(args.output_dir, vectors, records, meta, overwrite=args.overwrite)
    print(f"wrote {len(records)} chunk vectors of {len(documents)} documents ({args.precision}, "
          f"{meta['output_dim']}-d) to {out}")
    return 0


def _encode_on_ray(args) -> int:
    from contextembed.corpus import read_corpus

    actors = 2 if args.ray_actors is None else args.ray_actors
    if actors <= 0:
        raise ValueError(f"--ray-actors must be a positive integer, got {actors}")
    if args.precision != "float32":
        raise ValueError("--ray-actors writes float32 vectors to Parquet; --precision applies to indexes only")
    out = Path(args.output_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"{args.output_dir} exists and is not an empty folder: the Parquet files need a new one")
    _, documents = read_corpus(args.path)
    import ray

    from contextembed.integrations.ray import embed_dataset

    started = not ray.is_initialized()  # a caller's Ray session is used as it is, and left running
    if started:
        ray.init(address=args.ray_address, include_dashboard=False, log_to_driver=False)
    try:
        dataset = ray.data.from_items([{"id": d.path, "text": d.text} for d in documents])
        chunks = embed_dataset(dataset, args.model or "", chunker=_chunker(args), output_dim=args.output_dim,
                               num_actors=actors, batch_size=max(1, min(args.batch_size, len(documents) // actors)),
                               num_gpus=1 if args.device.startswith("cuda") else 0, dtype=args.dtype)
        chunks.write_parquet(str(out))
        rows = ray.data.read_parquet(str(out)).count()
    finally:
        if started:
            ray.shutdown()
    print(f"wrote {rows} chunk rows of {len(documents)} documents to Parquet files in {out} ({actors} Ray actors)")
    return 0


def _search(args) -> int:
    from contextembed.display import show_comparison, show_results
    from contextembed.index import is_index, read_index
    from contextembed.search import exact_search

    if not args.query.strip():
        raise ValueError("the query is empty")
    for name in ("top_k", "chunks_per_doc"):
        if getattr(args, name) <= 0:
            raise ValueError(f"--{name.replace('_', '-')} must be a positive integer, got {getattr(args, name)}")
    if is_index(args.path):
        if args.compare:
            raise ValueError("--compare re-embeds the chunks, so it needs the documents: pass the corpus folder")
        index = read_index(args.path)
        if args.output_dim is not None and args.output_dim != index.meta["output_dim"]:
            raise ValueError(f"the index holds {index.meta['output_dim']}-d vectors, got --output-dim "
                             f"{args.output_dim}")
        model = _load(args, args.model or _index_model(index))
        vectors, records = index.embeddings, index.chunks
        precision, output_dim = index.meta["precision"], index.meta["output_dim"]
    else:
        model = _load(args)
        _, vectors, records = _embed(model, args)
        precision, output_dim = "float32", args.output_dim or model.output_dim
    query = model.encode_queries([args.query], output_dim=output_dim, precision=precision, show_progress_bar=False)
    doc_ids = np.array([r["doc"] for r in records])
    result = exact_search(query, vectors, doc_ids, top_k_documents=args.top_k, top_k_chunks=len(vectors),
                          block_size=65536, precision=precision)
    show_results(args.query, result, records, chunks_per_doc=args.chunks_per_doc, context=args.context,
                 precision=precision, output_dim=output_dim,
                 int8_clip_sigmas=None if model.config.int8_scheme == "tanh" else model.config.int8_clip_sigmas)
    if args.compare:
        show_comparison(model, query, vectors, records, output_dim=args.output_dim, batch_size=args.batch_size)
    return 0


def _index_model(index) -> str | None:
    model = index.meta.get("model")
    return None if model in (None, "default") else model


def _build(args) -> int:
    from contextembed.build import build_checkpoint
    from contextembed.model_card import card_metadata

    card_metadata(base_model=args.base_model, license=args.license, language=args.language)  # before any writing

    build_checkpoint(args.backbone_dir, args.output_dir, embedding_dim=args.embedding_dim,
                     matryoshka_dims=args.matryoshka_dims, max_seq_length=args.max_seq_length, preset=args.preset,
                     query_prefix=args.query_prefix, document_prefix=args.document_prefix,
                     window_head_tokens=args.window_head_tokens,
                     card={"base_model": args.base_model, "license": args.license, "language": args.language})
    print(f"wrote a contextembed checkpoint to {args.output_dir}")
    return 0


def _export(args) -> int:
    from contextembed.backends import export

    written = export(args.checkpoint, args.format, args.quantize)
    print(f"wrote {written} (checked against torch on new batch shapes); load it with "
          f"contextembed.load({args.checkpoint!r}, backend={args.format!r}"
          f"{f', file_name={str(written.relative_to(args.checkpoint))!r}' if args.quantize else ''})")
    return 0


def _convert(args) -> int:
    from contextembed.convert import convert_pplx

    convert_pplx(args.source, args.output_dir, source_id=args.source_id)
    print(f"wrote a contextembed checkpoint to {args.output_dir} (separator <|endoftext|>, int8 = round(tanh(x)*127))")
    return 0


def _train(args) -> int:
    from contextembed.hub import resolve_checkpoint
    from contextembed.training import TrainConfig, train

    config = TrainConfig.from_file(args.config, max_steps=args.max_steps, max_minutes=args.max_minutes,
                                   seed=args.seed)
    out = train(resolve_checkpoint(args.checkpoint), args.data, args.output_dir, config, resume=args.resume)
    print(f"wrote the trained checkpoint to {out} and its delta to {Path(args.output_dir) / 'delta.safetensors'}")
    return 0


def _quiet_transformers() -> None:
    # The command owns the process: its output is the result, not weight-loading progress bars.
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


if __name__ == "__main__":
    raise SystemExit(main())
