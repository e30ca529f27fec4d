"""`contextembed build`, `export` and `convert`: making and exporting checkpoints."""

from __future__ import annotations

import argparse

from contextembed.choices import EXPORT_FORMATS, QUANTIZATIONS
from contextembed.cli.options import non_negative_int, positive_int


def add_commands(commands) -> None:
    build = commands.add_parser("build", help="wrap a local Hugging Face backbone as a contextembed checkpoint",
                                description="Adds <|chunk_sep|>, an optional projection, and writes a folder that "
                                            "transformers and sentence-transformers load with "
                                            "trust_remote_code=False (after 'import contextembed').")
    build.add_argument("backbone_dir", help="local folder with the backbone's weights and tokenizer")
    build.add_argument("output_dir", help="folder to write the checkpoint to (new or empty; or a checkpoint, with "
                                          "--overwrite)")
    build.add_argument("--projection-dim", type=positive_int, help="projection size (default: none, keep the hidden "
                       "size)")
    build.add_argument("--matryoshka-dims", type=positive_int, nargs="+", help="dimensions the vectors may be cut to")
    build.add_argument("--max-seq-length", type=positive_int,
                       help="tokens per forward pass (default: the backbone's position limit)")
    build.add_argument("--preset", choices=["reference"],
                       help="reference: 2048-d projection, Matryoshka 1024/2048, 32,768 tokens, int8")
    build.add_argument("--query-prefix", default="", help="text put before every query")
    build.add_argument("--document-prefix", default="", help="text put before every document")
    build.add_argument("--window-head-tokens", type=non_negative_int, default=0,
                       help="opening tokens of a long document carried into every later window")
    build.add_argument("--base-model", help="Hub id of the backbone, for the card's metadata (base_model)")
    build.add_argument("--license", help="the checkpoint's licence, for the card's metadata (e.g. apache-2.0)")
    build.add_argument("--language", nargs="+", help="language codes, for the card's metadata (e.g. en)")
    build.add_argument("--overwrite", action="store_true", help="replace a checkpoint already in OUTPUT_DIR")
    build.set_defaults(func=build_command)

    export = commands.add_parser("export", help="export a checkpoint's core to ONNX or OpenVINO",
                                 description="Writes onnx/model.onnx (--quantize int8: also onnx/model_qint8.onnx) "
                                             "or openvino/openvino_model.xml into the checkpoint folder, after "
                                             "checking it against torch on batch shapes it was not traced with. "
                                             "Load it with contextembed.load(CHECKPOINT, backend='onnx') or "
                                             "--backend onnx. Needs pip install 'contextembed[onnx]' (or "
                                             "[openvino]).")
    export.add_argument("checkpoint", help="local checkpoint folder")
    export.add_argument("--format", choices=EXPORT_FORMATS, default="onnx", help="onnx (default) or openvino")
    export.add_argument("--quantize", choices=QUANTIZATIONS,
                        help="int8: also write dynamically quantised int8 weights (ONNX only)")
    export.set_defaults(func=export_command)

    convert = commands.add_parser("convert", help="convert a pplx-embed-context-v1 or pplx-embed-v2-context folder "
                                                  "(no remote code needed)",
                                  description="Reads Perplexity's pplx-embed-context-v1 (0.6B / 4B) or "
                                              "pplx-embed-v2-context (text only) from a local folder (its weights, "
                                              "config and tokenizer; its .py files are never run) and writes a "
                                              "contextembed checkpoint that transformers and sentence-transformers "
                                              "load with trust_remote_code=False.")
    convert.add_argument("source", help="local pplx-embed-context-v1 or pplx-embed-v2-context folder (e.g. a "
                                        "huggingface-cli download)")
    convert.add_argument("output_dir", help="folder to write the checkpoint to (new or empty; or a checkpoint, with "
                                            "--overwrite)")
    convert.add_argument("--source-id", help="the Hub id it came from, for the card (base_model)")
    convert.add_argument("--overwrite", action="store_true", help="replace a checkpoint already in OUTPUT_DIR")
    convert.set_defaults(func=convert_command)


def build_command(args: argparse.Namespace) -> int:
    from contextembed.build import build_checkpoint
    from contextembed.checkpoint import check_checkpoint_target
    from contextembed.model_card import card_metadata

    card_metadata(base_model=args.base_model, license=args.license, language=args.language)  # before any writing
    check_checkpoint_target(args.output_dir, args.overwrite)
    build_checkpoint(args.backbone_dir, args.output_dir, projection_dim=args.projection_dim,
                     matryoshka_dims=args.matryoshka_dims, max_seq_length=args.max_seq_length, preset=args.preset,
                     query_prefix=args.query_prefix, document_prefix=args.document_prefix,
                     window_head_tokens=args.window_head_tokens, overwrite=args.overwrite,
                     card={"base_model": args.base_model, "license": args.license, "language": args.language})
    print(f"wrote a contextembed checkpoint to {args.output_dir}")
    return 0


def export_command(args: argparse.Namespace) -> int:
    from contextembed.backends import export

    written = export(args.checkpoint, args.format, args.quantize)
    print(f"wrote {written} (checked against torch on new batch shapes); load it with "
          f"contextembed.load({args.checkpoint!r}, backend={args.format!r}"
          f"{f', file_name={str(written.relative_to(args.checkpoint))!r}' if args.quantize else ''})")
    return 0


def convert_command(args: argparse.Namespace) -> int:
    from contextembed.convert import convert_pplx, source_converter

    convert = source_converter(args.source) or convert_pplx  # which names what the folder is not
    model, _ = convert(args.source, args.output_dir, source_id=args.source_id, overwrite=args.overwrite)
    config = model.config
    head = ", head tanh" if config.head_activation == "tanh" else ""
    print(f"wrote a contextembed checkpoint to {args.output_dir} (separator {config.chunk_token}{head}, "
          "int8 = round(tanh(x)*127))")
    return 0
