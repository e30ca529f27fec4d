"""Qdrant: chunk points in a collection, in the embedded local mode (`qdrant:///path/to/folder`) or on a server or
cluster (`qdrant://HOST:PORT`, API key from `$QDRANT_API_KEY`), `?collection=NAME`.

One point per chunk (payload: `doc_id`, `chunk`, offsets, `text`, `content_hash`, `metadata`, `tags` for filters).
Qdrant has no transactions, so a write is journaled: its new chunks go in marked `pending` (every search leaves
them out), then the documents' old chunks are deleted, the new ones unmarked, and the journal entry removed. A writer
that dies part way leaves its entry behind; the next time the store is opened, an entry whose new chunks are all
present is finished and any other is undone, so each document is as it was before or after, never mixed.

Document search (`document_search`): `"groups"` (default) asks Qdrant for the best chunk per `doc_id`
(`query_points_groups`); `"multivector"` keeps a second collection with one point per document holding all its chunk
vectors, scored by Qdrant's MAX_SIM comparator. Both are exact in local mode and with `exact=True` on a server (an
HNSW search otherwise); docs/stores.md says which matched `exact_search`. int8 codes are kept in a `uint8` collection
as code + 128 and queried with the signed codes, so a score is the exact integer dot product plus 128·sum(query),
which is subtracted again (verified in local mode).
"""

from __future__ import annotations

import os
import re
import threading
import uuid
from collections.abc import Sequence

import numpy as np

from contextembed.stores.base import (
    ChunkHit,
    DocumentHit,
    DocumentVectors,
    StoreInfo,
    VectorStore,
    Where,
    _checked_where,
    assemble_documents,
    metadata_tags,
    where_tags,
)
from contextembed.modeling import check_count
from contextembed.ranking import hit_order, read_ranked

try:
    from qdrant_client import QdrantClient, models
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("the Qdrant store needs qdrant-client: pip install 'contextembed[qdrant]'") from error

DOCUMENT_SEARCHES = ("groups", "multivector")
NAMESPACE = uuid.UUID("6f1d3c1e-7c55-4d0a-9c9b-2f7f3c8b1a42")  # point ids: uuid5 of (document, write, chunk)
PAYLOAD = ["doc_id", "chunk", "start", "end", "text", "metadata"]


def _match(key: str, values) -> models.FieldCondition:
    return models.FieldCondition(key=key, match=models.MatchAny(any=list(values)))


def _point_id(*parts) -> str:
    return str(uuid.uuid5(NAMESPACE, "\x1f".join(map(str, parts))))


