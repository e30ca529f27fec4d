"""LangChain: an `Embeddings` for queries and plain texts, and a document-aware route into any vector store.

    pip install "contextembed[langchain]"

LangChain hands `embed_documents(texts)` a flat list of strings, batched by count, with nothing that says which
document a text came from, so `embed_documents` on its own encodes each text as a one-chunk document (correct,
not contextual). The contextual route splits each `Document` itself, encodes every document's chunks together,
and then lets the store call `embed_documents` as it always does, answering from vectors staged for exactly
those chunks:

    embeddings = ContextualEmbeddings()
    store = InMemoryVectorStore(embeddings)
    add_documents_contextual(store, documents, embeddings)      # split, encode per document, store

    chunks = ContextualSplitter().split_documents(documents)     # or stage chunks and use any store API,
    with embeddings.contextual(chunks):                          # index() included
        index(chunks, record_manager, store, batch_size=2, source_id_key="parent_id")

Staged vectors are keyed by chunk text and handed out first in, first out, so a clause repeated word for word in
six documents gets each document's own vector in the order the store asks for them (stores and `index()` keep
the order of the documents they are given). A text that was not staged, such as a store's `"dummy_text"`
dimension probe, is encoded alone; `strict=True` makes it an error instead.

`ContextualStoreRetriever` retrieves from a contextembed store (an index folder, LanceDB, Qdrant, PostgreSQL): each
`Document` is a found document's answer chunk; with `evidence=N`, its metadata also holds the N chunks that make
the answer verifiable and their `reader_view` (see `contextembed.integrations.store_retrieval`):

    retriever = ContextualStoreRetriever(store="lancedb:///srv/leases", evidence=2)
    retriever.invoke("Who pays for electricity at 88 Ocean Drive?")[0].metadata["reader_view"]
"""

from __future__ import annotations

import contextlib
import contextvars
import uuid
from collections import defaultdict, deque
from collections.abc import Iterator, Sequence

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import BaseDocumentTransformer, Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.vectorstores import VectorStore
    from pydantic import ConfigDict, PrivateAttr
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError('the LangChain integration needs langchain-core: pip install "contextembed[langchain]"') from error

import contextembed
from contextembed.integrations.grouping import MissingSource, encode_grouped
from contextembed.integrations.store_retrieval import StoreSearch, hit_metadata
from contextembed.modeling import normalize_documents

PARENT_ID, CHUNK_INDEX, CHUNKS, START, END = "parent_id", "chunk_index", "n_chunks", "start_index", "end_index"


