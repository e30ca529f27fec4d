"""The `contextembed` command: search, encode, build and evaluate.

    contextembed search PATH "query"      embed a folder of .txt/.md files (or an index) and show the best hits
    contextembed encode PATH OUTPUT_DIR   write a corpus's chunk vectors and metadata for later searches
    contextembed build BACKBONE_DIR OUTPUT_DIR   wrap a Hugging Face backbone as a contextembed checkpoint
    contextembed evaluate [DATA]          score a model (default: the shipped contextual evaluation set)
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from contextembed.chunking import CHUNKERS, TokenWindows
from contextembed.quantization import PRECISIONS

logger = logging.getLogger("contextembed")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    _quiet_transformers()
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, ImportError) as error:
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
                                             "chunk index, character offsets, text) and index.json (metadata).")
    encode.add_argument("path", help="a .txt/.md file or a folder of them")
    encode.add_argument("output_dir", help="folder to write the index to")
    _model_options(encode)
    _chunk_options(encode)
    encode.add_argument("--precision", choices=PRECISIONS, default="float32", help="vector precision to store")
    encode.set_defaults(func=_encode)

    build = commands.add_parser("build", help="wrap a local Hugging Face backbone as a contextembed checkpoint",
                                description="Adds <|chunk_sep|>, an optional projection, and writes a folder that "
                                            "transformers and sentence-transformers load with "
                                            "trust_remote_code=False (after 'import contextembed').")
    build.add_argument("backbone_dir", help="local folder with the backbone's weights and tokenizer")
    build.add_argument("output_dir", help="folder to write the checkpoint to")
    build.add_argument("--embedding-dim", type=int, help="projection size (default: none, keep the hidden size)")
    build.add_argument("--matryoshka-dims", type=int, nargs="+", help="dimensions the vectors may be cut to")
    build.add_argument("--max-length", type=int, dest="max_seq_length",
                       help="tokens per forward pass (default: the backbone's position limit)")
    build.add_argument("--preset", choices=["reference"],
                       help="reference: 2048-d projection, Matryoshka 1024/2048, 32,768 tokens, int8")
    build.add_argument("--query-prefix", default="", help="text put before every query")
    build.add_argument("--document-prefix", default="", help="text put before every document")
    build.add_argument("--window-head-tokens", type=int, default=0,
                       help="opening tokens of a long document carried into every later window")
    build.set_defaults(func=_build)

    from contextembed.evaluation.cli import add_evaluate_command

    add_evaluate_command(commands)
    return parser


def _model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="checkpoint folder or Hub id (default: the packaged MiniLM default model)")
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")
    parser.add_argument("--batch-size", type=int, default=32, help="documents per forward pass (default 32)")
    parser.add_argument("--dim", type=int, help="Matryoshka dimension (default: the full size)")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")


def _chunk_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--chunker", choices=CHUNKERS, default="sentences", help="how to split documents "
                        "(default sentences)")
    parser.add_argument("--chunk-tokens", type=int, default=128, help="window size for --chunker tokens")
    parser.add_argument("--chunk-overlap", type=int, default=0, help="overlap for --chunker tokens")


def _load(args):
    import contextembed

    return contextembed.load(args.model, device=args.device)


def _chunker(args):
    return TokenWindows(args.chunk_tokens, args.chunk_overlap) if args.chunker == "tokens" else args.chunker


def _embed_corpus(model, args):
    from contextembed.corpus import read_corpus

    root, documents = read_corpus(args.path)
    results = model.encode_documents([d.text for d in documents], chunker=_chunker(args), batch_size=args.batch_size,
                                     dim=args.dim, show_progress_bar=None if not args.no_progress else False)
    return root, documents, results


def _chunk_records(documents, results) -> list[dict]:
    """One record per chunk, in row order: the `chunks.jsonl` schema."""
    return [{"doc": i, "path": d.path, "chunk": j, "start": c.start, "end": c.end, "text": c.text}
            for i, (d, r) in enumerate(zip(documents, results)) for j, c in enumerate(r.chunks)]


def _encode(args) -> int:
    from contextembed.corpus import write_index
    from contextembed.quantization import quantize

    model = _load(args)
    root, documents, results = _embed_corpus(model, args)
    rows, chunks = [r.embeddings for r in results], _chunk_records(documents, results)
    embeddings = quantize(np.concatenate(rows), args.precision, model.config.int8_clip_sigmas)
    meta = {"model": args.model or "default", "dim": int(rows[0].shape[1]), "precision": args.precision,
            "int8_clip_sigmas": model.config.int8_clip_sigmas, "chunker": str(_chunker(args)),
            "num_documents": len(documents), "root": str(Path(root).resolve()),
            "documents": [d.path for d in documents]}
    out = write_index(args.output_dir, embeddings, chunks, meta)
    print(f"wrote {len(chunks)} chunk vectors of {len(documents)} documents ({args.precision}, "
          f"{meta['dim']}-d) to {out}")
    return 0


def _search(args) -> int:
    from contextembed.corpus import is_index, read_index
    from contextembed.quantization import quantize
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
        model = _load(argparse.Namespace(**{**vars(args), "model": args.model or _index_model(index)}))
        texts = {d: (Path(index.meta["root"]) / d).read_text(encoding="utf-8") for d in index.meta["documents"]}
        vectors, chunk_records, precision = index.embeddings, index.chunks, index.meta["precision"]
        if precision in ("binary", "ubinary", "uint8"):
            raise ValueError(f"search scores float32 or int8 indexes, this one is {precision}")
        dim = index.meta["dim"]
    else:
        model = _load(args)
        _, documents, results = _embed_corpus(model, args)
        texts = {d.path: d.text for d in documents}
        vectors = np.concatenate([r.embeddings for r in results])
        chunk_records = _chunk_records(documents, results)
        precision, dim = "float32", args.dim
    query = model.encode_queries([args.query], dim=dim, show_progress_bar=False)
    if precision == "int8":
        query = quantize(query, "int8", model.config.int8_clip_sigmas)
    doc_ids = np.array([c["doc"] for c in chunk_records])
    result = exact_search(query, vectors, doc_ids, top_k_documents=args.top_k, top_k_chunks=len(vectors),
                          block_size=65536)
    scale = model.config.int8_clip_sigmas if precision == "int8" else None

    print(f'Query: "{args.query}"')
    print(f"{len(texts)} documents, {len(chunk_records)} chunks, each embedded with its whole document in view\n")
    chunk_rank = {int(row): rank for rank, row in enumerate(result.chunk_rows[0])}
    for rank, (doc, score) in enumerate(zip(result.doc_ids[0], result.doc_scores[0]), 1):
        rows = sorted((r for r in range(len(chunk_records)) if chunk_records[r]["doc"] == doc),
                      key=lambda r: chunk_rank[r])[: args.chunks_per_doc]
        path = chunk_records[rows[0]]["path"]
        print(f"{rank}. {path}  (score {_show_score(score, scale, dim or model.dim)})")
        for row in rows:
            record = chunk_records[row]
            print(f"   chunk {record['chunk']} [chars {record['start']}-{record['end']}] score "
                  f"{_show_score(result.chunk_scores[0][chunk_rank[row]], scale, dim or model.dim)}")
            print(f"      {snippet(texts[path], record['start'], record['end'], args.context)}")
        print()

    if args.compare:
        _compare(model, args, query, vectors, chunk_records)
    return 0


def _compare(model, args, query, vectors, chunk_records) -> None:
    """Rank the chunks with and without their documents' context, side by side."""
    alone = model.encode_documents([c["text"] for c in chunk_records], dim=args.dim, batch_size=args.batch_size,
                                   show_progress_bar=False)
    n = min(8, len(chunk_records))
    print(f"Top {n} chunks in the whole corpus:")
    for title, scores in (("with their document (late chunking)", query[0] @ vectors.T),
                          ("each chunk encoded alone", query[0] @ np.concatenate(alone).T)):
        print(f"  {title}:")
        for row in np.lexsort((np.arange(len(scores)), -scores))[:n]:
            record = chunk_records[row]
            tied = int(np.sum(np.abs(scores - scores[row]) <= 1e-6)) - 1
            note = f"  (tied with {tied} other chunks)" if tied else ""
            print(f"    {scores[row]:.4f}  {record['path']:<28} {_one_line(record['text'])[:60]}{note}")
    print("\nIdentical sentences in different documents get identical vectors when encoded alone; with late "
          "chunking each carries what its own document says around it.")


