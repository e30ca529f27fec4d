"""Vector databases as stores of whole documents' chunk vectors, opened by URI.

| URI | store |
|---|---|
| `PATH` or `file:///path/to/folder` | contextembed's own index: a self-contained folder (no extra needed) |
| `lancedb:///path/to/folder?table=NAME` | LanceDB, embedded on a folder (`pip install 'contextembed[lancedb]'`) |
| `qdrant:///path/to/folder?collection=NAME` | Qdrant's embedded local mode (`contextembed[qdrant]`) |
| `qdrant://HOST:PORT?collection=NAME` | a Qdrant server or cluster (API key: `$QDRANT_API_KEY`) |
| `pgserver:///path/to/folder?table=NAME` | an embedded PostgreSQL with pgvector, started on a folder (`contextembed[postgres]`) |
| `postgresql://USER:PASSWORD@HOST:PORT/DB?table=NAME` | your PostgreSQL server with pgvector (`contextembed[postgres]`) |

A path after `//` may be relative (`lancedb://stores/docs`) or absolute (`lancedb:///srv/docs`). Every database URI
also takes `exact=0` (search through the store's ANN index when it has one; exact brute force otherwise and by default),
and Qdrant's `document_search=multivector`. See `base` for the interface every store implements.
"""

from __future__ import annotations

import os

from contextembed.stores.base import (
    ChunkHit,
    DocumentHit,
    DocumentVectors,
    StoreInfo,
    VectorStore,
    content_hash,
)
from contextembed.stores.uri import SCHEMES, StoreURI, is_store_uri, parse_store_uri, redact


def open_store(uri: str | os.PathLike, *, overwrite: bool = False) -> VectorStore:
    """The store a URI (or a folder index's path) names, its extra installed; it may not exist yet: `ensure` creates
    it on first write. `overwrite` (a folder index only): ignore an index already there, and replace it with the
    first write."""
    if not isinstance(uri, str) or not is_store_uri(uri):
        from contextembed.stores.index import IndexStore

        return IndexStore(os.fspath(uri), overwrite=overwrite)
    parsed = parse_store_uri(uri)
    options = dict(parsed.options)
    if parsed.scheme == "file":
        from contextembed.stores.index import IndexStore

        return IndexStore(parsed.location, overwrite=overwrite, uri=uri)
    if overwrite:
        raise ValueError(f"overwrite replaces a folder index; {redact(uri)} is updated in place (only changed "
                         "documents are written): leave it out")
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
