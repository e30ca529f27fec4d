"""PostgreSQL with pgvector: chunks as rows of a table, document MaxSim in SQL, writes in transactions.

- `postgresql://USER:PASSWORD@HOST:PORT/DB?table=NAME` — a server you run (the `vector` extension must be
  available: `CREATE EXTENSION vector` is run if it is missing, which needs the right to create extensions);
- `pgserver:///path/to/folder?table=NAME` — an embedded PostgreSQL with pgvector (PyPI `pgserver`), started on a data
  folder and stopped when the last process using it exits.

Table `NAME`: one row per chunk (`doc_id`, `chunk`, offsets, `text`, `content_hash`, `metadata jsonb`,
`embedding vector(D)`); table `NAME_info`: what the vectors are. `replace` deletes a document's rows and inserts
the new ones in one transaction, so no reader sees a mix and a writer killed half way changes nothing.
`search_documents` is one SQL query (`DISTINCT ON (doc_id)` over the chunks ordered by inner product: exact
MaxSim). `create_ann_index` adds an HNSW index (`vector_ip_ops`), used by chunk search when the store is opened with
`exact=False`. Float32 `vector` columns only: the pgvector in `pgserver` (0.6) has no `halfvec` or `bit`.
"""

from __future__ import annotations

import json
import threading
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
)
from contextembed.modeling import check_count
from contextembed.stores.uri import redact

try:
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg import sql
    from psycopg.types.json import Jsonb
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("the PostgreSQL store needs psycopg and pgvector: pip install 'contextembed[postgres]'") from error


def embedded_server_uri(folder: str) -> str:
    """Start (or join) an embedded PostgreSQL with pgvector on `folder`; returns its connection URI."""
    try:
        import pgserver
    except ImportError as error:
        raise ImportError("pgserver:// stores need the embedded PostgreSQL: pip install 'contextembed[postgres]'"
                          ) from error
    return pgserver.get_server(folder, cleanup_mode="stop").get_uri()


