"""Vector databases as stores of whole documents' chunk vectors, opened by URI.

| URI | store |
|---|---|
| `lancedb:///path/to/folder?table=NAME` | LanceDB, embedded on a folder (`pip install 'contextembed[lancedb]'`) |
| `qdrant:///path/to/folder?collection=NAME` | Qdrant's embedded local mode (`contextembed[qdrant]`) |
| `qdrant://HOST:PORT?collection=NAME` | a Qdrant server or cluster (API key: `$QDRANT_API_KEY`) |
| `pgserver:///path/to/folder?table=NAME` | an embedded PostgreSQL with pgvector, started on a folder (`contextembed[postgres]`) |
| `postgresql://USER:PASSWORD@HOST:PORT/DB?table=NAME` | your PostgreSQL server with pgvector (`contextembed[postgres]`) |

A path after `//` may be relative (`lancedb://stores/docs`) or absolute (`lancedb:///srv/docs`). Every URI also
takes `exact=0` (search through the store's ANN index when it has one; exact brute force otherwise and by default),
and Qdrant's `document_search=multivector`. See `base` for the interface every store implements.
"""

from __future__ import annotations

from contextembed.stores.base import (
    ChunkHit,
    DocumentHit,
    DocumentVectors,
    StoreInfo,
    VectorStore,
    content_hash,
)
from contextembed.stores.uri import SCHEMES, StoreURI, is_store_uri, parse_store_uri, redact


def open_store(uri: str) -> VectorStore:
    """The store a URI names (its extra installed); it may not exist yet: `ensure` creates it on first write."""
    parsed = parse_store_uri(uri)
    options = dict(parsed.options)
    if parsed.scheme == "lancedb":
        from contextembed.stores.lancedb import LanceStore

        return LanceStore(parsed.location, **options)
    if parsed.scheme == "qdrant":
        from contextembed.stores.qdrant import QdrantStore

        return QdrantStore(parsed.location, **options)
    from contextembed.stores.postgres import PostgresStore, embedded_server_uri

    if parsed.scheme == "pgserver":
        return PostgresStore(embedded_server_uri(parsed.location), uri=uri, **options)
    return PostgresStore(parsed.location, uri=redact(uri), **options)


__all__ = ["SCHEMES", "ChunkHit", "DocumentHit", "DocumentVectors", "StoreInfo", "StoreURI", "VectorStore",
           "content_hash", "is_store_uri", "open_store", "parse_store_uri", "redact"]
