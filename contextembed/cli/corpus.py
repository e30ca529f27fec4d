"""`contextembed search` and `contextembed encode`: a corpus of .txt/.md files, embedded, searched or written."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from contextembed.cli import options
from contextembed.cli.choices import PRECISIONS


def add_commands(commands) -> None:
    search = commands.add_parser("search", help="search a folder of .txt/.md documents (or an encoded index)",
                                 description="Embed every chunk of every document with its whole document in "
                                             "view, then rank documents by their best chunk for the query. The "
                                             "default model is English only.")
    search.add_argument("path", help="a .txt/.md file, a folder of them, an index written by 'encode', or a store "
                                     "URI (lancedb://, qdrant://, pgserver://, postgresql://)")
    search.add_argument("query", help="the question to search for")
    options.add_model_options(search)
    options.add_chunk_options(search)
    search.add_argument("--top-k", type=options.positive_int, default=3, help="documents to show (default 3)")
    search.add_argument("--chunks-per-doc", type=options.positive_int, default=2,
                        help="best chunks to show per document (default 2)")
    search.add_argument("--context", type=options.non_negative_int, default=80,
                        help="characters of context around a chunk (default 80)")
    search.add_argument("--evidence", type=options.non_negative_int, default=0, metavar="N",
                        help="with each document's answer (its best chunk), its N next-best chunks, the evidence that "
                             "makes the answer verifiable, and a reader view of them in document order (a document "
                             "with fewer chunks gives all it has; default 0: the answer alone, as --chunks-per-doc "
                             "shows it)")
    search.add_argument("--json", action="store_true",
                        help='print one JSON object instead of text: {"query", "precision", "documents": [{"document", '
                             '"score", "chunk": {"index", "start", "end", "text"}}, ...]}, ranked; with --evidence, '
                             'each document also has "evidence": [{"index", "score", "start", "end", "text"}, ...] '
                             'and "reader_view"')
    search.add_argument("--compare", action="store_true",
                        help="also rank the chunks encoded one by one, without their document (the usual RAG "
                             "pipeline), to see what context changes")
    search.set_defaults(func=search_command)

    encode = commands.add_parser("encode", help="write a corpus's chunk vectors and metadata to a folder",
                                 description="Writes embeddings.npy (one row per chunk), chunks.jsonl (document, "
                                             "chunk index, character offsets, text) and index.json (metadata): a "
                                             "self-contained index that 'search' reads without the source files.")
    encode.add_argument("path", help="a .txt/.md file or a folder of them")
    encode.add_argument("output_dir", help="folder to write the index to (new or empty; or an index, with --overwrite), "
                                           "or a store URI (lancedb:///PATH, qdrant:///PATH, qdrant://HOST:PORT, "
                                           "pgserver:///PATH, postgresql://...): written incrementally, only the "
                                           "documents that changed")
    options.add_model_options(encode)
    options.add_chunk_options(encode)
    encode.add_argument("--precision", choices=PRECISIONS, default="float32", help="vector precision to store")
    encode.add_argument("--overwrite", action="store_true", help="replace an index already in OUTPUT_DIR")
    encode.add_argument("--ray-actors", type=options.positive_int, metavar="N",
                        help="embed on Ray Data with N actors and write Parquet (one row per chunk: doc_id, "
                             "chunk_index, start, end, text, embedding) instead of an index; needs "
                             "pip install 'contextembed[ray]'")
    encode.add_argument("--ray-address", help="Ray cluster to join (default: start a local Ray)")
    encode.set_defaults(func=encode_command)


def encode_command(args: argparse.Namespace) -> int:
    from contextembed.corpus import read_corpus
    from contextembed.index import check_index_target
    from contextembed.stores import StoreInfo, is_store_uri, open_store
    from contextembed.stores.sync import sync_corpus

    if args.ray_actors is not None or args.ray_address is not None:
        return _encode_on_ray(args)
    folder = not is_store_uri(args.output_dir)  # a folder index; a URI (file:// included) is updated in place
    if args.overwrite and not folder:
        raise ValueError("--overwrite replaces an index folder; a store is updated in place (only changed documents "
                         "are written): leave it out")
    chunker = options.chunker(args)
    if folder:
        check_index_target(args.output_dir, args.overwrite)  # before the embedding, not after
    _, documents = read_corpus(args.path)
    with open_store(args.output_dir, overwrite=args.overwrite) as store:
        model = options.load_model(args)
        info = StoreInfo(args.model or "default", args.output_dim or model.output_dim, args.precision, str(chunker))
        store.ensure(info)  # a store of other vectors is refused before anything is embedded
        encode = lambda texts: model.encode_documents(  # noqa: E731
            texts, chunker=chunker, batch_size=args.batch_size, output_dim=args.output_dim, precision=args.precision,
            show_progress_bar=options.progress(args))
        report = sync_corpus(store, documents, info, encode)
        print(f"{store.uri}: {report}")
    return 0


def search_command(args: argparse.Namespace) -> int:
    from contextembed.display import results_json, show_comparison, show_results
    from contextembed.index import document_text
    from contextembed.quantization import codes_raw_vectors
    from contextembed.search import search

    if not args.query.strip():
        raise ValueError("the query is empty")
    if args.json and args.compare:
        raise ValueError("--json prints the ranked documents only: leave out --compare")
    store, model = _searched_store(args)
    with store:
        info = store.info
        query = model.encode_queries([args.query], output_dim=info.output_dim, precision=info.precision,
                                     show_progress_bar=False)
        if args.json:  # ASCII: safe anywhere
            hits = search(store, query[0], args.top_k, evidence=args.evidence)
            print(json.dumps(results_json(args.query, hits, precision=info.precision, evidence=bool(args.evidence))))
            return 0
        # Without --evidence, each document shows its best --chunks-per-doc chunks: its answer and the next ones.
        hits = search(store, query[0], args.top_k, evidence=args.evidence or args.chunks_per_doc - 1)
        texts = {d.id: document_text([{"start": c.start, "end": c.end, "text": c.text} for c in d.chunks])
                 for d in store.fetch_documents([h.document for h in hits])}
        show_results(args.query, hits, texts, header=_header(store), context=args.context, precision=info.precision,
                     output_dim=info.output_dim, evidence=bool(args.evidence),
                     int8_clip_sigmas=None if codes_raw_vectors(model.config.int8_scheme) else model.config.int8_clip_sigmas)
        if args.compare:
            index = store.snapshot()
            show_comparison(model, query, index.embeddings, index.chunks, output_dim=args.output_dim,
                            batch_size=args.batch_size)
    return 0


def _searched_store(args: argparse.Namespace):
    """The store `args.path` names (a store URI or an index folder), or a folder of documents embedded into an index
    in memory; and the model that made (or makes) its vectors."""
    from contextembed.index import is_index, restore_interrupted
    from contextembed.stores import StoreInfo, is_store_uri, open_store
    from contextembed.stores.index import IndexStore
    from contextembed.stores.sync import sync_corpus

    chunker = options.chunker(args)
    if is_store_uri(args.path) or (restore_interrupted(args.path) or is_index(args.path)):
        if args.compare:
            raise ValueError("--compare re-embeds the chunks, so it needs the documents: pass the corpus folder")
        store = open_store(args.path)
        info = store.info
        if args.output_dim is not None and args.output_dim != info.output_dim:
            store.close()
            raise ValueError(f"the {store.noun} holds {info.output_dim}-d vectors, got --output-dim {args.output_dim}")
        return store, options.load_model(args, args.model or (None if info.model == "default" else info.model))
    from contextembed.corpus import read_corpus

    _, documents = read_corpus(args.path)
    model = options.load_model(args)
    store = IndexStore(uri=args.path)
    info = StoreInfo(args.model or "default", args.output_dim or model.output_dim, "float32", str(chunker))
    sync_corpus(store, documents, info, lambda texts: model.encode_documents(
        texts, chunker=chunker, batch_size=args.batch_size, output_dim=args.output_dim,
        show_progress_bar=options.progress(args)))
    return store, model


def _header(store) -> str:
    """The line under the query: how much was searched."""
    from contextembed.stores.index import IndexStore

    from contextembed.display import printable

    if isinstance(store, IndexStore):
        return (f"{len(store.document_hashes())} documents, {store.count_chunks()} chunks, each embedded with its "
                "whole document in view")
    return f"{store.count_chunks()} chunks in {printable(store.uri)}, each embedded with its whole document in view"


def _encode_on_ray(args: argparse.Namespace) -> int:
    from contextembed.corpus import read_corpus

    actors = 2 if args.ray_actors is None else args.ray_actors
    if args.precision != "float32":
        raise ValueError("--ray-actors writes float32 vectors to Parquet; --precision applies to indexes only")
    out = Path(args.output_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"{args.output_dir} exists and is not an empty folder: the Parquet files need a new one")
    chunker = options.chunker(args)
    _, documents = read_corpus(args.path)
    try:
        import ray
    except ImportError as error:
        raise ImportError("--ray-actors needs Ray Data: pip install 'contextembed[ray]'") from error

    from contextembed.integrations.ray import embed_dataset

    started = not ray.is_initialized()  # a caller's Ray session is used as it is, and left running
    if started:
        ray.init(address=args.ray_address, include_dashboard=False, log_to_driver=False)
    try:
        dataset = ray.data.from_items([{"id": d.path, "text": d.text} for d in documents])
        chunks = embed_dataset(dataset, args.model or "", chunker=chunker, output_dim=args.output_dim,
                               num_actors=actors, batch_size=max(1, min(args.batch_size, len(documents) // actors)),
                               num_gpus=1 if args.device.startswith("cuda") else 0, dtype=args.dtype)
        chunks.write_parquet(str(out))
        rows = ray.data.read_parquet(str(out)).count()
    finally:
        if started:
            ray.shutdown()
    print(f"wrote {rows} chunk rows of {len(documents)} documents to Parquet files in {out} ({actors} Ray actors)")
    return 0
