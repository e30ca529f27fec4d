"""Keep a store in step with a corpus: embed only what changed, by document id and content hash.

`sync_corpus` compares the corpus with what the store holds: new documents are added, changed ones (another
content hash) replaced, documents gone from the corpus deleted, the rest kept without being embedded again.
Documents are written in batches, each its own unit of work, so an interrupted run keeps the batches it finished and
the next run picks up the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from contextembed.stores.base import DocumentVectors, StoreInfo, VectorStore, content_hash


@dataclass
class SyncReport:
    added: int
    replaced: int
    deleted: int
    kept: int
    chunks_written: int

    def __str__(self) -> str:
        return (f"added {self.added}, replaced {self.replaced}, deleted {self.deleted}, kept {self.kept} documents "
                f"({self.chunks_written} chunk vectors written)")


def plan_sync(stored: dict[str, str], corpus: dict[str, str]) -> tuple[list[str], list[str], list[str], list[str]]:
    """(new, changed, removed, unchanged) document ids, from the stored and the corpus's content hashes.

    >>> plan_sync({"a": "1", "b": "2", "c": "3"}, {"a": "1", "b": "9", "d": "4"})
    (['d'], ['b'], ['c'], ['a'])
    """
    new = sorted(set(corpus) - set(stored))
    changed = sorted(i for i in set(corpus) & set(stored) if corpus[i] != stored[i])
    unchanged = sorted(i for i in set(corpus) & set(stored) if corpus[i] == stored[i])
    return new, changed, sorted(set(stored) - set(corpus)), unchanged


def sync_corpus(store: VectorStore, documents, info: StoreInfo, encode: Callable, *,
                batch_documents: int | None = None, metadata: Callable | None = None) -> SyncReport:
    """Bring `store` in step with `documents` (objects with `.path` and `.text`, as `read_corpus` returns).

    `encode(texts)` returns one result per text with `.embeddings` (one row per chunk, in the store's precision) and
    `.chunks`, as `encode_documents(..., chunker=...)` does; `metadata(document)` gives a document's metadata
    (default: its path). `batch_documents`: documents per write (default: the store's `batch_documents`; a folder
    index is written once, whole).
    """
    store.ensure(info)
    by_id = {d.path: d for d in documents}
    if len(by_id) != len(documents):
        raise ValueError("two documents of the corpus have the same path")
    new, changed, removed, unchanged = plan_sync(store.document_hashes(),
                                                 {i: content_hash(d.text) for i, d in by_id.items()})
    todo = [by_id[i] for i in sorted(new + changed)]
    written = 0
    batch_documents = batch_documents or store.batch_documents or max(len(todo), 1)
    for first in range(0, len(todo), batch_documents):
        batch = todo[first : first + batch_documents]
        results = encode([d.text for d in batch])
        written += store.replace(
            DocumentVectors(d.path, list(r.chunks), r.embeddings, (metadata or _path_metadata)(d), content_hash(d.text))
            for d, r in zip(batch, results))
    store.delete(removed)
    return SyncReport(len(new), len(changed), len(removed), len(unchanged), written)


def _path_metadata(document) -> dict:
    return {"path": document.path}
