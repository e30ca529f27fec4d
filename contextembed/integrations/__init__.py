"""Embedders for RAG frameworks and distributed engines that keep each source document's chunks together.

Frameworks hand an embedder flat lists of unrelated strings, so a flat adapter would encode every chunk alone
and lose the context late chunking exists for. Each adapter here has two routes:

- the framework's plain embedder interface (queries, and any text as a one-chunk document), and
- a document-aware route that groups the framework's chunks by their source document, orders them, encodes
  each document once with `encode_documents`, and hands each chunk its contextual vector.

The adapters import their framework lazily (`contextembed.integrations.langchain` needs the `langchain` extra,
and so on); importing this package imports none of them.
"""

from contextembed.integrations.grouping import encode_grouped, group_chunks

__all__ = ["encode_grouped", "group_chunks"]
