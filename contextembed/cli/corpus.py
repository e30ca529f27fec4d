"""`contextembed search`, `encode` and `compact`: a corpus (a folder of .txt/.md files, JSON lines or Parquet), embedded
and searched, or written into an index or a store as a stream, resumably."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading

from contextembed.cli import options
from contextembed.choices import COMMIT_TOKENS, PRECISIONS
CORPUS_HELP = ("the corpus: a .txt/.md file or a folder of them, a JSON-lines file (.jsonl, .jsonl.gz: one document a "
               "line, 'id' or '_id' and 'text', or its chunks as 'chunks' or 'sentences'; optional 'title' and "
               "'metadata'), or Parquet (a file or a folder of them, the same columns)")


def add_commands(commands) -> None:
    search = commands.add_parser("search", help="search a folder of .txt/.md documents (or an encoded index)",
                                 description="Embed every chunk of every document with its whole document in "
                                             "view, then rank documents by their best chunk for the query. The "
                                             "default model is English only.")
    search.add_argument("path", help="an index written by 'encode', a store URI (lancedb://, qdrant://, pgserver://, "
                                     "postgresql://), or a corpus, embedded in memory first: " + CORPUS_HELP)
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

    encode = commands.add_parser("encode", help="embed a corpus into an index folder or a store, committing as it goes",
                                 description="Reads the corpus as a stream and writes each chunk's vector, text and "
                                             "offsets into a self-contained index that 'search' reads without the "
                                             "source files (or into a store). Commits every batch: Ctrl-C or SIGTERM "
                                             "stops after the batch in flight, and the same command resumes, "
                                             "embedding only the documents not yet committed. Run again on a changed "
                                             "corpus, it embeds only what changed and deletes what is gone.")
    encode.add_argument("path", help=CORPUS_HELP)
    encode.add_argument("output_dir", help="index folder to write (new or empty, or an index to bring in step with the "
                                           "corpus), or a store URI (lancedb:///PATH, qdrant:///PATH, "
                                           "qdrant://HOST:PORT, pgserver:///PATH, postgresql://...)")
    options.add_model_options(encode)
    options.add_chunk_options(encode)
    encode.add_argument("--precision", choices=PRECISIONS, default="float32", help="vector precision to store")
    encode.add_argument("--overwrite", action="store_true",
                        help="re-embed every document and replace the index in OUTPUT_DIR (another model, chunker or "
                             "precision); an interrupted overwrite resumes without --overwrite")
    encode.add_argument("--commit-every", type=options.positive_int, metavar="N",
                        help="documents per commit (default: 1000 for an index folder, 64 for a database)")
    encode.add_argument("--commit-tokens", type=options.positive_int, default=COMMIT_TOKENS, metavar="T",
                        help=f"tokens per commit, at most (default {COMMIT_TOKENS:,}): with the documents, what bounds "
                             "the memory an encode holds")
    encode.add_argument("--ray", action="store_true",
                        help="embed on Ray Data: the corpus read by Ray's own readers, one actor per GPU (--device "
                             "cuda) or --ray-actors CPU actors, written into OUTPUT_DIR as here, resumable the same "
                             "way; needs pip install 'contextembed[ray]'")
    encode.add_argument("--ray-actors", type=options.positive_int, metavar="N",
                        help="with --ray: the number of actors (default: the GPUs with --device cuda, else 2)")
    encode.add_argument("--ray-address", help="with --ray: the Ray cluster to join (default: start a local Ray)")
    encode.set_defaults(func=encode_command)

    compact = commands.add_parser("compact", help="merge an index's segments into one, dropping deleted documents",
                                  description="An index grows by segments (one a commit) and records deletions beside "
                                              "them; merges happen as they accumulate. This rewrites them all into "
                                              "one segment now, so search scans one and the disk holds no dead "
                                              "chunks.")
    compact.add_argument("index", help="an index folder (or file:// URI) written by 'encode'")
    compact.set_defaults(func=compact_command)


def encode_command(args: argparse.Namespace) -> int:
    from contextembed.corpus import read_corpus
    from contextembed.pipeline import CorpusEncoder
    from contextembed.stores import StoreInfo, is_store_uri, open_store
    from contextembed.stores.sync import sync_corpus

    if args.ray or args.ray_actors is not None or args.ray_address is not None:
        return _encode_on_ray(args)
    if args.overwrite and is_store_uri(args.output_dir) and not args.output_dir.startswith("file://"):
        raise ValueError("--overwrite replaces an index folder; a store is updated in place (only changed documents "
                         "are written): leave it out")
    chunker = options.chunker(args)
    corpus = read_corpus(args.path)
    with open_store(args.output_dir, overwrite=args.overwrite) as store:  # refuses a folder of other things
        model = options.load_model(args)
        info = StoreInfo(args.model or "default", args.output_dim or model.dim, args.precision, str(chunker))
        store.ensure(info)  # a store of other vectors is refused before anything is embedded
        encoder = CorpusEncoder(model, chunker=chunker, output_dim=args.output_dim, precision=args.precision,
                                batch_size=args.batch_size)
        show = options.progress(args) is not False
        with interruptible() as stop:
            report = sync_corpus(store, corpus, info, encoder, commit_documents=args.commit_every,
                                 commit_tokens=args.commit_tokens, total=corpus.count() if show else None,
                                 progress=show, stop=stop)
        if report.interrupted:
            rerun = " (without --overwrite)" if args.overwrite else ""
            print(f"contextembed encode: interrupted: {report.committed} documents embedded and committed by this run, "
                  f"{store.count_documents()} in {store.uri} in all; run the same command{rerun} to resume",
                  file=sys.stderr)
            return 128 + stop.signal
        print(f"{store.uri}: {report}")
    return 0


def compact_command(args: argparse.Namespace) -> int:
    from contextembed.index import is_index
    from contextembed.stores import is_store_uri, parse_store_uri
    from contextembed.stores.index import IndexStore

    path = parse_store_uri(args.index).location if args.index.startswith("file://") else args.index
    if is_store_uri(args.index) and not args.index.startswith("file://"):
        raise ValueError(f"compact rewrites an index folder; {args.index} is a database, which compacts itself")
    if not is_index(path):
        raise ValueError(f"{path!r} holds no index (write one with: contextembed encode CORPUS {path})")
    with IndexStore(path) as store:
        before = len(store.snapshot().parts)
        after = store.compact()
        print(f"{path}: {before} segment(s) merged into {len(after.parts)}: {after.num_documents} documents, "
              f"{after.num_chunks} chunks")
    return 0


class interruptible:
    """Within it, SIGINT (Ctrl-C) and SIGTERM set an event instead of stopping the process: the encode finishes and
    commits the batch in flight, then stops. A second Ctrl-C stops at once (KeyboardInterrupt)."""

    def __enter__(self) -> threading.Event:
        self.event = threading.Event()
        self.event.signal = 0
        self.previous = {}
        if threading.current_thread() is threading.main_thread():
            for number in (signal.SIGINT, signal.SIGTERM):
                self.previous[number] = signal.signal(number, self._handle)
        return self.event

    def _handle(self, number, frame) -> None:
        if self.event.is_set() and number == signal.SIGINT:
            raise KeyboardInterrupt
        self.event.signal = number
        self.event.set()
        print(f"\ncontextembed: {signal.Signals(number).name}: stopping after the batch in flight is committed "
              "(Ctrl-C again to stop at once)", file=sys.stderr, flush=True)

    def __exit__(self, *exc) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)


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
        query = model.encode_queries([args.query], output_dim=info.dim, precision=info.precision,
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
                     output_dim=info.dim, evidence=bool(args.evidence),
                     int8_clip_sigmas=None if codes_raw_vectors(model.config.int8_scheme) else model.config.int8_clip_sigmas)
        if args.compare:
            vectors, records = store.chunks_in_order()
            show_comparison(model, query, vectors, records, output_dim=args.output_dim, batch_size=args.batch_size)
    return 0


def _searched_store(args: argparse.Namespace):
    """The store `args.path` names (a store URI or an index folder), or a folder of documents embedded into an index
    in memory; and the model that made (or makes) its vectors."""
    from contextembed.index import is_index
    from contextembed.index_legacy import restore_interrupted
    from contextembed.stores import StoreInfo, is_store_uri, open_store
    from contextembed.stores.index import IndexStore
    from contextembed.stores.sync import sync_corpus

    chunker = options.chunker(args)
    if is_store_uri(args.path) or (restore_interrupted(args.path) or is_index(args.path)):
        if args.compare:
            raise ValueError("--compare re-embeds the chunks, so it needs the documents: pass the corpus folder")
        store = open_store(args.path)
        info = store.info
        if args.output_dim is not None and args.output_dim != info.dim:
            store.close()
            raise ValueError(f"the {store.noun} holds {info.dim}-d vectors, got --output-dim {args.output_dim}")
        return store, options.load_model(args, args.model or (None if info.model == "default" else info.model))
    from contextembed.corpus import read_corpus
    from contextembed.pipeline import CorpusEncoder

    corpus = read_corpus(args.path)
    model = options.load_model(args)
    store = IndexStore(uri=args.path)
    info = StoreInfo(args.model or "default", args.output_dim or model.dim, "float32", str(chunker))
    total = corpus.count()
    sync_corpus(store, corpus, info, CorpusEncoder(model, chunker=chunker, output_dim=args.output_dim,
                                                   batch_size=args.batch_size),
                total=total, progress=not args.no_progress and (total or 0) > 64)  # a bar only where it helps
    return store, model


def _header(store) -> str:
    """The line under the query: how much was searched."""
    from contextembed.stores.index import IndexStore

    from contextembed.display import printable

    if isinstance(store, IndexStore):
        return (f"{store.count_documents()} documents, {store.count_chunks()} chunks, each embedded with its "
                "whole document in view")
    return f"{store.count_chunks()} chunks in {printable(store.uri)}, each embedded with its whole document in view"




def _encode_on_ray(args: argparse.Namespace) -> int:
    from contextembed.stores import StoreInfo, open_store

    if not args.ray:
        raise ValueError("--ray-actors and --ray-address go with --ray")
    if args.overwrite:
        raise ValueError("--ray writes incrementally, as a store: leave out --overwrite (or encode into a new folder)")
    try:
        import ray
    except ImportError as error:
        raise ImportError("--ray needs Ray Data: pip install 'contextembed[ray]'") from error
    from contextembed.integrations.ray import sync_on_ray

    gpu = args.device.startswith("cuda")
    chunker = options.chunker(args)
    started = not ray.is_initialized()  # a caller's Ray session is used as it is, and left running
    if started:
        ray.init(address=args.ray_address, include_dashboard=False, log_to_driver=False)
    # The command owns the process: its own progress bar, not Ray Data's logs of every operator's progress.
    ray.data.DataContext.get_current().enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    try:
        actors = args.ray_actors or (int(ray.cluster_resources().get("GPU", 0)) if gpu else 2)
        if actors < 1:
            raise ValueError("--device cuda on a Ray cluster without GPUs: pass --ray-actors N for CPU actors")
        with open_store(args.output_dir) as store:
            info = StoreInfo(args.model or "default", args.output_dim or _full_width(args), args.precision,
                             str(chunker))
            with interruptible() as stop:
                report = sync_on_ray(args.path, store, info, model=args.model or "", chunker=chunker,
                                     output_dim=args.output_dim, num_actors=actors, num_gpus=1 if gpu else 0,
                                     dtype=args.dtype, commit_documents=args.commit_every,
                                     commit_tokens=args.commit_tokens, stop=stop,
                                     progress=options.progress(args) is not False)
            if report.interrupted:
                print(f"contextembed encode: interrupted: {report.committed} documents embedded and committed by "
                      f"this run, {store.count_documents()} in {store.uri} in all; run the same command to resume",
                      file=sys.stderr)
                return 128 + stop.signal
            print(f"{store.uri}: {report} ({actors} Ray actors)")
    finally:
        if started:
            ray.shutdown()
    return 0


def _full_width(args: argparse.Namespace) -> int:
    """The width of the model's vectors, read from its config where it has one (the actors load the weights)."""
    import contextembed
    from contextembed.convert import is_pplx_checkpoint
    from contextembed.default_model import DEFAULT_MODEL_NAME, named_model_path
    from contextembed.hub import resolve_checkpoint
    from contextembed.modeling import ContextEmbedConfig

    name = args.model or DEFAULT_MODEL_NAME
    path = named_model_path(name) or resolve_checkpoint(name)
    if is_pplx_checkpoint(path):  # converted on load: its width is the conversion's
        return contextembed.load(str(path)).dim
    config = ContextEmbedConfig.from_pretrained(path)
    return config.output_dim or config.embedding_dim