class ContextualEmbeddings(Embeddings):
    """contextembed as a LangChain `Embeddings`.

    Args:
        model: a `ContextEmbedder`, a checkpoint path or Hub id, or `None` for the default model.
        output_dim: Matryoshka size of every vector (the checkpoint's default when `None`).
        strict: refuse texts that were not staged (see `contextual`) instead of encoding them alone.
        batch_size: most documents per forward pass.
    """

    def __init__(self, model: contextembed.ContextEmbedder | str | None = None, *, output_dim: int | None = None,
                 strict: bool = False, batch_size: int = 32):
        self.model = contextembed.load(model)
        self.output_dim = output_dim
        self.strict = strict
        self.batch_size = batch_size
        self._staged: contextvars.ContextVar[dict | None] = contextvars.ContextVar(f"staged_{id(self)}", default=None)

    def _options(self) -> dict:
        return {"output_dim": self.output_dim, "batch_size": self.batch_size}

    def embed_query(self, text: str) -> list[float]:
        return self.model.encode_queries([text], **self._options())[0].tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Staged texts get their contextual vectors; any other text is encoded as a one-chunk document."""
        staged = self._staged.get()
        out: list[list[float] | None] = [None] * len(texts)
        alone = []
        for i, text in enumerate(texts):
            if staged is not None and staged.get(text):
                out[i] = staged[text].popleft()
            elif self.strict:
                raise ValueError(f"text {i} ({text[:60]!r}) was not staged for this call: with strict=True every "
                                 "text must come from `contextual(...)` or `precomputed(...)`")
            else:
                alone.append(i)
        if alone:
            vectors = self.model.encode_documents([[texts[i]] for i in alone], **self._options())
            for i, vector in zip(alone, vectors):
                out[i] = vector[0].tolist()
        return out

    def embed_documents_grouped(self, documents: Sequence[Sequence[str]]) -> list[list[list[float]]]:
        """Several documents, each a list of its chunks: one list of chunk vectors per document."""
        documents = normalize_documents(documents, "documents", strings="error")
        return [v.tolist() for v in self.model.encode_documents(documents, **self._options())]

    @contextlib.contextmanager
    def precomputed(self, texts: Sequence[str], vectors: Sequence[Sequence[float]]) -> Iterator[dict[str, deque]]:
        """Within the block, `embed_documents` answers these texts with these vectors (first in, first out).

        The block gets the staged vectors (text -> queue): what is left in them at the end was never asked for."""
        if len(texts) != len(vectors):
            raise ValueError(f"{len(texts)} texts for {len(vectors)} vectors")
        staged = defaultdict(deque)
        for text, vector in zip(texts, vectors):
            staged[text].append([float(x) for x in vector])
        token = self._staged.set(staged)
        try:
            yield staged
        finally:
            self._staged.reset(token)

    def contextual(self, chunks: Sequence[Document], *, missing_source: MissingSource = "error"):
        """Stage the contextual vectors of chunk `Document`s (from `ContextualSplitter`, or any splitter whose
        chunks carry `parent_id` and `chunk_index` or `start_index` in their metadata). Use as a `with` block."""
        return self.precomputed([c.page_content for c in chunks], self.embed_chunks(chunks,
                                                                                    missing_source=missing_source))

    def embed_chunks(self, chunks: Sequence[Document], *, missing_source: MissingSource = "error") -> list[list[float]]:
        """One contextual vector per chunk `Document`, in input order, grouped by `metadata["parent_id"]` and
        ordered by `metadata["chunk_index"]` (else `metadata["start_index"]`)."""
        sources = [c.metadata.get(PARENT_ID) for c in chunks]
        positions = [c.metadata.get(CHUNK_INDEX, c.metadata.get(START)) for c in chunks]
        vectors = encode_grouped(self.model, [c.page_content for c in chunks], sources, positions,
                                 missing_source=missing_source, what="chunk Document", **self._options())
        return [v.tolist() for v in vectors]


class ContextualSplitter(BaseDocumentTransformer):
    """Split each `Document` on its own and record where every chunk came from.

    Each chunk's metadata is the parent's plus `parent_id` (the parent's `id`, else a UUID5 of its text and
    metadata), `chunk_index`, `n_chunks`, and exact `start_index` / `end_index` character offsets; its `id` is
    `"{parent_id}:{chunk_index}"`. The default splitter is LangChain's `RecursiveCharacterTextSplitter` with
    1,000 characters and no overlap.
    """

    def __init__(self, text_splitter=None):
        if text_splitter is None:
            from langchain_text_splitters import RecursiveCharacterTextSplitter

            text_splitter = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=0)
        self.text_splitter = text_splitter

    def transform_documents(self, documents: Sequence[Document], **kwargs) -> list[Document]:
        return self.split_documents(documents)

    def split_documents(self, documents: Sequence[Document]) -> list[Document]:
        chunks, seen = [], set()
        for number, document in enumerate(documents):
            parent = document.id or str(uuid.uuid5(uuid.NAMESPACE_URL, repr((document.page_content,
                                                                             sorted(document.metadata.items())))))
            if parent in seen:
                raise ValueError(f"documents share the id {parent!r} (document {number}): their chunks would be "
                                 "mixed into one document")
            seen.add(parent)
            pieces = [p for p in self.text_splitter.split_text(document.page_content) if p.strip()]
            if not pieces:
                raise ValueError(f"document {number} ({parent!r}) has no text to split")
            cursor = 0
            for index, piece in enumerate(pieces):
                start = document.page_content.find(piece, cursor)
                if start < 0:
                    raise ValueError(f"chunk {index} of document {parent!r} is not a substring of it: the splitter "
                                     "rewrites text, so offsets cannot be kept")
                cursor = start + 1
                metadata = {**document.metadata, PARENT_ID: parent, CHUNK_INDEX: index, CHUNKS: len(pieces),
                            START: start, END: start + len(piece)}
                chunks.append(Document(page_content=piece, metadata=metadata, id=f"{parent}:{index}"))
        return chunks


def add_documents_contextual(vectorstore: VectorStore, documents: Sequence[Document],
                             embeddings: ContextualEmbeddings, *, splitter: ContextualSplitter | None = None,
                             **kwargs) -> list[str]:
    """Split `documents`, encode each one's chunks together, and add the chunks to any vector store that embeds
    with `embeddings`. Returns the store's ids (the chunk ids `"{parent_id}:{chunk_index}"` unless `ids=` is
    passed). Raises if the store never asked `embeddings` for the staged vectors (it embeds with something
    else), since the chunks would then carry context-free vectors."""
    chunks = (splitter or ContextualSplitter()).split_documents(documents)
    vectors = embeddings.embed_chunks(chunks)
    staged = [c.page_content for c in chunks]
    kwargs.setdefault("ids", [c.id for c in chunks])
    with embeddings.precomputed(staged, vectors) as queues:
        ids = vectorstore.add_documents(chunks, **kwargs)
    left = sum(len(queue) for queue in queues.values())
    if left:
        raise ValueError(f"the vector store used {len(chunks) - left} of {len(chunks)} staged vectors: it does not "
                         "embed with these ContextualEmbeddings (pass them to the store's constructor)")
    return ids


class ContextualStoreRetriever(BaseRetriever):
    """A LangChain retriever on a contextembed store.

    Args:
        store: a `contextembed.stores.VectorStore`, a store URI or an index folder's path.
        model: the model that made the store's vectors (a `ContextEmbedder`, a checkpoint path or Hub id); default:
            the one the store names.
        k: documents per query.
        evidence: the switch: N > 0 puts each document's N next-best chunks and its reader view in the metadata.
        where: a metadata filter, as `VectorStore.search_documents` takes it.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)
    store: object
    model: object = None
    k: int = 4
    evidence: int = 0
    where: dict | None = None
    _search: StoreSearch = PrivateAttr()

    def model_post_init(self, context) -> None:
        self._search = StoreSearch(self.store, self.model, k=self.k, evidence=self.evidence, where=self.where)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [Document(page_content=hit.chunk.text, id=f"{hit.document}#{hit.chunk.index}",
                         metadata=hit_metadata(hit, evidence=self.evidence > 0)) for hit in self._search(query)]
