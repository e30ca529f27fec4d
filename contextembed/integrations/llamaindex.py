"""LlamaIndex: a `BaseEmbedding` that, used as a transformation, encodes each source document's nodes together.

    pip install "contextembed[llamaindex]"

As a transformation (`IngestionPipeline(transformations=[SentenceSplitter(...), ContextualEmbedding()])`, or
called on prebuilt nodes) it groups the nodes by `ref_doc_id`, orders them by `start_char_idx`, encodes each
document once and sets `node.embedding`; both `__call__` and `acall` do this, so `pipeline.run()`,
`await pipeline.arun()` and `num_workers=N` (each worker loads the model once) all keep context. As
`embed_model` it serves queries (`_get_query_embedding`) and embeds any other text as a one-chunk document.

Routes that keep context: an `IngestionPipeline` with this embedding as its last transformation; calling it on
prebuilt nodes; `VectorStoreIndex(nodes, embed_model=emb)` with nodes it already embedded (LlamaIndex never
re-embeds a node that has an embedding); `VectorStoreIndex.from_documents(docs, embed_model=emb,
transformations=[splitter, emb])`. Routes that cannot: `from_documents` or `insert` *without* the embedding in
`transformations` (LlamaIndex then embeds flat batches of texts through `get_text_embedding_batch`).

What is embedded is each node's content under `metadata_mode` (`MetadataMode.NONE` by default: `EMBED` would
repeat the same metadata header inside every chunk of a document, where the document itself is already in view).

`ContextualStoreRetriever` retrieves from a contextembed store: each node is a found document's answer chunk; with
`evidence=N`, its metadata also holds the N chunks that make the answer verifiable and their `reader_view`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

try:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import BaseNode, Document, MetadataMode, NodeRelationship, NodeWithScore, QueryBundle
    from llama_index.core.schema import TextNode
    from pydantic import Field, PrivateAttr
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError('the LlamaIndex integration needs llama-index-core: pip install "contextembed[llamaindex]"'
                      ) from error

import contextembed
from contextembed.integrations.grouping import MISSING_SOURCE, MissingSource, encode_grouped
from contextembed.integrations.store_retrieval import StoreSearch, hit_metadata


class ContextualEmbedding(BaseEmbedding):
    """contextembed as a LlamaIndex embedding model and node transformation.

    Args:
        model: a loaded `ContextEmbedder`, or a checkpoint path or Hub id (empty for the default model, loaded on
            first use, once per process). Stored as LlamaIndex's `model_name` (a loaded model's own path), which is
            what a `num_workers` worker reloads: the weights are never pickled.
        output_dim: Matryoshka size of every vector (the checkpoint's default when `None`).
        metadata_mode: which node metadata is embedded with the text (`MetadataMode.NONE` by default).
        missing_source: nodes without a `ref_doc_id`: `"error"` (default) or `"alone"` (one-chunk documents).
    """

    model_name: str = Field(default="", description="contextembed checkpoint path or Hub id ('' = default model)")
    output_dim: int | None = Field(default=None, description="Matryoshka size of the vectors")
    metadata_mode: MetadataMode = Field(default=MetadataMode.NONE)
    missing_source: MissingSource = Field(default="error")
    _model: Any = PrivateAttr(default=None)

    def __init__(self, model: contextembed.ContextEmbedder | str = "", **kwargs):
        loaded = model if isinstance(model, contextembed.ContextEmbedder) else None
        name = loaded.config.name_or_path if loaded is not None else model
        if not isinstance(name, str):
            raise ValueError(f"model must be a loaded ContextEmbedder or a checkpoint path or Hub id, got "
                             f"{type(model).__name__}")
        if kwargs.get("missing_source", "error") not in MISSING_SOURCE:
            raise ValueError(f"missing_source must be one of {MISSING_SOURCE}, got {kwargs['missing_source']!r}")
        super().__init__(model_name=kwargs.pop("model_name", name), **kwargs)
        self._model = loaded

    @classmethod
    def class_name(cls) -> str:
        return "ContextualEmbedding"

    @property
    def model(self) -> contextembed.ContextEmbedder:
        """The loaded model (loaded from `model_name` on first use)."""
        if self._model is None:
            self._model = contextembed.load(self.model_name)
        return self._model

    def __getstate__(self):
        state = super().__getstate__()
        private = dict(state.get("__pydantic_private__") or {})
        private["_model"] = None  # workers reload from model_name instead of receiving the weights by pickle
        return {**state, "__pydantic_private__": private}

    # The embedding-model interface: queries, and any other text as a one-chunk document.

    def _get_query_embedding(self, query: str) -> list[float]:
        return self.model.encode_queries([query], output_dim=self.output_dim)[0].tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return [v[0].tolist() for v in self.model.encode_documents([[t] for t in texts],
                                                                     output_dim=self.output_dim)]

    # The transformation: nodes grouped into their documents.

    def __call__(self, nodes: Sequence[BaseNode], **kwargs) -> Sequence[BaseNode]:
        nodes = list(nodes)
        if not nodes:
            return nodes
        _check_whole_documents(nodes)
        texts = [node.get_content(metadata_mode=self.metadata_mode) for node in nodes]
        # A whole Document (no splitter before this embedding) is its own source: a one-chunk document.
        sources = [node.node_id if isinstance(node, Document) else node.ref_doc_id for node in nodes]
        by_id = {node.node_id: node for node in nodes}
        positions = [0 if isinstance(node, Document) else node.start_char_idx if node.start_char_idx is not None
                     else _chain_position(node, by_id) for node in nodes]
        vectors = encode_grouped(self.model, texts, sources, positions,
                                 missing_source=self.missing_source, what="node", output_dim=self.output_dim)
        for node, vector in zip(nodes, vectors):
            node.embedding = vector.tolist()
        return nodes

    async def acall(self, nodes: Sequence[BaseNode], **kwargs) -> Sequence[BaseNode]:
        return self.__call__(nodes, **kwargs)


def _chain_position(node: BaseNode, by_id: dict[str, BaseNode]) -> int | None:
    """A node without `start_char_idx`: its place in its document's PREVIOUS chain among these nodes (by id)."""
    position, current = 0, node
    while (previous := current.relationships.get(NodeRelationship.PREVIOUS)) is not None:
        if previous.node_id not in by_id:
            return None
        current = by_id[previous.node_id]
        position += 1
        if position > len(by_id):
            return None
    return position


def _check_whole_documents(nodes: list[BaseNode]) -> None:
    """Refuse a call that holds only part of a document: the missing nodes' context would be silently lost."""
    ids = {node.node_id for node in nodes}
    for i, node in enumerate(nodes):
        for relation in (NodeRelationship.PREVIOUS, NodeRelationship.NEXT):
            neighbour = node.relationships.get(relation)
            if neighbour is not None and neighbour.node_id not in ids:
                raise ValueError(
                    f"node {i} (document {node.ref_doc_id!r}) has a {relation.name.lower()} node that is not in "
                    "this call: a document's nodes must be embedded together (in an IngestionPipeline put the "
                    "splitter before this embedding, so workers receive whole documents)")


class ContextualStoreRetriever(BaseRetriever):
    """A LlamaIndex retriever on a contextembed store (a `VectorStore`, a store URI or an index folder's path),
    queried with `model` (default: the model the store names); `evidence=N` (the switch) puts each document's N
    next-best chunks and its reader view in the node's metadata (see `contextembed.integrations.store_retrieval`)."""

    def __init__(self, store, model=None, *, k: int = 4, evidence: int = 0, where: dict | None = None, **kwargs):
        self._search = StoreSearch(store, model, k=k, evidence=evidence, where=where)
        super().__init__(**kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        on = self._search.evidence > 0
        return [NodeWithScore(node=TextNode(text=hit.chunk.text, id_=f"{hit.document}#{hit.chunk.index}",
                                            metadata=hit_metadata(hit, evidence=on)), score=hit.score)
                for hit in self._search(query_bundle.query_str)]
