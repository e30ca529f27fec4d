"""Processor for contextual chunk embeddings: turns documents (lists of chunks) into model inputs.

One input per document: a `str` (a single chunk) or a list of `str` (its chunks, in order). All
chunks of a batch are tokenised in one call with `split_special_tokens=True`, so literal special
tokens in user text stay plain text; the separator **id** is then inserted between chunks by
code, the backbone's own special tokens (CLS/SEP, BOS/EOS) go around the document, and the
query or document prefix goes in front. Tokens of the prefix, a title, separators and special
tokens belong to no chunk (`chunk_ids == -1`).

Documents are never cut. One longer than the model's window is run in overlapping windows by
the model; with `long_documents="error"` the processor refuses it instead.
`input_layout="pplx-v2"` builds pplx-embed-v2-context's published inputs instead (`pplx_v2_query_row`,
`pplx_v2_document_row`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

import numpy as np
import torch
from transformers.processing_utils import ProcessorMixin

from .choices_contextembed import (
    EMPTY_CHUNK_MODES,
    INPUT_LAYOUTS,
    LONG_DOCUMENT_MODES,
    TASKS,
    EmptyChunks,
    LongDocuments,
    Task,
)
from .inputs_contextembed import check_count, check_text, check_texts, normalize_documents, normalize_titles



class ContextEmbedProcessor(ProcessorMixin):
    r"""
    Args:
        tokenizer: The backbone's tokenizer, with `chunk_token` added as a special token.
        chunk_token (`str`, defaults to `"<|chunk_sep|>"`): The separator between chunks.
        query_prefix (`str`, defaults to `""`): Put before queries (`task="query"`).
        document_prefix (`str`, defaults to `""`): Put before documents (`task="document"`).
        max_seq_length (`int`, *optional*): Tokens per forward pass (the model's window); only used by
            `long_documents="error"` and to check that a title leaves room for text.
        long_documents (`str`, defaults to `"window"`): `"window"` passes long documents on whole (the
            model windows them); `"error"` raises a `ValueError` for a document over `max_seq_length`.
        empty_chunks (`str`, defaults to `"error"`): a chunk with no tokens (empty, whitespace, or only characters
            the tokenizer drops) has nothing to pool. `"error"` raises a `ValueError` naming it; `"zero"` keeps its
            row as an all-zero vector (not unit length; it scores 0 against every query).
        chunk_separator (`bool`, defaults to `True`): insert the separator between chunks. `False` gives plain
            late chunking over the backbone's ordinary token sequence (what models not trained with a
            separator, and other late-chunking libraries, see).
        input_layout (`str`, defaults to `"contextembed"`): `"contextembed"`, as above, or `"pplx-v2"`, the inputs
            pplx-embed-v2-context was trained on (`pplx_v2_query_row`, `pplx_v2_document_row`; no titles).

    The processor keeps a private copy of the fast tokenizer's backend, set once to read special-token strings
    in user text as plain text. The shared tokenizer is never switched back and forth, so other code (and other
    threads) using `processor.tokenizer` with its defaults is unaffected.
    """

    def __init__(
        self,
        tokenizer=None,
        chunk_token: str = "<|chunk_sep|>",
        query_prefix: str = "",
        document_prefix: str = "",
        max_seq_length: int | None = None,
        long_documents: str = "window",
        empty_chunks: str = "error",
        chunk_separator: bool = True,
        input_layout: str = "contextembed",
        chat_template=None,
        **kwargs,
    ):
        if long_documents not in LONG_DOCUMENT_MODES:
            raise ValueError(f"long_documents must be one of {LONG_DOCUMENT_MODES}, got {long_documents!r}")
        if empty_chunks not in EMPTY_CHUNK_MODES:
            raise ValueError(f"empty_chunks must be one of {EMPTY_CHUNK_MODES}, got {empty_chunks!r}")
        if input_layout not in INPUT_LAYOUTS:
            raise ValueError(f"input_layout must be one of {INPUT_LAYOUTS}, got {input_layout!r}")
        self.chunk_token = chunk_token
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.max_seq_length = max_seq_length
        self.long_documents = long_documents
        self.empty_chunks = empty_chunks
        self.chunk_separator = chunk_separator
        self.input_layout = input_layout
        super().__init__(tokenizer, chat_template=chat_template)
        self._text_backend = _text_backend(tokenizer)
        self._wrapping = self._find_wrapping()

    @property
    def chunk_token_id(self) -> int:
        token_id = self.tokenizer.convert_tokens_to_ids(self.chunk_token)
        if token_id is None or token_id == self.tokenizer.unk_token_id:
            raise ValueError(f"the tokenizer does not know the chunk token {self.chunk_token!r}")
        return token_id

    def __call__(
        self,
        text=None,
        images=None,
        videos=None,
        audio=None,
        *,
        task: str | None = None,
        titles: Sequence[str | None] | None = None,
        return_tensors: str | None = "pt",
        max_length: int | None = None,
        long_documents: str | None = None,
        empty_chunks: str | None = None,
        text_kwargs: dict | None = None,
        common_kwargs: dict | None = None,
        images_kwargs: dict | None = None,
        audio_kwargs: dict | None = None,
        videos_kwargs: dict | None = None,
        **kwargs,
    ) -> dict:
        """Tokenise a batch of documents and pad it.

        Args:
            text: one document (`str`, or a list of chunk strings inside a batch) or a batch of documents.
            task: `"query"` or `"document"` puts that prefix in front. `None` looks for a configured prefix
                at the start of the first chunk (where sentence-transformers puts its prompt).
            titles: optional text per document, kept in every window as context and never pooled.
            return_tensors: `"pt"` for torch tensors, `None` for lists.
            max_length: tokens per forward pass for this batch, under the name tokenizers and sentence-transformers
                use (ST passes its `max_seq_length` here). It is never a cut: with `long_documents="window"` it
                becomes the model's window for this batch, with `"error"` the limit a document may not exceed.

        Returns:
            `input_ids`, `token_attention_mask` (B, T), `chunk_ids` (B, T; -1 outside chunks) and
            `attention_mask`, the chunk mask (B, C); with `max_length`, also `max_seq_length` (B,) for the model.
        """
        if images is not None or videos is not None or audio is not None:
            raise ValueError("ContextEmbedProcessor takes text only")
        text_kwargs = {**(text_kwargs or {}), **kwargs}
        common_kwargs = common_kwargs or {}
        return_tensors = common_kwargs.get("return_tensors", text_kwargs.get("return_tensors", return_tensors))
        max_length = max_length or text_kwargs.get("max_length")
        if max_length is None and text_kwargs.get("truncation") not in (None, False, "do_not_truncate"):
            # A caller asking for truncation (sentence-transformers always does) sets its budget through the
            # tokenizer's model_max_length (ST's max_seq_length): it becomes the window, never a cut.
            limit = getattr(self.tokenizer, "model_max_length", None)
            max_length = limit if isinstance(limit, int) and limit < 10**7 else None
        if max_length is not None:
            check_count(max_length, "max_length")
        rows = self.tokenize_documents(text, task=task, titles=titles, max_seq_length=max_length,
                                       long_documents=long_documents, empty_chunks=empty_chunks)
        batch = self.pad(rows, return_tensors=return_tensors)
        if max_length:
            window = [max_length] * len(rows)
            batch["max_seq_length"] = torch.tensor(window) if return_tensors == "pt" else window
        return batch

    def tokenize_documents(
        self,
        text,
        *,
        task: Task | None = None,
        titles: Sequence[str | None] | None = None,
        max_seq_length: int | None = None,
        long_documents: LongDocuments | None = None,
        empty_chunks: EmptyChunks | None = None,
    ) -> list[dict[str, list[int]]]:
        """Tokenise documents without padding: one dict of `input_ids`, `chunk_ids`, `num_chunks` per document."""
        documents = normalize_documents([text] if isinstance(text, str) else text)  # a string: one document
        if task is not None and task not in TASKS:
            raise ValueError(f"task must be one of {TASKS} or None, got {task!r}")
        long_documents = long_documents or self.long_documents
        if long_documents not in LONG_DOCUMENT_MODES:
            raise ValueError(f"long_documents must be one of {LONG_DOCUMENT_MODES}, got {long_documents!r}")
        empty_chunks = empty_chunks or self.empty_chunks
        if empty_chunks not in EMPTY_CHUNK_MODES:
            raise ValueError(f"empty_chunks must be one of {EMPTY_CHUNK_MODES}, got {empty_chunks!r}")
        titles = normalize_titles(titles, len(documents))
        if self.input_layout == "pplx-v2":
            return self._pplx_v2_rows(documents, task, titles, max_seq_length or self.max_seq_length,
                                      long_documents, empty_chunks)
        describe = _describe_query if task == "query" else _describe_chunk

        prefixes = []
        for chunks in documents:
            prefix, chunks[0] = self._split_prefix(chunks[0], task)
            prefixes.append(prefix)
        flat = [chunk for chunks in documents for chunk in chunks]
        check_texts(flat, lambda k: describe(*_position(documents, k)))
        extras = [p for p in prefixes if p] + [t for t in titles if t]
        encoded = self.tokenize_text(flat + extras)
        extra_tokens = iter(encoded[len(flat) :])
        prefix_tokens = [next(extra_tokens) if p else [] for p in prefixes]
        title_tokens = [next(extra_tokens) if t else [] for t in titles]

        limit = max_seq_length or self.max_seq_length
        rows, position = [], 0
        for doc_index, chunks in enumerate(documents):
            context = prefix_tokens[doc_index] + title_tokens[doc_index]
            row = self._document_row(doc_index, encoded[position : position + len(chunks)], context,
                                     describe, empty_chunks)
            position += len(chunks)
            if limit and len(row["input_ids"]) > limit:
                self._check_long_document(doc_index, len(row["input_ids"]), len(context), len(title_tokens[doc_index]),
                                          limit, long_documents)
            rows.append(row)
        return rows

    def _document_row(self, doc_index: int, chunk_tokens: list[list[int]], context: list[int], describe,
                      empty_chunks: str) -> dict[str, list[int]]:
        """One document's ids and chunk ids: special tokens, prefix and title (no chunk), then the chunks with the
        separator id between them."""
        lead, tail = self.special_tokens_around()
        separator = [self.chunk_token_id] if self.chunk_separator else []
        ids = lead + context
        cids = [-1] * len(ids)
        for chunk_index, tokens in enumerate(chunk_tokens):
            if chunk_index:
                ids.extend(separator)
                cids.extend([-1] * len(separator))
            if not tokens and empty_chunks == "error":
                raise ValueError(
                    f"{describe(doc_index, chunk_index)} is empty: it has no tokens (empty, whitespace, or "
                    "only characters the tokenizer drops), so there is nothing to embed. Remove it, or pass "
                    "empty_chunks='zero' to keep an all-zero vector for it"
                )
            ids.extend(tokens)
            cids.extend([chunk_index] * len(tokens))
        return {"input_ids": ids + tail, "chunk_ids": cids + [-1] * len(tail), "num_chunks": len(chunk_tokens)}

    def _pplx_v2_rows(self, documents: list[list[str]], task: Task | None, titles: list[str | None],
                      limit: int | None, long_documents: str, empty_chunks: str) -> list[dict[str, list[int]]]:
        """Rows in pplx-embed-v2-context's layout; with `task=None` a first chunk that starts with the query prefix
        (sentence-transformers' prompt) is a query, anything else a document."""
        if any(title is not None for title in titles):
            raise ValueError("titles are not part of pplx-embed-v2-context's input (input_layout='pplx-v2')")
        queries = []
        for i, chunks in enumerate(documents):
            prefix, chunks[0] = self._split_prefix(chunks[0], task)
            query = task == "query" or (task is None and prefix == self.query_prefix != "")
            describe = _describe_query if query else _describe_chunk
            check_texts(chunks, lambda j: describe(i, j))  # noqa: B023 - called here, within this iteration
            if query and len(chunks) != 1:
                raise ValueError(f"query {i} has {len(chunks)} chunks: a query is one text")
            queries.append(query)
        # Two tokeniser calls for the whole batch (the fast tokenizer parallelises a batch): queries, documents.
        texts = [chunks[0] if query else self.document_prefix + self.chunk_token.join(chunks)
                 for chunks, query in zip(documents, queries)]
        query_tokens = iter(self.tokenize_text([t for t, q in zip(texts, queries) if q]))
        document_tokens = iter(self.tokenize_text([t for t, q in zip(texts, queries) if not q], return_offsets=True))
        rows = []
        for i, (chunks, query) in enumerate(zip(documents, queries)):
            if query:
                row = pplx_v2_query_row(self.query_prefix_token_id, next(query_tokens))
            else:
                row = pplx_v2_document_row(next(document_tokens), chunks, self.document_prefix, self.chunk_token)
            describe = _describe_query if query else _describe_chunk
            empty = sorted(set(range(len(chunks))) - set(row["chunk_ids"]))
            if empty and empty_chunks == "error":
                raise ValueError(f"{describe(i, empty[0])} is empty: it has no tokens, so there is nothing to embed. "
                                 "Remove it, or pass empty_chunks='zero' to keep an all-zero vector for it")
            if limit and len(row["input_ids"]) > limit:
                lead = next((t for t, c in enumerate(row["chunk_ids"]) if c >= 0), 0)  # the prefix's tokens
                self._check_long_document(i, len(row["input_ids"]), lead, 0, limit, long_documents)
            rows.append(row)
        return rows

    @property
    def query_prefix_token_id(self) -> int:
        """The id of `query_prefix` as one token of the tokenizer (`input_layout="pplx-v2"`)."""
        token_id = self.tokenizer.convert_tokens_to_ids(self.query_prefix) if self.query_prefix else None
        if token_id is None or token_id == self.tokenizer.unk_token_id:
            raise ValueError(f"input_layout='pplx-v2' puts the query prefix in as its token's id, but the tokenizer "
                             f"has no token {self.query_prefix!r}")
        return token_id

    def _check_long_document(self, doc_index: int, length: int, context: int, title: int, limit: int,
                             long_documents: str) -> None:
        if long_documents == "error":
            raise ValueError(
                f"document {doc_index} has {length} tokens, more than max_seq_length={limit}; "
                "pass long_documents='window' to encode it in overlapping windows"
            )
        lead, tail = self.special_tokens_around()
        if context + len(lead) + len(tail) >= limit:
            raise ValueError(
                f"titles[{doc_index}] has {title} tokens: with the prefix and special "
                f"tokens ({context + len(lead) + len(tail)} in all) it fills the whole window of {limit} tokens "
                "that every window of this long document repeats it in, leaving no room for the text; shorten the "
                "title"
            )

    def tokenize_text(self, texts: list[str], return_offsets: bool = False) -> list:
        """Token ids of plain texts (no special tokens added; special-token strings are plain text).

        With `return_offsets`, `(ids, offsets)` per text, offsets being `(start, end)` character spans.
        """
        if self._text_backend is not None:
            if return_offsets:
                encodings = self._text_backend.encode_batch(texts, add_special_tokens=False)
                return [(e.ids, e.offsets) for e in encodings]
            # The same ids without the offsets: the tokenizer's call takes about a third less time, and reading the
            # ids back holds the interpreter a tenth as long (the model's thread waits on it when this runs beside it).
            return [e.ids for e in self._text_backend.encode_batch_fast(texts, add_special_tokens=False)]
        # A tokenizer without a Rust backend takes the option per call, without shared state.
        out = self.tokenizer(texts, add_special_tokens=False, split_special_tokens=True,
                             return_offsets_mapping=return_offsets)
        return list(zip(out["input_ids"], out["offset_mapping"])) if return_offsets else out["input_ids"]

    def pad(self, rows: list[dict[str, list[int]]], return_tensors: str | None = "pt") -> dict:
        """Right-pad tokenised documents into a batch (tokens and chunk mask).

        The rows are copied into preallocated arrays, one slice assignment each: the host's share of a batch stays
        short, and little of it holds the interpreter while a prefetch thread pads beside the model's pass.
        """
        if return_tensors not in ("pt", None):
            raise ValueError(f"return_tensors must be 'pt' or None, got {return_tensors!r}")
        lengths = np.array([len(row["input_ids"]) for row in rows])  # (B,)
        counts = np.array([row["num_chunks"] for row in rows])  # (B,)
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        input_ids = np.full((len(rows), lengths.max()), pad_id, dtype=np.int64)  # (B, T)
        chunk_ids = np.full(input_ids.shape, -1, dtype=np.int64)  # (B, T)
        for i, (row, n) in enumerate(zip(rows, lengths)):
            input_ids[i, :n] = row["input_ids"]
            chunk_ids[i, :n] = row["chunk_ids"]
        batch = {
            "input_ids": input_ids,
            "token_attention_mask": (np.arange(input_ids.shape[1]) < lengths[:, None]).astype(np.int64),  # (B, T)
            "chunk_ids": chunk_ids,
            "attention_mask": (np.arange(counts.max()) < counts[:, None]).astype(np.int64),  # (B, C)
        }
        if return_tensors == "pt":
            return {key: torch.from_numpy(value) for key, value in batch.items()}
        return {key: value.tolist() for key, value in batch.items()}

    def special_tokens_around(self) -> tuple[list[int], list[int]]:
        """The token ids the backbone's tokenizer puts before and after a text (e.g. `[CLS]` ... `[SEP]`)."""
        return list(self._wrapping[0]), list(self._wrapping[1])

    def _find_wrapping(self) -> tuple[list[int], list[int]]:
        if self.tokenizer is None:
            return [], []
        bare = self.tokenize_text(["a"])[0]
        full = self.tokenizer("a", add_special_tokens=True, split_special_tokens=self.tokenizer.split_special_tokens)
        full = full["input_ids"]
        for start in range(len(full) - len(bare) + 1):
            if full[start : start + len(bare)] == bare:
                return full[:start], full[start + len(bare) :]
        return [], []

    def _split_prefix(self, first_chunk: str, task: str | None) -> tuple[str, str]:
        if task is not None:
            return (self.query_prefix if task == "query" else self.document_prefix), first_chunk
        for prefix in sorted({self.query_prefix, self.document_prefix}, key=len, reverse=True):
            if prefix and first_chunk.startswith(prefix):
                return prefix, first_chunk[len(prefix) :]
        return "", first_chunk

    @property
    def model_input_names(self) -> list[str]:
        return ["input_ids", "token_attention_mask", "chunk_ids", "attention_mask"]


def pplx_v2_query_row(prefix_id: int, tokens: list[int]) -> dict[str, list[int]]:
    """A query in pplx-embed-v2-context's layout: the id of the query prefix (a special token: `[Q] `), then the
    query's tokens, every one pooled (the prefix included). No other special token is added.

    >>> pplx_v2_query_row(9, [4, 5])
    {'input_ids': [9, 4, 5], 'chunk_ids': [0, 0, 0], 'num_chunks': 1}
    """
    ids = [prefix_id, *tokens]
    return {"input_ids": ids, "chunk_ids": [0] * len(ids), "num_chunks": 1}


def pplx_v2_document_row(encoded: tuple[list[int], list[tuple[int, int]]], chunks: list[str], prefix: str,
                         marker: str) -> dict[str, list[int]]:
    """A document in pplx-embed-v2-context's layout from `encoded`, the ids and character offsets of
    `prefix + marker.join(chunks)` tokenised once (special-token strings read as text, the non-special marker
    matched): each token pooled into the chunk whose characters it overlaps, -1 for the prefix and the markers. A
    literal marker inside a chunk is tokenised as the marker but stays in its chunk; an empty chunk owns no token.

    >>> encoded = ([7, 8, 9, 9, 5], [(0, 1), (1, 4), (4, 5), (5, 6), (6, 7)])  # "P ab||c": P, " ab", |, |, c
    >>> pplx_v2_document_row(encoded, ["ab", "", "c"], prefix="P ", marker="|")
    {'input_ids': [7, 8, 9, 9, 5], 'chunk_ids': [-1, 0, -1, -1, 2], 'num_chunks': 3}
    """
    ids, offsets = encoded
    ends, start = [], len(prefix)
    for chunk in chunks:
        ends.append(start + len(chunk))
        start += len(chunk) + len(marker)
    starts = [end - len(chunk) for end, chunk in zip(ends, chunks)]
    chunk_ids = []
    for s, e in offsets:
        j = bisect_right(ends, s)  # the first chunk ending after the token starts
        chunk_ids.append(j if j < len(chunks) and starts[j] < e else -1)
    return {"input_ids": list(ids), "chunk_ids": chunk_ids, "num_chunks": len(chunks)}


def _position(documents: list[list[str]], k: int) -> tuple[int, int]:
    """(document, chunk) of the `k`-th chunk of all the documents' chunks in order.

    >>> _position([["a", "b"], ["c"]], 2)
    (1, 0)
    """
    for i, chunks in enumerate(documents):
        if k < len(chunks):
            return i, k
        k -= len(chunks)
    raise IndexError(k)


def _describe_chunk(doc_index: int, chunk_index: int) -> str:
    return f"document {doc_index}, chunk {chunk_index}"


def _describe_query(doc_index: int, chunk_index: int) -> str:
    return f"query {doc_index}"


def _text_backend(tokenizer):
    """A private copy of a fast tokenizer's Rust backend that reads special-token strings as text."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    from tokenizers import Tokenizer

    private = Tokenizer.from_str(backend.to_str())
    private.no_truncation()
    private.no_padding()
    private.encode_special_tokens = True
    return private


__all__ = ["INPUT_LAYOUTS", "ContextEmbedProcessor", "EmptyChunks", "LongDocuments", "Task", "check_count",
           "check_text", "normalize_documents", "normalize_titles", "pplx_v2_document_row", "pplx_v2_query_row"]
