"""Haystack: a document embedder that encodes each source document's splits together, and a text embedder.

    pip install "contextembed[haystack]"

`DocumentSplitter` writes `meta["source_id"]` (the parent document's id) and `meta["split_id"]` (the split's
place in it) on every split; `ContextualDocumentEmbedder` groups the documents it receives by the first and
orders them by the second, encodes each source document once, and returns the documents with their contextual
`embedding`. `ContextualTextEmbedder` embeds queries. Both serialise with the pipeline (`Pipeline.dumps()`).

    pipeline.add_component("splitter", DocumentSplitter(split_by="word", split_length=120))
    pipeline.add_component("embedder", ContextualDocumentEmbedder())
    pipeline.add_component("writer", DocumentWriter(document_store))

`ContextualStoreRetriever` retrieves from a contextembed store given by URI or path (so a pipeline serialises):
each `Document` is a found document's answer chunk; with `evidence=N`, its `meta` also holds the N chunks that make
the answer verifiable and their `reader_view`.
"""

from __future__ import annotations

import dataclasses

try:
    from haystack import Document, component, default_from_dict, default_to_dict
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError('the Haystack integration needs haystack-ai: pip install "contextembed[haystack]"') from error

import contextembed
from contextembed.integrations.grouping import MISSING_SOURCE, MissingSource, encode_grouped
from contextembed.integrations.store_retrieval import StoreSearch, hit_metadata
from contextembed.modeling import EmptyChunks
from contextembed.mixing import check_local_mix

EMPTY_CHUNKS = ("error", "zero")


@component
class ContextualDocumentEmbedder:
    """Embed split documents in the context of their source document.

    Args:
        model: a checkpoint path or Hub id; empty for the default model.
        source_id_field: the meta field naming the source document (`DocumentSplitter`'s `source_id`).
        order_field: the meta field giving the split's place in its source (`DocumentSplitter`'s `split_id`).
        output_dim: Matryoshka size of every vector (the checkpoint's default when `None`).
        missing_source: documents without the source field: `"error"` (default) or `"alone"` (one-chunk
            documents, for unsplit documents).
        empty_chunks: a split with no text (`DocumentSplitter` can emit whitespace-only splits): `"error"`
            (default) or `"zero"` (an all-zero embedding; the document is still returned and stored).
        local_mix: `encode_documents`' `local_mix` (each split's vector mixed with the split encoded alone; 0, the
            default, is one pass).
    """

    def __init__(self, model: str = "", source_id_field: str = "source_id", order_field: str = "split_id",
                 output_dim: int | None = None, missing_source: MissingSource = "error",
                 empty_chunks: EmptyChunks = "error", local_mix: float = 0.0):
        if missing_source not in MISSING_SOURCE:
            raise ValueError(f"missing_source must be one of {MISSING_SOURCE}, got {missing_source!r}")
        if empty_chunks not in EMPTY_CHUNKS:
            raise ValueError(f"empty_chunks must be one of {EMPTY_CHUNKS}, got {empty_chunks!r}")
        self.model, self.source_id_field, self.order_field = _model_name(model), source_id_field, order_field
        self.output_dim, self.missing_source, self.empty_chunks = output_dim, missing_source, empty_chunks
        self.local_mix = check_local_mix(local_mix)
        self._model = None

    def warm_up(self) -> None:
        if self._model is None:
            self._model = contextembed.load(self.model)

    def to_dict(self) -> dict:
        return default_to_dict(self, model=self.model, source_id_field=self.source_id_field,
                               order_field=self.order_field, output_dim=self.output_dim,
                               missing_source=self.missing_source, empty_chunks=self.empty_chunks,
                               local_mix=self.local_mix)

    @classmethod
    def from_dict(cls, data: dict) -> ContextualDocumentEmbedder:
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict:
        if not isinstance(documents, list) or not all(isinstance(d, Document) for d in documents):
            raise ValueError("ContextualDocumentEmbedder expects a list of Documents, got "
                             f"{type(documents).__name__}")
        if not documents:
            return {"documents": []}
        self.warm_up()
        vectors = encode_grouped(self._model, [d.content or "" for d in documents],
                                 [d.meta.get(self.source_id_field) for d in documents],
                                 [d.meta.get(self.order_field) for d in documents],
                                 missing_source=self.missing_source, empty_chunks=self.empty_chunks,
                                 what="document", output_dim=self.output_dim, local_mix=self.local_mix)
        return {"documents": [dataclasses.replace(d, embedding=v.tolist()) for d, v in zip(documents, vectors)]}


@component
class ContextualTextEmbedder:
    """Embed a query (with the checkpoint's query prefix) for an embedding retriever."""

    def __init__(self, model: str = "", output_dim: int | None = None):
        self.model, self.output_dim = _model_name(model), output_dim
        self._model = None

    def warm_up(self) -> None:
        if self._model is None:
            self._model = contextembed.load(self.model)

    def to_dict(self) -> dict:
        return default_to_dict(self, model=self.model, output_dim=self.output_dim)

    @classmethod
    def from_dict(cls, data: dict) -> ContextualTextEmbedder:
        return default_from_dict(cls, data)

    @component.output_types(embedding=list[float])
    def run(self, text: str) -> dict:
        if not isinstance(text, str):
            raise ValueError("ContextualTextEmbedder expects a string; use ContextualDocumentEmbedder for Documents, "
                             f"got {type(text).__name__}")
        self.warm_up()
        return {"embedding": self._model.encode_queries([text], output_dim=self.output_dim)[0].tolist()}


def _model_name(model) -> str:
    # A pipeline serialises its components, so they take the model by name (a path or Hub id; "" is the default).
    if not isinstance(model, str):
        raise ValueError(f"model must be a checkpoint path or Hub id ('' for the default model), got "
                         f"{type(model).__name__}: a Haystack component is serialised with its pipeline")
    return model


@component
class ContextualStoreRetriever:
    """Retrieve from a contextembed store.

    Args:
        store: a store URI or an index folder's path.
        model: the model that made the store's vectors (a checkpoint path or Hub id); empty: the one the store names.
        top_k: documents per query.
        evidence: the switch: N > 0 puts each document's N next-best chunks and its reader view in `meta`.
        where: a metadata filter, as `VectorStore.search_documents` takes it.
    """

    def __init__(self, store: str, model: str = "", top_k: int = 4, evidence: int = 0, where: dict | None = None):
        self.store, self.model, self.top_k, self.evidence, self.where = store, model, top_k, evidence, where
        self._search = StoreSearch(store, model or None, k=top_k, evidence=evidence, where=where)

    def warm_up(self) -> None:
        self._search.model  # noqa: B018 - loads it

    def to_dict(self) -> dict:
        return default_to_dict(self, store=self.store, model=self.model, top_k=self.top_k, evidence=self.evidence,
                               where=self.where)

    @classmethod
    def from_dict(cls, data: dict) -> ContextualStoreRetriever:
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(self, query: str, top_k: int | None = None) -> dict:
        on = self.evidence > 0
        return {"documents": [Document(id=f"{hit.document}#{hit.chunk.index}", content=hit.chunk.text, score=hit.score,
                                       meta=hit_metadata(hit, evidence=on)) for hit in self._search(query, top_k)]}
