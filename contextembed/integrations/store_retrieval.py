"""What the frameworks' retrievers on contextembed's stores share: one query through `contextembed.search.search`,
and each hit as the framework sees it (its answer chunk's text) with the rest in its metadata.

One switch, `evidence=N` (0 by default), adds each hit's evidence: `metadata["evidence"]` (its N next-best chunks,
each `{"index", "score", "start", "end", "text"}`) and `metadata["reader_view"]` (the answer and its evidence in
document order, gaps marked): the minimal context a RAG chain can pass on instead of one chunk. The retrievers are
`ContextualStoreRetriever` in `contextembed.integrations.langchain`, `.llamaindex` and `.haystack`.
"""

from __future__ import annotations

import os

from contextembed.ranking import DocumentHit
from contextembed.search import check_evidence, reader_view, search


class StoreSearch:
    """A store (a `VectorStore`, a store URI or an index folder's path) and the model that made its vectors (a loaded
    `ContextEmbedder`, a checkpoint path or Hub id; default: the model the store names), opened on first use."""

    def __init__(self, store, model=None, *, k: int = 4, evidence: int = 0, where: dict | None = None):
        from contextembed.modeling import check_count

        self.k, self.evidence, self.where = check_count(k, "k"), check_evidence(evidence), where
        self._store, self._model = store, model

    @property
    def store(self):
        from contextembed.stores import VectorStore, open_store

        if not isinstance(self._store, VectorStore):
            self._store = open_store(self._store)
        return self._store

    @property
    def model(self):
        import contextembed

        if self._model is None or isinstance(self._model, (str, os.PathLike)):  # a name or a checkpoint path
            named = self.store.info.model
            self._model = contextembed.load(self._model or (None if named == "default" else named))
        return self._model

    def __call__(self, query: str, k: int | None = None) -> list[DocumentHit]:
        """The best documents for `query`, each with its answer (and evidence, when switched on)."""
        info = self.store.info
        vector = self.model.encode_queries([query], output_dim=info.dim, precision=info.precision,
                                           show_progress_bar=False)[0]
        return search(self.store, vector, k or self.k, evidence=self.evidence, where=self.where)


def hit_metadata(hit: DocumentHit, evidence: bool = False) -> dict:
    """A hit's metadata for a framework: the document's own metadata, then its id (`document`), the answer chunk's
    `chunk_index`, `start`, `end` and `score`; with `evidence` (the switch on), `evidence` and `reader_view`.

    >>> from contextembed.ranking import ChunkHit
    >>> answer = ChunkHit("lease.txt", 0.8, 3, 40, 52, "She pays it.", {"path": "lease.txt"})
    >>> hit_metadata(DocumentHit("lease.txt", 0.8, answer))
    {'path': 'lease.txt', 'document': 'lease.txt', 'chunk_index': 3, 'start': 40, 'end': 52, 'score': 0.8}
    >>> opening = ChunkHit("lease.txt", 0.5, 0, 0, 19, "Jane is the tenant.")
    >>> meta = hit_metadata(DocumentHit("lease.txt", 0.8, answer, (opening,)), evidence=True)
    >>> meta["evidence"]
    [{'index': 0, 'score': 0.5, 'start': 0, 'end': 19, 'text': 'Jane is the tenant.'}]
    >>> meta["reader_view"]
    'Jane is the tenant. […] «She pays it.»'
    """
    meta = {**hit.chunk.metadata, "document": hit.document, "chunk_index": hit.chunk.index, "start": hit.chunk.start,
            "end": hit.chunk.end, "score": hit.score}
    if evidence:
        meta["evidence"] = [chunk.to_dict(score=True) for chunk in hit.evidence]
        meta["reader_view"] = reader_view(hit)
    return meta
