"""LanceDB: an embedded columnar store on a local folder (`lancedb:///path/to/folder?table=NAME`).

One row per chunk (`doc_id`, `chunk`, offsets, text, content hash, metadata as JSON and as `key=value` tags for
filters, the vector). Every write is one LanceDB commit: `replace` is a `merge_insert` that writes a document's new
chunks and deletes its old ones in the same commit, so a reader sees the table before or after it, never a mix,
and a writer killed half way leaves only the commit before. Search is exact (brute force) unless the store was
opened with `exact=False` and has an ANN index (`create_ann_index`: IVF-PQ or HNSW; recall measured in
docs/stores.md). Scores are dot products (LanceDB reports `1 - dot` as its distance). Float32 vectors only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from contextembed.stores.base import (
    ChunkHit,
    DocumentVectors,
    StoreInfo,
    VectorStore,
    Where,
    assemble_documents,
    metadata_tags,
    where_tags,
)

try:
    import lancedb
    import pyarrow as pa
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("the LanceDB store needs lancedb: pip install 'contextembed[lancedb]'") from error

ANN_INDEXES = ("ivf_pq", "hnsw")


def _quoted(values) -> str:
    return ", ".join("'" + str(v).replace("'", "''") + "'" for v in values)


class LanceStore(VectorStore):
    def __init__(self, path: str | Path, table: str = "contextembed", *, exact: bool = True, nprobes: int = 32,
                 refine_factor: int = 5):
        self.uri = f"lancedb://{path}?table={table}"
        self.db = lancedb.connect(str(path))
        self.name, self.exact, self.nprobes, self.refine_factor = table, exact, nprobes, refine_factor
        self._table = None

    def _names(self) -> set[str]:
        listed = self.db.list_tables()
        return set(getattr(listed, "tables", listed))

    @property
    def table(self):
        if self._table is None:
            self._table = self.db.open_table(self.name)
        return self._table

    def _read_info(self) -> StoreInfo | None:
        if f"{self.name}__info" not in self._names():
            return None
        rows = self.db.open_table(f"{self.name}__info").to_arrow().to_pylist()
        return StoreInfo.from_dict(json.loads(rows[0]["info"])) if rows else None

    def _create(self, info: StoreInfo) -> None:
        if info.precision != "float32":
            raise ValueError("the LanceDB store keeps float32 vectors: encode with --precision float32")
        schema = pa.schema([("key", pa.string()), ("doc_id", pa.string()), ("chunk", pa.int32()),
                            ("start", pa.int64()), ("end", pa.int64()), ("text", pa.string()),
                            ("content_hash", pa.string()), ("metadata", pa.string()), ("tags", pa.list_(pa.string())),
                            ("vector", pa.list_(pa.float32(), info.dim))])
        self._table = self.db.create_table(self.name, schema=schema, exist_ok=True)
        from lancedb.index import BTree

        self._table.create_index("doc_id", config=BTree(), replace=True)  # documents fetched by id (evidence)
        # The info table is written last: a store whose creation died has no info and is created again.
        self.db.create_table(f"{self.name}__info", data=[{"info": json.dumps(info.to_dict())}], mode="overwrite")

    def _rows(self, documents: list[DocumentVectors]) -> pa.Table:
        rows = []
        for document in documents:
            meta, tags = json.dumps(document.metadata, ensure_ascii=False), metadata_tags(document.metadata)
            for i, (chunk, vector) in enumerate(zip(document.chunks, np.asarray(document.vectors, np.float32))):
                rows.append({"key": json.dumps([document.id, i]), "doc_id": document.id, "chunk": i,
                             "start": chunk.start, "end": chunk.end, "text": chunk.text,
                             "content_hash": document.content_hash, "metadata": meta, "tags": tags, "vector": vector})
        return pa.Table.from_pylist(rows, schema=self.table.schema)

    def _write(self, documents: list[DocumentVectors], replace: bool) -> None:
        rows = self._rows(documents)
        if not replace:
            self.table.add(rows)
            return
        # One commit: new chunks in, every other chunk of these documents out.
        (self.table.merge_insert("key").when_matched_update_all().when_not_matched_insert_all()
         .when_not_matched_by_source_delete(f"doc_id IN ({_quoted(d.id for d in documents)})").execute(rows))

    def _delete(self, ids: list[str]) -> None:
        self.table.delete(f"doc_id IN ({_quoted(ids)})")

    def _top_chunks(self, query: np.ndarray, k: int, where: Where | None) -> list[ChunkHit]:
        search = self.table.search(np.asarray(query, np.float32)).distance_type("dot").limit(k)
        search = search.select(["doc_id", "chunk", "start", "end", "text", "metadata"])
        if where:
            search = search.where(" AND ".join(f"array_has_any(tags, [{_quoted(group)}])"
                                               for group in where_tags(where)), prefilter=True)
        if self.exact:
            search = search.bypass_vector_index()
        else:
            search = search.nprobes(self.nprobes).refine_factor(self.refine_factor)
        return [ChunkHit(r["doc_id"], 1.0 - float(r["_distance"]), r["chunk"], r["start"], r["end"], r["text"],
                         json.loads(r["metadata"])) for r in search.to_list()]

    def fetch_documents(self, ids: Sequence[str]) -> list[DocumentVectors]:
        ids = list(ids)
        if not ids or self.name not in self._names():
            return []
        where = f"doc_id IN ({_quoted(ids)})"
        rows = self.table.count_rows(where)
        if not rows:
            return []
        found = (self.table.search().where(where).select(["doc_id", "chunk", "start", "end", "text", "content_hash",
                                                          "metadata", "vector"]).limit(rows).to_list())
        rows = ((r["doc_id"], r["chunk"], r["start"], r["end"], r["text"], r["content_hash"], json.loads(r["metadata"]),
                 np.asarray(r["vector"], np.float32)) for r in found)
        return assemble_documents(rows, ids)

    def document_hashes(self, ids: Sequence[str] | None = None) -> dict[str, str]:
        if self.name not in self._names() or (ids is not None and not ids):
            return {}
        where = None if ids is None else f"doc_id IN ({_quoted(ids)})"
        rows = self.table.count_rows(where)
        if not rows:
            return {}
        search = self.table.search()
        if where is not None:
            search = search.where(where)
        table = search.select(["doc_id", "content_hash"]).limit(rows).to_arrow()  # no vectors read
        return dict(zip(table.column("doc_id").to_pylist(), table.column("content_hash").to_pylist()))

    def count_chunks(self, document: str | None = None) -> int:
        if self.name not in self._names():
            return 0
        return self.table.count_rows(None if document is None else f"doc_id = {_quoted([document])}")

    def create_ann_index(self, kind: str = "ivf_pq", **options) -> None:
        """Build an ANN index on the vectors (searched when the store is opened with `exact=False`)."""
        if kind not in ANN_INDEXES:
            raise ValueError(f"kind must be one of {ANN_INDEXES}, got {kind!r}")
        rows = self.count_chunks()
        partitions = options.pop("num_partitions", max(1, min(1024, int(rows ** 0.5))))
        from lancedb.index import IvfHnswSq, IvfPq

        config = (IvfPq if kind == "ivf_pq" else IvfHnswSq)(distance_type="dot", num_partitions=partitions, **options)
        self.table.create_index("vector", config=config, replace=True)