def _show_score(score, scale, dim) -> str:
    if scale is None:
        return f"{float(score):.4f}"
    from contextembed.quantization import int8_scale

    return f"{float(score) / int8_scale(dim, scale) ** 2:.4f} (int8 {int(score)})"


def _index_model(index) -> str | None:
    model = index.meta.get("model")
    return None if model in (None, "default") else model


def snippet(text: str, start: int, end: int, context: int) -> str:
    """The chunk in «» with up to `context` characters on each side, on one line.

    >>> snippet("Alpha beta. Gamma delta. Epsilon.", 12, 24, 6)
    '…beta. «Gamma delta.» Epsil…'
    """
    before, after = text[max(0, start - context) : start], text[end : end + context]
    return (("…" if start > context else "") + _one_line(before, keep_edges=True) + "«" + _one_line(text[start:end])
            + "»" + _one_line(after, keep_edges=True) + ("…" if end + context < len(text) else ""))


def _one_line(text: str, keep_edges: bool = False) -> str:
    collapsed = " ".join(text.split())
    if keep_edges and text[:1].isspace():
        collapsed = " " + collapsed
    if keep_edges and text[-1:].isspace() and collapsed.strip():
        collapsed += " "
    return collapsed


def _build(args) -> int:
    from contextembed.build import build_checkpoint

    build_checkpoint(args.backbone_dir, args.output_dir, embedding_dim=args.embedding_dim,
                     matryoshka_dims=args.matryoshka_dims, max_seq_length=args.max_seq_length, preset=args.preset,
                     query_prefix=args.query_prefix, document_prefix=args.document_prefix,
                     window_head_tokens=args.window_head_tokens)
    print(f"wrote a contextembed checkpoint to {args.output_dir}")
    return 0


def _quiet_transformers() -> None:
    # The command owns the process: its output is the result, not weight-loading progress bars.
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


if __name__ == "__main__":
    raise SystemExit(main())
