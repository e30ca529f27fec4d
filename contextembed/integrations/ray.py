"""Ray Data: embed a dataset whose rows are documents, on an actor pool, into one row per chunk (`embed_dataset`,
for a pipeline of your own), or a whole corpus into a store or the index, resumably (`sync_on_ray`, what
`contextembed encode --ray` runs).

    pip install "contextembed[ray]"

Each input row is one document: an `id` and either `chunks` (a list of strings, kept exactly) or `text` (raw
text, split by `chunker`). A document never straddles two batches, so every chunk sees its whole document.
Each output row is one chunk: `doc_id`, `chunk_index`, `start`, `end` (character offsets into `text`; null for
`chunks` rows), `text` and `embedding` (a fixed-size list of floats), ready for `write_parquet`.

    ds = ray.data.read_parquet("s3://bucket/documents/")            # columns: id, text
    embed_dataset(ds, chunker="sentences", num_actors=8).write_parquet("s3://bucket/chunk-vectors/")

On a cluster the same code runs after `ray.init(address="auto")` (or as a job submitted with `ray job submit`);
each actor loads the model once, so size `num_actors` to the workers' CPUs or GPUs (`num_gpus=1` per actor puts
each on its own GPU).

`sync_on_ray` reads the corpus with Ray Data's own readers (`read_json` for JSON lines, `read_parquet`,
`read_binary_files` for a folder of .txt/.md files: nothing is listed or read in the driver), embeds on the actors
(each skips the documents the store already holds with the same content hash, so a rerun embeds only what is left),
and writes from the driver into the store in commit batches, as `contextembed.stores.sync.sync_corpus` does: an
interrupted run keeps what it committed.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

import numpy as np

try:
    import pyarrow as pa
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError('the Ray Data integration needs ray[data] and pyarrow: pip install "contextembed[ray]"') from error

import contextembed
from contextembed.chunking import Chunk
from contextembed.corpus import JSONL_SUFFIXES, SUFFIXES, Document, document_from_record
from contextembed.mixing import check_local_mix
from contextembed.modeling import normalize_documents
from contextembed.pipeline import commit_batches
from contextembed.prefetch import prefetched

logger = logging.getLogger(__name__)

COLUMNS = ("doc_id", "chunk_index", "start", "end", "text", "embedding")
ACTOR_GROUP = 16  # documents an actor prepares while it embeds the group before (`sync_on_ray`)
ACTOR_GROUP_TOKENS = 65_536  # and at most this many tokens in one group


class ChunkEmbedder:
    """The callable class `map_batches` runs on each actor: loads the model once, embeds batches of documents.

    Ids must be unique: two rows with one id would give colliding `(doc_id, chunk_index)` keys, so a batch that
    holds an id twice is an error (rows of one id in different batches cannot be seen from one actor: deduplicate
    the dataset by id first if it may hold repeats).
    """

    def __init__(self, model: str = "", chunker=None, output_dim: int | None = None, device: str | None = None,
                 dtype: str | None = None, local_mix: float = 0.0):
        self.model = contextembed.load(model, device=device, dtype=dtype)
        self.chunker, self.output_dim = chunker, output_dim
        self.local_mix = check_local_mix(local_mix)  # encode_documents' local_mix (0: one pass)

    def __call__(self, batch: pa.Table) -> pa.Table:
        names = batch.column_names
        if "id" not in names or ("chunks" in names) == ("text" in names):
            raise ValueError(f"each row is one document: an 'id' and either 'chunks' or 'text' (got columns {names})")
        ids = batch.column("id").to_pylist()
        if any(i is None for i in ids):
            raise ValueError(f"document {ids.index(None)} of the batch has no id")
        seen: dict = {}
        for row, doc_id in enumerate(ids):
            if doc_id in seen:
                raise ValueError(f"rows {seen[doc_id]} and {row} of the batch share the id {doc_id!r}: their chunk "
                                 "rows would collide on (doc_id, chunk_index); give every document its own id")
            seen[doc_id] = row
        starts: list[int | None]
        if "chunks" in names:
            if self.chunker is not None:
                raise ValueError("rows with 'chunks' are already split: a chunker applies to 'text' rows only")
            documents = normalize_documents(batch.column("chunks").to_pylist(), "the 'chunks' column",
                                            strings="error")
            vectors = self.model.encode_documents(documents, output_dim=self.output_dim, local_mix=self.local_mix)
            texts = [chunk for chunks in documents for chunk in chunks]
            starts = ends = [None] * len(texts)
        else:
            if self.chunker is None:
                raise ValueError("rows with raw 'text' need a chunker (for example chunker='sentences')")
            results = self.model.encode_documents(batch.column("text").to_pylist(), chunker=self.chunker,
                                                    output_dim=self.output_dim, local_mix=self.local_mix)
            vectors = [r.embeddings for r in results]
            chunks = [c for r in results for c in r.chunks]
            texts, starts, ends = [c.text for c in chunks], [c.start for c in chunks], [c.end for c in chunks]
        counts = [len(v) for v in vectors]
        matrix = np.concatenate(vectors).astype(np.float32) if vectors else np.zeros((0, 1), np.float32)
        return pa.table({
            "doc_id": pa.array(np.repeat(np.array(ids, dtype=object), counts).tolist()),
            "chunk_index": pa.array([k for n in counts for k in range(n)], pa.int32()),
            "start": pa.array(starts, pa.int64()),
            "end": pa.array(ends, pa.int64()),
            "text": pa.array(texts, pa.string()),
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(matrix.ravel()), matrix.shape[1]),
        })


def embed_dataset(dataset, model: str = "", *, chunker=None, output_dim: int | None = None, num_actors: int = 2,
                  batch_size: int = 16, num_gpus: float = 0, dtype: str | None = None, local_mix: float = 0.0):
    """A lazy Ray `Dataset` of chunk rows (see the module docstring) from a dataset of document rows.

    `batch_size` counts documents per call; within a call the encoder batches by tokens. `local_mix` is
    `encode_documents`' (0: one pass).
    """
    check_local_mix(local_mix)  # before any actor starts
    from ray.data import ActorPoolStrategy

    return dataset.map_batches(
        ChunkEmbedder, fn_constructor_kwargs={"model": model, "chunker": chunker, "output_dim": output_dim,
                                              "device": "cuda" if num_gpus else None, "dtype": dtype,
                                              "local_mix": local_mix},
        compute=ActorPoolStrategy(size=num_actors), batch_size=batch_size, batch_format="pyarrow",
        num_gpus=num_gpus or None)


class DocumentEmbedder:
    """The callable class `sync_on_ray` runs on each actor: corpus rows (as Ray's readers give them) in, one row per
    document out: its chunks and vectors (`status` "embedded"), or only its id when the store holds it unchanged
    ("kept") or it has nothing to embed ("empty")."""

    def __init__(self, model: str, chunker, output_dim: int | None, precision: str, device: str | None,
                 dtype: str | None, stored, root: str | None):
        from contextembed.pipeline import CorpusEncoder

        self.encoder = CorpusEncoder(contextembed.load(model, device=device, dtype=dtype), chunker=chunker,
                                     output_dim=output_dim, precision=precision)
        self.stored = stored  # id -> content hash of what the store holds
        self.root = root  # a folder of text files: ids are paths relative to it

    def documents(self, batch: pa.Table) -> list[tuple[str, object]]:
        """(id, Document or None for an empty one) per row."""
        if self.root is not None:  # read_binary_files: `bytes` and `path`
            out = []
            for data, path in zip(batch.column("bytes").to_pylist(), batch.column("path").to_pylist()):
                name = Path(os.path.relpath(path, self.root)).as_posix()
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError as error:
                    raise ValueError(f"cannot read {path!r} as UTF-8 text: {error}") from error
                out.append((name, Document(name, text, metadata={"path": name}) if text.strip() else None))
            return out
        out = []
        for record in batch.to_pylist():
            record = arrow_record(record)
            document = document_from_record(record, f"the corpus row of id {record.get('id', record.get('_id'))!r}")
            out.append((str(record.get("id", record.get("_id"))), document))
        return out

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = {"id": [], "status": [], "content_hash": [], "metadata": [], "texts": [], "starts": [], "ends": [],
                "vectors": [], "tokens": []}
        todo = []
        for document_id, document in self.documents(batch):
            if document is None or self.stored.get(document_id) == document.content_hash:
                _append(rows, document_id, "empty" if document is None else "kept")
            else:
                todo.append(document)
        # the call's documents in groups, the next one chunked and tokenised in a thread while the model embeds this
        groups = commit_batches(self.encoder.prepare, iter(todo), ACTOR_GROUP, ACTOR_GROUP_TOKENS, group=ACTOR_GROUP)
        for prepared in prefetched(groups):
            for item, vectors in zip(prepared, self.encoder.embed(prepared)):
                document = item.document
                _append(rows, document.id, "embedded", document.content_hash, json.dumps(document.metadata),
                        [c.text for c in item.chunks], [c.start for c in item.chunks], [c.end for c in item.chunks],
                        np.ascontiguousarray(vectors).tobytes(), item.tokens)
        return pa.table({
            "id": pa.array(rows["id"], pa.string()), "status": pa.array(rows["status"], pa.string()),
            "content_hash": pa.array(rows["content_hash"], pa.string()),
            "metadata": pa.array(rows["metadata"], pa.string()),
            "texts": pa.array(rows["texts"], pa.list_(pa.string())),
            "starts": pa.array(rows["starts"], pa.list_(pa.int64())),
            "ends": pa.array(rows["ends"], pa.list_(pa.int64())),
            "vectors": pa.array(rows["vectors"], pa.binary()), "tokens": pa.array(rows["tokens"], pa.int64()),
        })


def _append(rows: dict, document_id: str, status: str, content_hash=None, metadata=None, texts=None, starts=None,
            ends=None, vectors=None, tokens=0) -> None:
    for name, value in (("id", document_id), ("status", status), ("content_hash", content_hash),
                        ("metadata", metadata), ("texts", texts), ("starts", starts), ("ends", ends),
                        ("vectors", vectors), ("tokens", tokens)):
        rows[name].append(value)


def arrow_record(record: dict) -> dict:
    """A row as Arrow gives it, as a JSON-lines record: a struct column's absent keys come as None, and are dropped.

    >>> arrow_record({"id": "a", "metadata": {"lang": "en", "year": None}})
    {'id': 'a', 'metadata': {'lang': 'en'}}
    """
    metadata = record.get("metadata")
    if isinstance(metadata, dict):
        record = {**record, "metadata": {k: v for k, v in metadata.items() if v is not None}}
    return record


def read_corpus_dataset(path: str | os.PathLike):
    """The corpus at `path` as a Ray dataset, read by Ray's own readers (see `contextembed.corpus` for the
    layouts), and the folder ids are relative to (None for records with their own ids).

    The read tasks reserve no CPU (`num_cpus=0`): reading is light beside the model, and an actor pool that takes
    every CPU (2 actors on 2 cores) would otherwise leave the reads waiting for a CPU that never frees."""
    import ray

    path = Path(path)
    if not path.exists():
        raise ValueError(f"corpus path {str(path)!r} does not exist")
    name = path.name.lower()
    if path.is_file() and name.endswith(JSONL_SUFFIXES):
        return ray.data.read_json(str(path), lines=True, file_extensions=None, num_cpus=0), None
    if name.endswith(".parquet") or (path.is_dir() and any(path.rglob("*.parquet"))
                                     and not any(p.suffix.lower() in SUFFIXES for p in path.rglob("*"))):
        return ray.data.read_parquet(str(path), num_cpus=0), None
    if path.is_file() and path.suffix.lower() in SUFFIXES:
        return ray.data.read_binary_files(str(path), include_paths=True, num_cpus=0), str(path.parent)
    if path.is_dir():
        return ray.data.read_binary_files(str(path), include_paths=True, num_cpus=0,
                                          file_extensions=[s.lstrip(".") for s in SUFFIXES]), str(path)
    raise ValueError(f"{str(path)!r} is not a corpus Ray reads: a JSON-lines file, Parquet, or a folder of .txt/.md")


def sync_on_ray(path, store, info, *, model: str = "", chunker="sentences", output_dim: int | None = None,
                num_actors: int = 2, num_gpus: float = 0, dtype: str | None = None, batch_size: int = 64,
                commit_documents: int | None = None, commit_tokens: int | None = None,
                stop: threading.Event | None = None, progress: bool = False):
    """Bring `store` in step with the corpus at `path`, embedded on a Ray actor pool (see the module docstring);
    returns a `contextembed.stores.sync.SyncReport`. `batch_size`: documents per actor call (the actor prepares them
    in groups of 16, the next group beside the model's pass over this one, and the encoder batches each group by
    tokens); `num_gpus`: per actor (1: one actor per GPU)."""
    from ray.data import ActorPoolStrategy

    from contextembed.index import vector_layout
    from contextembed.stores.base import DocumentVectors
    from contextembed.stores.sync import COMMIT_TOKENS, Progress, SyncReport

    store.ensure(info)
    stored = store.document_hashes()
    dataset, root = read_corpus_dataset(path)
    rows = dataset.map_batches(
        DocumentEmbedder, fn_constructor_kwargs={
            "model": model, "chunker": chunker, "output_dim": output_dim, "precision": info.precision,
            "device": "cuda" if num_gpus else None, "dtype": dtype, "stored": stored, "root": root},
        compute=ActorPoolStrategy(size=num_actors), batch_size=batch_size, batch_format="pyarrow",
        num_gpus=num_gpus or None)
    width, stored_dtype = vector_layout(info.to_dict())
    report, seen, pending, tokens, empty = SyncReport(), set(), [], 0, 0
    bar = Progress(None, progress)
    most_documents, most_tokens = commit_documents or store.batch_documents or 1000, commit_tokens or COMMIT_TOKENS

    def commit() -> None:
        nonlocal pending, tokens
        new = [d for d in pending if d.id not in stored]
        changed = [d for d in pending if d.id in stored]
        report.chunks_written += (store.add_documents(new, known_new=True) if new else 0) + (
            store.replace(changed) if changed else 0)
        report.added += len(new)
        report.replaced += len(changed)
        report.tokens += tokens
        pending, tokens = [], 0
        bar.advance(report.kept + report.committed, report.tokens)

    for batch in rows.iter_batches(batch_format="pyarrow", batch_size=None):
        for row in batch.to_pylist():
            if row["id"] in seen:
                raise ValueError(f"two documents of the corpus have the id {row['id']!r}")
            seen.add(row["id"])
            if row["status"] != "embedded":
                report.kept += row["status"] == "kept"
                empty += row["status"] == "empty"
                continue
            chunks = [Chunk(t, a, b) for t, a, b in zip(row["texts"], row["starts"], row["ends"])]
            vectors = np.frombuffer(row["vectors"], dtype=stored_dtype).reshape(len(chunks), width)
            pending.append(DocumentVectors(row["id"], chunks, vectors, json.loads(row["metadata"]),
                                           row["content_hash"]))
            tokens += row["tokens"]
            if len(pending) >= most_documents or tokens >= most_tokens:
                commit()
                if stop is not None and stop.is_set():
                    report.interrupted = True
                    bar.close()
                    return report
    if pending:
        commit()
    bar.close()
    if empty:
        logger.warning("skipped %d empty document(s) with nothing to embed", empty)
    gone = [i for i in stored if i not in seen]
    store.delete(gone)
    report.deleted = len(gone)
    return report