class QdrantStore(VectorStore):
    def __init__(self, location: str, collection: str = "contextembed", *, exact: bool = True,
                 document_search: str = "groups"):
        if document_search not in DOCUMENT_SEARCHES:
            raise ValueError(f"document_search must be one of {DOCUMENT_SEARCHES}, got {document_search!r}")
        if not re.fullmatch(r"[A-Za-z0-9_-]+", collection):
            raise ValueError(f"collection must be letters, digits, _ or -, got {collection!r}")
        self.uri = f"qdrant://{location}?collection={collection}"
        server = re.fullmatch(r"([A-Za-z0-9.-]+):(\d+)", location)  # HOST:PORT; anything else is a local folder
        self.server = server is not None
        if server:
            self.client = QdrantClient(host=server[1], port=int(server[2]), api_key=os.environ.get("QDRANT_API_KEY"),
                                       https=False)
        else:
            self.client = QdrantClient(path=location)
        self.name, self.exact, self.document_search = collection, exact, document_search
        self._lock = threading.RLock()  # local mode lets one client use a folder: its writers take turns
        self.docs_name, self.info_name, self.journal_name = (f"{collection}__{p}" for p in ("docs", "info", "journal"))
        if self.client.collection_exists(self.journal_name):
            self._recover()

    def close(self) -> None:
        self.client.close()

    # --- info and creation ------------------------------------------------------------------------------------
    def _read_info(self) -> StoreInfo | None:
        if not self.client.collection_exists(self.info_name):
            return None
        points, _ = self.client.scroll(self.info_name, limit=1, with_payload=True)
        return StoreInfo.from_dict(points[0].payload) if points else None

    def _create(self, info: StoreInfo) -> None:
        datatype = models.Datatype.UINT8 if info.precision == "int8" else models.Datatype.FLOAT32
        vectors = models.VectorParams(size=info.dim, distance=models.Distance.DOT, datatype=datatype)
        if not self.client.collection_exists(self.name):
            self.client.create_collection(self.name, vectors_config=vectors)
            for key in ("doc_id", "tags", "write"):  # a server filters on these; local mode scans anyway
                if self.server:
                    self.client.create_payload_index(self.name, key, models.PayloadSchemaType.KEYWORD)
        if self.document_search == "multivector" and not self.client.collection_exists(self.docs_name):
            self.client.create_collection(self.docs_name, vectors_config=models.VectorParams(
                size=info.dim, distance=models.Distance.DOT, datatype=datatype,
                multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM)))
        for name in (self.journal_name, self.info_name):
            if not self.client.collection_exists(name):
                self.client.create_collection(name, vectors_config=models.VectorParams(size=1,
                                                                                       distance=models.Distance.DOT))
        # The info point is written last: a store whose creation died has none and is created again.
        self.client.upsert(self.info_name, [models.PointStruct(id=1, vector=[0.0], payload=info.to_dict())])

    def _stored(self, vectors: np.ndarray) -> list:
        """Vectors as Qdrant keeps them: floats, or int8 codes shifted into uint8."""
        if self.info.precision == "int8":
            return (np.asarray(vectors, np.int16) + 128).tolist()
        return np.asarray(vectors, np.float32).tolist()

    # --- journaled writes -------------------------------------------------------------------------------------
    def _write(self, documents: list[DocumentVectors], replace: bool) -> None:
        with self._lock:
            self._journaled_write(documents, replace)

    def _journaled_write(self, documents: list[DocumentVectors], replace: bool) -> None:
        write = uuid.uuid4().hex
        ids = [d.id for d in documents]
        expected = sum(len(d.chunks) for d in documents)
        self.client.upsert(self.journal_name, [models.PointStruct(
            id=_point_id("journal", write), vector=[0.0],
            payload={"write": write, "documents": ids, "chunks": expected, "replace": replace})])
        points = []
        for document in documents:
            tags = metadata_tags(document.metadata)
            for i, (chunk, vector) in enumerate(zip(document.chunks, self._stored(document.vectors))):
                points.append(models.PointStruct(id=_point_id(document.id, write, i), vector=vector, payload={
                    "doc_id": document.id, "chunk": i, "start": chunk.start, "end": chunk.end, "text": chunk.text,
                    "content_hash": document.content_hash, "metadata": document.metadata, "tags": tags,
                    "write": write, "pending": True}))
        for first in range(0, len(points), 256):
            self.client.upsert(self.name, points[first : first + 256])
        if self.document_search == "multivector":
            self.client.upsert(self.docs_name, [models.PointStruct(
                id=_point_id(d.id, write), vector=self._stored(d.vectors),
                payload={"doc_id": d.id, "tags": metadata_tags(d.metadata), "write": write, "pending": True})
                for d in documents])
        self._commit(write, ids)

    def _commit(self, write: str, ids: list[str]) -> None:
        """Old chunks of these documents out, this write's chunks visible, journal entry gone (each step redoable)."""
        for name in self._collections():
            self.client.delete(name, models.FilterSelector(filter=models.Filter(
                must=[_match("doc_id", ids)], must_not=[models.FieldCondition(
                    key="write", match=models.MatchValue(value=write))])))
            self.client.set_payload(name, {"pending": False}, points=models.Filter(
                must=[models.FieldCondition(key="write", match=models.MatchValue(value=write))]))
        self.client.delete(self.journal_name, [_point_id("journal", write)])

    def _recover(self) -> None:
        """Finish or undo the writes a dead writer left in the journal."""
        entries, _ = self.client.scroll(self.journal_name, limit=10_000, with_payload=True)
        for entry in entries:
            write, ids = entry.payload["write"], entry.payload["documents"]
            mine = models.Filter(must=[models.FieldCondition(key="write", match=models.MatchValue(value=write))])
            present = self.client.count(self.name, count_filter=mine, exact=True).count
            if present == entry.payload["chunks"] and (self.document_search != "multivector" or self.client.count(
                    self.docs_name, count_filter=mine, exact=True).count == len(ids)):
                self._commit(write, ids)
            else:
                for name in self._collections():
                    self.client.delete(name, models.FilterSelector(filter=mine))
                self.client.delete(self.journal_name, [entry.id])

    def _collections(self) -> list[str]:
        return [self.name] + ([self.docs_name] if self.document_search == "multivector" else [])

    def _delete(self, ids: list[str]) -> None:
        with self._lock:
            for name in self._collections():
                self.client.delete(name, models.FilterSelector(filter=models.Filter(must=[_match("doc_id", ids)])))

    # --- search -----------------------------------------------------------------------------------------------
    def _filter(self, where: Where | None) -> models.Filter:
        return models.Filter(must=[_match("tags", group) for group in where_tags(where or {})],
                             must_not=[models.FieldCondition(key="pending", match=models.MatchValue(value=True))])

    def _query(self, query: np.ndarray) -> tuple[list[float], float]:
        """The query as Qdrant takes it, and the offset to subtract from its scores (int8: 128·sum(query))."""
        if self.info.precision == "int8":
            return np.asarray(query, np.float64).tolist(), 128.0 * float(np.sum(query, dtype=np.int64))
        return np.asarray(query, np.float32).tolist(), 0.0

    @property
    def _params(self) -> models.SearchParams | None:
        """Exact search on a server (local mode always searches exactly and takes no parameters)."""
        return models.SearchParams(exact=self.exact) if self.server else None

    def _hit(self, point, offset: float) -> ChunkHit:
        p = point.payload
        return ChunkHit(p["doc_id"], float(point.score) - offset, p["chunk"], p["start"], p["end"], p["text"],
                        p.get("metadata") or {})

    def _top_chunks(self, query: np.ndarray, k: int, where: Where | None) -> list[ChunkHit]:
        vector, offset = self._query(query)
        points = self.client.query_points(self.name, query=vector, limit=k, query_filter=self._filter(where),
                                          with_payload=PAYLOAD, search_params=self._params).points
        return [self._hit(p, offset) for p in points]

    def search_documents(self, query: np.ndarray, k: int = 10, where: Where | None = None) -> list[DocumentHit]:
        check_count(k, "k")
        query = self._checked_query(query)
        where = _checked_where(where)
        return read_ranked(lambda limit: self._documents(query, limit, where), k)[0][:k]

    def _documents(self, query: np.ndarray, limit: int, where: Where | None) -> list[DocumentHit]:
        """The `limit` best documents by Qdrant's ranking, each with its best chunk (the lowest index among equal)."""
        vector, offset = self._query(query)
        if self.document_search == "multivector":
            documents = self.client.query_points(self.docs_name, query=[vector], limit=limit,
                                                 query_filter=self._filter(where), with_payload=["doc_id"],
                                                 search_params=self._params).points
            return [DocumentHit(d.payload["doc_id"], float(d.score) - offset,
                                self._best_chunk(query, d.payload["doc_id"])) for d in documents]
        groups = self.client.query_points_groups(self.name, query=vector, group_by="doc_id", limit=limit, group_size=2,
                                                 query_filter=self._filter(where), with_payload=PAYLOAD,
                                                 search_params=self._params).groups
        hits = []
        for group in groups:
            best = [self._hit(point, offset) for point in group.hits]
            # Two chunks of the document tie for best: ask for all of its chunks, and the rule picks.
            chunk = self._best_chunk(query, group.id) if len(best) > 1 and best[0].score == best[1].score else best[0]
            hits.append(DocumentHit(group.id, chunk.score, chunk))
        return hits

    def _best_chunk(self, query: np.ndarray, document: str) -> ChunkHit:
        vector, offset = self._query(query)
        only = self._filter(None)
        only.must = [_match("doc_id", [document])]
        exact = models.SearchParams(exact=True) if self.server else None
        points = self.client.query_points(self.name, query=vector, limit=max(1, self.count_chunks(document)),
                                          query_filter=only, with_payload=PAYLOAD, search_params=exact).points
        return min((self._hit(point, offset) for point in points), key=hit_order)

    # --- bookkeeping ------------------------------------------------------------------------------------------
    def fetch_documents(self, ids: Sequence[str]) -> list[DocumentVectors]:
        ids = list(ids)
        if not ids or not self.client.collection_exists(self.name):
            return []
        condition = self._filter(None)
        condition.must = [_match("doc_id", ids)]  # a keyword payload index on a server
        codes = self.info.precision == "int8"
        rows, offset = [], None
        while True:
            points, offset = self.client.scroll(self.name, scroll_filter=condition, limit=1024, offset=offset,
                                                with_payload=True, with_vectors=True)
            for p in points:
                vector = np.asarray(p.vector, np.float32)
                vector = (vector - 128).astype(np.int8) if codes else vector  # stored as code + 128
                rows.append((p.payload["doc_id"], p.payload["chunk"], p.payload["start"], p.payload["end"],
                             p.payload["text"], p.payload["content_hash"], p.payload.get("metadata") or {}, vector))
            if offset is None:
                return assemble_documents(rows, ids)

    def document_hashes(self, ids: Sequence[str] | None = None) -> dict[str, str]:
        if not self.client.collection_exists(self.name) or (ids is not None and not ids):
            return {}
        condition = self._filter(None)
        if ids is not None:
            condition.must = [_match("doc_id", list(ids))]
        hashes, offset = {}, None
        while True:
            points, offset = self.client.scroll(self.name, scroll_filter=condition, limit=1024, offset=offset,
                                                with_payload=["doc_id", "content_hash"], with_vectors=False)
            hashes.update((p.payload["doc_id"], p.payload["content_hash"]) for p in points)
            if offset is None:
                return hashes

    def count_chunks(self, document: str | None = None) -> int:
        if not self.client.collection_exists(self.name):
            return 0
        condition = self._filter(None)
        if document is not None:
            condition.must = [_match("doc_id", [document])]
        return self.client.count(self.name, count_filter=condition, exact=True).count
