"""contextembed's own index as a store: a folder of segments under a manifest (`contextembed.index`), opened by a
plain path or a `file://` URI, or kept in memory (a corpus searched without writing anything).

A write is one commit: a new segment of the documents written, the documents they replace (or that are deleted)
marked dead in the segments that hold them, and a new manifest published atomically; segments are merged as they
accumulate, and `compact` merges them all. Writers take turns through the index folder's lock, each re-reading the
index under it, so concurrent writers of different documents lose nothing; a reader takes the same lock to open a
changed index, so it sees the index before or after a write, never half of one.

Search is exact (`contextembed.retrieval.exact_search`) over each segment's vectors, memory-mapped, its deleted
documents (and those a `where` filter leaves out) skipped in place; the segments' rankings are merged by the rule of
`contextembed.ranking`, so results do not depend on how documents are spread over segments. Every precision of
`contextembed.quantize` is kept.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from contextembed.index import IndexFolder, Part, Snapshot, check_index_target
from contextembed.modeling import PRECISIONS, check_count
from contextembed.ranking import ChunkHit, DocumentHit, merge_ranked
from contextembed.retrieval import exact_search
from contextembed.stores.base import (
    DocumentVectors,
    StoreInfo,
    VectorStore,
    Where,
    _checked_where,
    metadata_tags,
    where_tags,
)


class IndexStore(VectorStore):
    """The folder index at `path` (None: in memory). With `overwrite`, an index already there is ignored and
    replaced by the first write (nothing is touched before it), as `contextembed encode --overwrite` does."""

    precisions = PRECISIONS
    noun = "index"
    batch_documents = 1000  # documents per commit when keeping it in step with a corpus

    def __init__(self, path: str | Path | None = None, *, overwrite: bool = False, uri: str | None = None):
        self.path = None if path is None else Path(path)
        self.uri = uri or ("memory" if path is None else str(path))
        self.folder = IndexFolder(self.path)
        self.overwrite = overwrite and self.path is not None
        self._snapshot: Snapshot | None = None  # what is searched; re-read when the manifest changes
        self._stamp = None
        if self.path is not None:
            check_index_target(self.path)  # refuses a file, or a folder that holds something else

    # --- reading ----------------------------------------------------------------------------------------------
    def _current(self) -> Snapshot | None:
        """The index as published now (re-read only when it changed), or the one kept in memory (no path, or an
        index to overwrite that is not written yet)."""
        if self.path is None or self.overwrite:
            return self.folder.read() if self.path is None else self._snapshot
        if self.folder.stamp() != self._stamp:
            with self.folder.locked():  # a writer may be publishing: wait for it, never read half a write
                self._stamp = self.folder.stamp()
                self._snapshot = self.folder.read()
        return self._snapshot

    def snapshot(self) -> Snapshot | None:
        """The index as searched now: its segments (memory-mapped from a folder) and their live documents."""
        return self._current()

    def _read_info(self) -> StoreInfo | None:
        snapshot = self._current()
        return None if snapshot is None else StoreInfo.from_dict(snapshot.meta)

    def document_hashes(self, ids: Sequence[str] | None = None) -> dict[str, str]:
        snapshot = self._current()
        if snapshot is None:
            return {}
        if ids is None:
            return snapshot.hashes()
        found = {}
        for document in ids:
            where = snapshot.locate(document)
            if where is not None:
                found[document] = where[0].segment.documents[where[1]].get("content_hash", "")
        return found

    def count_documents(self) -> int:
        snapshot = self._current()
        return 0 if snapshot is None else snapshot.num_documents

    def count_chunks(self, document: str | None = None) -> int:
        snapshot = self._current()
        if snapshot is None:
            return 0
        if document is None:
            return snapshot.num_chunks
        where = snapshot.locate(document)
        return 0 if where is None else len(where[0].segment.rows(where[1]))

    def fetch_documents(self, ids: Sequence[str]) -> list[DocumentVectors]:
        snapshot = self._current()
        located = [] if snapshot is None else [snapshot.locate(document) for document in ids]
        return [part.segment.document(d) for part, d in filter(None, located)]

    def chunks_in_order(self) -> tuple[np.ndarray, list[dict]]:
        """Every live chunk's vector and `{"path", "text"}` record, in the rule's order (documents by id)."""
        snapshot = self._current()
        parts = [] if snapshot is None else snapshot.parts
        order = heapq.merge(*[[(p.segment.documents[d]["id"], i, int(d)) for d in np.flatnonzero(p.live)]
                              for i, p in enumerate(parts)])
        vectors, records = [], []
        for document, i, d in order:
            rows = parts[i].segment.rows(d)
            vectors.append(np.asarray(parts[i].segment.vectors[rows.start : rows.stop]))
            records += [{"path": document, "text": parts[i].segment.text(r)} for r in rows]
        width = self.info.dim // 8 if self.info.precision in ("binary", "ubinary") else self.info.dim
        return (np.concatenate(vectors) if vectors else np.zeros((0, width), np.float32)), records

    # --- search -----------------------------------------------------------------------------------------------
    def _ranked(self, query: np.ndarray, k_documents: int, k_chunks: int, where: Where | None):
        """(the k best documents, the k best chunks) over every segment, merged by the rule."""
        snapshot = self._current()
        documents, chunks = [], []
        for part in [] if snapshot is None else snapshot.parts:
            live = part.live & _selected(part, where) if where else part.live
            if not live.any():
                continue
            segment = part.segment
            found = exact_search(query[None], segment.vectors, segment.doc_of_row, top_k_documents=k_documents,
                                 top_k_chunks=k_chunks, precision=self.info.precision, live_documents=live)
            documents.append([DocumentHit(hit.document, hit.score, hit) for hit in
                              (self._hit(segment, int(r), s) for r, s in zip(found.doc_best_chunks[0],
                                                                              found.doc_scores[0]))])
            chunks.append([self._hit(segment, int(r), s) for r, s in zip(found.chunk_rows[0], found.chunk_scores[0])])
        return merge_ranked(documents, k_documents), merge_ranked(chunks, k_chunks)

    def _top_chunks(self, query: np.ndarray, k: int, where: Where | None) -> list[ChunkHit]:
        return self._ranked(query, 1, k, where)[1]

    def search_chunks(self, query: np.ndarray, k: int = 10, where: Where | None = None) -> list[ChunkHit]:
        """Exact: the k best chunks by the rule, over every segment."""
        check_count(k, "k")
        return self._ranked(self._checked_query(query), 1, k, _checked_where(where))[1]

    def search_documents(self, query: np.ndarray, k: int = 10, where: Where | None = None) -> list[DocumentHit]:
        """Exact MaxSim over every segment (`contextembed.retrieval.exact_search`), merged by the rule."""
        check_count(k, "k")
        return self._ranked(self._checked_query(query), k, 1, _checked_where(where))[0]

    def _hit(self, segment, row: int, score) -> ChunkHit:
        entry = segment.documents[int(segment.doc_of_row[row])]
        score = float(score) if self.info.precision == "float32" else int(score)
        record = segment.chunks[row]
        return ChunkHit(entry["id"], score, int(record["chunk"]), int(record["start"]), int(record["end"]),
                        segment.text(row), dict(entry.get("metadata") or {}))

    # --- writing ----------------------------------------------------------------------------------------------
    def _create(self, info: StoreInfo) -> None:
        if self.path is None or self.overwrite:  # in memory until the first write replaces what is there
            self._snapshot = Snapshot({**info.to_dict(), "generation": 0})
            if self.path is None:
                self.folder._publish(self._snapshot)
            return
        with self.folder.locked():
            if self.folder.read() is None:
                self.folder.create(info.to_dict())
            self._stamp = None

    def _write(self, documents: list[DocumentVectors], replace: bool) -> None:
        self._commit(documents, set(), replace)

    def _delete(self, ids: list[str]) -> None:
        self._commit([], set(ids))

    def _commit(self, documents: list[DocumentVectors], delete: set[str], replace: bool = True) -> None:
        with self.folder.locked():
            current = None if self.overwrite else self.folder.read()  # re-read under the lock: others may write
            self.folder.commit(current, self.info.to_dict(), documents, delete, replace=replace,
                               drop_all=self.overwrite)
            self.overwrite = False  # written: from now on the folder is the index
            self._stamp = None

    def compact(self) -> Snapshot | None:
        """Merge every segment into one, without its deleted documents (what `contextembed compact` runs)."""
        with self.folder.locked():
            current = self.folder.read()
            self._stamp = None
            return None if current is None else self.folder.merge(current)


def _selected(part: Part, where: Where) -> np.ndarray:
    """(documents,) whether each document of the part matches `where` (every key, any of its values)."""
    groups = [set(group) for group in where_tags(where)]
    return np.array([all(group & set(metadata_tags(entry.get("metadata") or {})) for group in groups)
                     for entry in part.segment.documents], dtype=bool)
