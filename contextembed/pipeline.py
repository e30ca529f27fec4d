"""A corpus encoded as a stream: documents prepared on the host (chunked and tokenised) in a thread beside the model,
a batch ahead, and handed on in commit batches bounded by documents and by tokens.

    encoder = CorpusEncoder(contextembed.load(), chunker="sentences")
    batches = commit_batches(encoder.prepare, iter(read_corpus("corpus.jsonl")), 1000, 262_144)
    for batch in prefetched(batches):         # contextembed.prefetch: prepared in a thread, a batch ahead
        vectors = encoder.embed(batch)        # one (chunks, dim) array per document, in order
        ...                                   # written, then dropped: memory holds a batch or two

Commit batches depend only on the documents and their token counts, never on timing, so a run that resumes at a
batch boundary forms the same batches as a run that never stopped, and embeds each document in the same forward
passes: the same vectors, bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from contextembed.chunking import Chunk, ChunkerLike, chunk_text
from contextembed.corpus import Document
from contextembed.modeling import Precision, check_count

PREPARE_GROUP = 64  # documents chunked and tokenised in one call


@dataclass
class Prepared:
    """A document chunked and tokenised: what the model needs, and what the store keeps of its chunks."""

    document: Document
    chunks: list[Chunk]
    row: dict  # the processor's row: input_ids, chunk_ids, num_chunks

    @property
    def tokens(self) -> int:
        return len(self.row["input_ids"])


class CorpusEncoder:
    """Prepares and embeds a corpus's documents with one model and one set of options (those of
    `ContextEmbedder.encode_documents`): raw text is split by `chunker`; documents given as chunks keep them."""

    def __init__(self, model, *, chunker: ChunkerLike | None = "sentences", output_dim: int | None = None,
                 precision: Precision = "float32", batch_size: int = 32, max_tokens_per_batch: int | None = None):
        self.model, self.chunker = model, chunker
        self.options = {"output_dim": output_dim, "precision": precision, "batch_size": batch_size,
                        "max_tokens_per_batch": max_tokens_per_batch}

    def prepare(self, documents: list[Document]) -> list[Prepared]:
        """Chunk and tokenise (host work, no model): one `Prepared` per document, in order."""
        chunk_lists = []
        for document in documents:
            if document.chunks is not None:
                chunk_lists.append(joined(document.chunks))
                continue
            if self.chunker is None:
                raise ValueError(f"document {document.id!r} is raw text: pass a chunker (for example 'sentences')")
            try:
                chunks = chunk_text(document.text, self.chunker, tokenizer=self.model.processor.tokenizer)
            except ValueError as error:
                raise ValueError(f"document {document.id!r}: {error}") from error
            if not chunks:
                raise ValueError(f"document {document.id!r} produced no chunks (it is empty or only whitespace)")
            chunk_lists.append(chunks)
        titles = [d.title for d in documents]
        rows = self.model.processor.tokenize_documents([[c.text for c in chunks] for chunks in chunk_lists],
                                                       task="document",
                                                       titles=titles if any(titles) else None)
        return [Prepared(d, chunks, row) for d, chunks, row in zip(documents, chunk_lists, rows)]

    def embed(self, prepared: list[Prepared]) -> list[np.ndarray]:
        """The model's pass over prepared documents: one `(chunks, dim)` array per document, in order."""
        return self.model.encode_tokenized([p.row for p in prepared], show_progress_bar=False, **self.options)


def joined(chunks: list[str]) -> list[Chunk]:
    """Chunks given as strings, placed as if joined by one space.

    >>> [(c.start, c.end) for c in joined(["Rent.", "Due."])]
    [(0, 5), (6, 10)]
    """
    out, start = [], 0
    for text in chunks:
        out.append(Chunk(text, start, start + len(text)))
        start += len(text) + 1
    return out


def commit_batches(prepare: Callable[[list[Document]], list[Prepared]], documents: Iterator[Document],
                   max_documents: int, max_tokens: int, group: int = PREPARE_GROUP) -> Iterator[list[Prepared]]:
    """Prepared documents in batches of at most `max_documents` documents and `max_tokens` tokens (a document over
    the token bound is a batch alone), prepared `group` documents per call, in the order they come.

    >>> prepare = lambda docs: [Prepared(d, [], {"input_ids": [0] * len(d.text)}) for d in docs]
    >>> docs = [Document(str(i), "x" * n) for i, n in enumerate([3, 3, 9, 2, 2, 2])]
    >>> [[p.document.id for p in b] for b in commit_batches(prepare, iter(docs), max_documents=2, max_tokens=8)]
    [['0', '1'], ['2'], ['3', '4'], ['5']]
    """
    check_count(max_documents, "max_documents")
    check_count(max_tokens, "max_tokens")
    batch: list[Prepared] = []
    tokens = 0
    while True:
        taken = [d for _, d in zip(range(group), documents)]
        for item in prepare(taken) if taken else []:
            if batch and (len(batch) == max_documents or tokens + item.tokens > max_tokens):
                yield batch
                batch, tokens = [], 0
            batch.append(item)
            tokens += item.tokens
        if len(taken) < group:
            break
    if batch:
        yield batch