class PostgresStore(VectorStore):
    def __init__(self, conninfo: str, table: str = "contextembed", *, exact: bool = True, ef_search: int = 100,
                 uri: str | None = None):
        if not table.isidentifier():
            raise ValueError(f"table must be an identifier (letters, digits, _), got {table!r}")
        self.uri = redact(uri or conninfo)
        self.table, self.exact, self.ef_search = table, exact, ef_search
        self.connection = psycopg.connect(conninfo, autocommit=True)
        self._lock = threading.Lock()  # one connection: statements of concurrent callers take turns
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
            if cursor.fetchone() is None:
                cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(self.connection)
        self.chunks_table = sql.Identifier(table)
        self.info_table = sql.Identifier(f"{table}_info")

    def close(self) -> None:
        self.connection.close()

    def _query(self, statement, params=(), fetch: bool = True):
        with self._lock, self.connection.cursor() as cursor:
            cursor.execute(statement, params)
            return cursor.fetchall() if fetch else None

    def _read_info(self) -> StoreInfo | None:
        exists = self._query("SELECT to_regclass(%s) IS NOT NULL", (f"{self.table}_info",))[0][0]
        if not exists:
            return None
        rows = self._query(sql.SQL("SELECT info FROM {}").format(self.info_table))
        return StoreInfo.from_dict(rows[0][0]) if rows else None

    def _create(self, info: StoreInfo) -> None:
        if info.precision != "float32":
            raise ValueError("the PostgreSQL store keeps float32 vectors (pgvector's vector type): encode with "
                             "--precision float32")
        with self._lock, self.connection.transaction(), self.connection.cursor() as cursor:
            cursor.execute(sql.SQL(
                'CREATE TABLE IF NOT EXISTS {} (doc_id text NOT NULL, chunk integer NOT NULL, start integer NOT NULL, '
                '"end" integer NOT NULL, text text NOT NULL, content_hash text NOT NULL, metadata jsonb NOT NULL, '
                'embedding vector({}) NOT NULL, PRIMARY KEY (doc_id, chunk))').format(
                    self.chunks_table, sql.Literal(info.dim)))
            cursor.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} (info jsonb NOT NULL)").format(self.info_table))
            cursor.execute(sql.SQL("INSERT INTO {} VALUES (%s)").format(self.info_table), (json.dumps(info.to_dict()),))

    def _write(self, documents: list[DocumentVectors], replace: bool) -> None:
        columns = sql.SQL('(doc_id, chunk, start, "end", text, content_hash, metadata, embedding)')
        with self._lock, self.connection.transaction(), self.connection.cursor() as cursor:
            if replace:
                cursor.execute(sql.SQL("DELETE FROM {} WHERE doc_id = ANY(%s)").format(self.chunks_table),
                               ([d.id for d in documents],))
            with cursor.copy(sql.SQL("COPY {} {} FROM STDIN WITH (FORMAT BINARY)").format(
                    self.chunks_table, columns)) as copy:
                copy.set_types(["text", "int4", "int4", "int4", "text", "text", "jsonb", "vector"])
                for document in documents:
                    meta = Jsonb(document.metadata)
                    for i, (chunk, vector) in enumerate(zip(document.chunks, document.vectors)):
                        copy.write_row((document.id, i, chunk.start, chunk.end, chunk.text, document.content_hash,
                                        meta, np.asarray(vector, np.float32)))

    def _delete(self, ids: list[str]) -> None:
        self._query(sql.SQL("DELETE FROM {} WHERE doc_id = ANY(%s)").format(self.chunks_table), (ids,), fetch=False)

    def _filter(self, where: Where | None) -> tuple[sql.Composable, list]:
        """`metadata @> ...` for every key (any of a list of values): a WHERE clause and its parameters."""
        if not where:
            return sql.SQL("TRUE"), []
        clauses, params = [], []
        for key, value in where.items():
            values = value if isinstance(value, (list, tuple)) else [value]
            clauses.append(sql.SQL("(") + sql.SQL(" OR ").join(sql.SQL("metadata @> %s::jsonb") for _ in values)
                           + sql.SQL(")"))
            params += [json.dumps({key: v}) for v in values]
        return sql.SQL(" AND ").join(clauses), params

    def _top_chunks(self, query: np.ndarray, k: int, where: Where | None) -> list[ChunkHit]:
        condition, params = self._filter(where)
        # The tie rule in SQL: equal scores by document id in code-point order (COLLATE "C"), then chunk. The HNSW
        # index answers only `ORDER BY embedding <#> q LIMIT k`: there the base class settles ties.
        statement = sql.SQL(
            'SELECT doc_id, chunk, start, "end", text, metadata, -(embedding <#> %s) AS score FROM {} WHERE {} '
            "ORDER BY embedding <#> %s{} LIMIT %s").format(
                self.chunks_table, condition, sql.SQL(', doc_id COLLATE "C", chunk' if self.exact else ""))
        vector = np.asarray(query, np.float32)
        with self._lock, self.connection.transaction(), self.connection.cursor() as cursor:
            # Exact: a sequential scan; otherwise the HNSW index (if any) answers the ORDER BY.
            cursor.execute("SET LOCAL enable_indexscan = %s" % ("off" if self.exact else "on"))
            # pgvector takes ef_search in 1..1000; an HNSW search returns at most that many rows.
            cursor.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(
                sql.Literal(min(1000, max(self.ef_search, k)))))
            cursor.execute(statement, [vector, *params, vector, k])
            rows = cursor.fetchall()
        return [ChunkHit(d, float(s), c, a, b, t, m) for d, c, a, b, t, m, s in rows]

    def search_documents(self, query: np.ndarray, k: int = 10, where: Where | None = None) -> list[DocumentHit]:
        """Exact MaxSim in one SQL query (with an HNSW index and `exact=False`, through ranked chunks instead)."""
        if not self.exact:
            return super().search_documents(query, k, where)
        check_count(k, "k")
        vector = self._checked_query(query).astype(np.float32)
        condition, params = self._filter(_checked_where(where))
        # Each document's best chunk (the lower chunk index among equal scores), then the documents by the tie rule.
        statement = sql.SQL(
            'SELECT * FROM (SELECT DISTINCT ON (doc_id) doc_id, chunk, start, "end", text, metadata, '
            "-(embedding <#> %s) AS score FROM {} WHERE {} ORDER BY doc_id, embedding <#> %s, chunk) AS best "
            'ORDER BY score DESC, doc_id COLLATE "C" LIMIT %s').format(self.chunks_table, condition)
        rows = self._query(statement, [vector, *params, vector, k])
        return [DocumentHit(d, float(s), ChunkHit(d, float(s), c, a, b, t, m)) for d, c, a, b, t, m, s in rows]

    def fetch_documents(self, ids: Sequence[str]) -> list[DocumentVectors]:
        ids = list(ids)
        if not ids or self._known_info() is None:
            return []
        rows = self._query(sql.SQL('SELECT doc_id, chunk, start, "end", text, content_hash, metadata, embedding '
                                   "FROM {} WHERE doc_id = ANY(%s)").format(self.chunks_table), (ids,))  # primary key
        return assemble_documents(((*row[:7], row[7].to_numpy().astype(np.float32)) for row in rows), ids)

    def document_hashes(self, ids: Sequence[str] | None = None) -> dict[str, str]:
        if self._known_info() is None or (ids is not None and not ids):
            return {}
        query = sql.SQL("SELECT DISTINCT doc_id, content_hash FROM {}").format(self.chunks_table)
        if ids is None:
            return dict(self._query(query))
        return dict(self._query(query + sql.SQL(" WHERE doc_id = ANY(%s)"), (list(ids),)))

    def count_chunks(self, document: str | None = None) -> int:
        if self._known_info() is None:
            return 0
        if document is None:
            return self._query(sql.SQL("SELECT count(*) FROM {}").format(self.chunks_table))[0][0]
        return self._query(sql.SQL("SELECT count(*) FROM {} WHERE doc_id = %s").format(self.chunks_table),
                           (document,))[0][0]

    def create_ann_index(self, m: int = 16, ef_construction: int = 64) -> None:
        """An HNSW index on the embeddings for inner product (searched with `exact=False`)."""
        self._query(sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING hnsw (embedding vector_ip_ops) "
                            "WITH (m = {}, ef_construction = {})").format(
            sql.Identifier(f"{self.table}_hnsw"), self.chunks_table, sql.Literal(m), sql.Literal(ef_construction)),
            fetch=False)
