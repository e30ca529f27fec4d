"""contextembed's own index as a store: a self-contained folder (`contextembed.index`), opened by a plain path or a
`file://` URI, or kept in memory (a folder of documents searched without writing anything).

Every write rewrites the folder the way `contextembed.index.write_index` does (a staging folder renamed into place,
the old one moved aside and restored by the next reader if the writer dies between the two renames). Writers take
turns through a lock on the folder that holds the index (`fcntl.flock`; where that does not exist, the threads of
one process), each re-reading the index under the lock, so concurrent writers of different documents lose nothing;
a reader takes the same lock to re-read a changed index, so it sees the index before or after a write, never half
of a swap. Search is exact (`contextembed.retrieval`) over the
vectors, memory-mapped; documents are kept in order of id, so row order is the tie rule's order. Every precision of
`contextembed.quantize` is kept.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from contextembed.chunking import Chunk
from contextembed.index import Index, check_index_target, is_index, read_index, restore_interrupted, write_index
from contextembed.modeling import PRECISIONS, check_count
from contextembed.ranking import ChunkHit, DocumentHit
from contextembed.retrieval import exact_search
from contextembed.scoring import CODE_DTYPES
from contextembed.stores.base import (
    DocumentVectors,
    StoreInfo,
    VectorStore,
    Where,
    _checked_where,
    metadata_tags,
    where_tags,
)

_THREADS = threading.Lock()  # flock does not order the threads of one process where fcntl is missing
_HELD = threading.local()  # the folders whose lock this thread holds (a re-read inside a write takes it once)


class IndexStore(VectorStore):
    """The folder index at `path` (None: in memory). With `overwrite`, an index already there is ignored and
    replaced by the first write (nothing is touched before it), as `contextembed encode --overwrite` does."""

    precisions = PRECISIONS
    noun = "index"
    batch_documents = None  # every write rewrites the folder: write a corpus once

    def __init__(self, path: str | Path | None = None, *, overwrite: bool = False, uri: str | None = None):
        self.path = None if path is None else Path(path)
        self.uri = uri or ("memory" if path is None else str(path))
        self.overwrite = overwrite
        self._index: Index | None = None  # the snapshot searched; re-read when the folder changes
        self._stamp = None
        self._set(None, None)
        if self.path is not None:
            check_index_target(self.path, overwrite=True)  # refuses a file, or a folder that holds something else

    # --- reading ----------------------------------------------------------------------------------------------
    def _current(self) -> Index | None:
        """The index as it is on disk now (re-read only when it changed), or the one in memory (no path, or an
        index to overwrite that is not written yet)."""
        if self.path is None or self.overwrite:
            return self._index
        if _stamp(self.path) != self._stamp and not self.path.parent.is_dir():
            self._set(None, _stamp(self.path))  # its folder is gone: so is the index
        elif _stamp(self.path) != self._stamp:
            with self._locked():  # a writer may be between its two renames: wait for it, never read half a swap
                restore_interrupted(self.path)
                self._set(read_index(self.path, mmap=True) if is_index(self.path) else None, _stamp(self.path))
        return self._index

    def _set(self, index: Index | None, stamp) -> None:
        """Take `index` as the snapshot, with what search needs of it: each row's document, each document's rows."""
        if index is not None:
            index = _by_id(index)
        chunks, documents = (index.chunks, index.documents) if index is not None else ([], [])
        self._doc_of_row = np.array([r["doc"] for r in chunks], dtype=np.int64)  # (N,)
        self._starts = np.searchsorted(self._doc_of_row, np.arange(len(documents) + 1))  # (documents + 1,)
        self._positions = {entry["id"]: d for d, entry in enumerate(documents)}
        self._index, self._stamp = index, stamp

    def snapshot(self) -> Index | None:
        """The index as searched now: vectors (memory-mapped from a folder), chunk records and metadata."""
        return self._current()

    def _read_info(self) -> StoreInfo | None:
        index = self._current()
        return None if index is None else StoreInfo.from_dict(index.meta)

    def document_hashes(self, ids: Sequence[str] | None = None) -> dict[str, str]:
        index = self._current()
        if index is None:
            return {}
        wanted = None if ids is None else set(ids)
        return {d["id"]: d["content_hash"] for d in index.documents if wanted is None or d["id"] in wanted}

    def count_chunks(self, document: str | None = None) -> int:
        index = self._current()
        if index is None:
            return 0
        if document is None:
            return len(index.chunks)
        d = self._positions.get(document)
        return 0 if d is None else int(self._starts[d + 1] - self._starts[d])

    def fetch_documents(self, ids: Sequence[str]) -> list[DocumentVectors]:
        index = self._current()
        found = []
        for document in ids:
            d = self._positions.get(document)
            if d is not None:
                found.append(self._document(index, d))
        return found

    def _document(self, index: Index, d: int) -> DocumentVectors:
        rows = range(self._starts[d], self._starts[d + 1])
        entry = index.documents[d]
        chunks = [Chunk(index.chunks[r]["text"], index.chunks[r]["start"], index.chunks[r]["end"]) for r in rows]
        return DocumentVectors(entry["id"], chunks, np.asarray(index.embeddings[rows.start : rows.stop]),
                               dict(entry["metadata"]), entry["content_hash"])

    # --- search -----------------------------------------------------------------------------------------------
    def _rows(self, index: Index, where: Where | None) -> np.ndarray | None:
        """Rows of the documents `where` selects (None: every row)."""
        if not where:
            return None
        groups = where_tags(where)
        chosen = [d for d, entry in enumerate(index.documents)
                  if all(set(group) & set(metadata_tags(entry["metadata"])) for group in groups)]
        return np.concatenate([np.arange(self._starts[d], self._starts[d + 1]) for d in chosen]) if chosen \
            else np.zeros(0, np.int64)

    def _search(self, query: np.ndarray, k_documents: int, k_chunks: int, where: Where | None):
        index = self._current()
        rows = self._rows(index, where)
        vectors = index.embeddings if rows is None else index.embeddings[rows]
        doc_of_row = self._doc_of_row if rows is None else self._doc_of_row[rows]
        if len(vectors) == 0:
            return index, None, rows
        found = exact_search(query[None], vectors, doc_of_row, top_k_documents=k_documents, top_k_chunks=k_chunks,
                             precision=self.info.precision)
        return index, found, rows

    def _top_chunks(self, query: np.ndarray, k: int, where: Where | None) -> list[ChunkHit]:
        index, found, rows = self._search(query, 1, k, where)
        if found is None:
            return []
        return [self._chunk_hit(index, int(r if rows is None else rows[r]), s)
                for r, s in zip(found.chunk_rows[0], found.chunk_scores[0])]

    def search_documents(self, query: np.ndarray, k: int = 10, where: Where | None = None) -> list[DocumentHit]:
        """Exact MaxSim over the index (`contextembed.retrieval.exact_search`)."""
        check_count(k, "k")
        query, where = self._checked_query(query), _checked_where(where)
        index, found, rows = self._search(query, k, 1, where)
        if found is None:
            return []
        hits = []
        for score, r in zip(found.doc_scores[0], found.doc_best_chunks[0]):
            chunk = self._chunk_hit(index, int(r if rows is None else rows[r]), score)
            hits.append(DocumentHit(chunk.document, chunk.score, chunk))
        return hits

    def _chunk_hit(self, index: Index, row: int, score) -> ChunkHit:
        record = index.chunks[row]
        entry = index.documents[record["doc"]]
        score = float(score) if self.info.precision == "float32" else int(score)
        return ChunkHit(entry["id"], score, record["chunk"], record["start"], record["end"], record["text"],
                        dict(entry["metadata"]))

    # --- writing ----------------------------------------------------------------------------------------------
    def _create(self, info: StoreInfo) -> None:
        width = info.output_dim // 8 if info.precision in ("binary", "ubinary") else info.output_dim
        dtype = CODE_DTYPES.get(info.precision, np.float32)
        meta = {**info.to_dict(), "num_documents": 0, "documents": []}
        empty = Index(np.zeros((0, width), dtype=dtype), [], {**meta, "format_version": 3, "num_chunks": 0})
        if self.path is None or self.overwrite:  # in memory until the first write replaces what is there
            self._set(empty, None)
            return
        with self._locked():
            if not is_index(self.path):
                write_index(self.path, empty.embeddings, [], meta)
            self._stamp = None

    def _write(self, documents: list[DocumentVectors], replace: bool) -> None:
        ids = {d.id for d in documents}
        self._rewrite(lambda kept: [d for d in kept if d.id not in ids] + documents)

    def _delete(self, ids: list[str]) -> None:
        gone = set(ids)
        self._rewrite(lambda kept: [d for d in kept if d.id not in gone])

    def _rewrite(self, change) -> None:
        """Apply `change` (documents -> documents) to the index as it is now, and write the result whole."""
        with self._locked():
            self._stamp = None  # re-read under the lock: another writer may have changed the folder
            index = self._current()
            documents = sorted(change([self._document(index, d) for d in range(len(index.documents))]),
                               key=lambda d: d.id)
            info = StoreInfo.from_dict(index.meta)
            width = index.embeddings.shape[1]
            vectors = np.concatenate([np.asarray(d.vectors) for d in documents]) if documents \
                else np.zeros((0, width), index.embeddings.dtype)
            vectors = vectors.astype(index.embeddings.dtype, copy=False)
            records = [{"doc": i, "path": d.id, "chunk": j, "start": c.start, "end": c.end, "text": c.text}
                       for i, d in enumerate(documents) for j, c in enumerate(d.chunks)]
            meta = {**info.to_dict(), "num_documents": len(documents),
                    "documents": [{"id": d.id, "content_hash": d.content_hash, "metadata": d.metadata}
                                  for d in documents]}
            if self.path is None:
                self._set(Index(vectors, records, {**meta, "format_version": 3, "num_chunks": len(records)}), None)
                return
            write_index(self.path, vectors, records, meta, overwrite=True)
            self.overwrite = False  # written: from now on the folder is the index
            self._set(read_index(self.path, mmap=True), _stamp(self.path))

    @contextlib.contextmanager
    def _locked(self):
        """Writers of one folder take turns: a lock on the folder that holds it (across processes where `fcntl`
        exists; the index itself is renamed by every write, its parent stays, and no lock file is left behind)."""
        held = _HELD.__dict__.setdefault("folders", set())  # this thread's locks: a writer re-reads under its own
        key = None if self.path is None else os.path.abspath(self.path.parent)
        if key is None or key in held:
            yield
            return
        held.add(key)
        try:
            try:
                import fcntl
            except ImportError:  # pragma: no cover - Windows: the threads of one process
                with _THREADS:
                    yield
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            folder = os.open(self.path.parent, os.O_RDONLY)
            try:
                fcntl.flock(folder, fcntl.LOCK_EX)
                yield
            finally:
                os.close(folder)  # releases the lock
        finally:
            held.discard(key)


def _stamp(path: Path):
    """What changes whenever the index at `path` is replaced: its index.json's inode and modification time."""
    try:
        stat = os.stat(path / "index.json")
    except OSError:
        return ("missing",)
    return (stat.st_ino, stat.st_mtime_ns)


def _by_id(index: Index) -> Index:
    """The index with its documents in order of id (the tie rule's order); format 2 kept the corpus's path order,
    which may differ in a few characters (a path's separator against a lower character)."""
    documents = index.documents
    order = sorted(range(len(documents)), key=lambda d: documents[d]["id"])
    if order == list(range(len(documents))):
        return index
    docs = np.array([r["doc"] for r in index.chunks], dtype=np.int64)
    starts = np.searchsorted(docs, np.arange(len(documents) + 1))
    rows = np.concatenate([np.arange(starts[d], starts[d + 1]) for d in order])
    position = {old: new for new, old in enumerate(order)}
    chunks = [{**index.chunks[r], "doc": position[index.chunks[r]["doc"]]} for r in rows]
    meta = {**index.meta, "documents": [documents[d] for d in order]}
    return Index(np.asarray(index.embeddings[rows]), chunks, meta)
