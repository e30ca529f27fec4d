"""Checks of what callers pass as documents, titles and counts: the one validator of documents as lists of chunk
strings, used by the processor, the encoder, the framework adapters and the server, with one wording for every
error (positions written `name[i]` and `name[i][j]`). Pure Python: no torch, no transformers.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Iterable, Mapping
from typing import Literal

STRING_DOCUMENTS = ("one-chunk", "error")
BLANK_CHUNKS = ("keep", "error")
StringDocuments = Literal["one-chunk", "error"]
BlankChunks = Literal["keep", "error"]
_SURROGATE = re.compile("[\ud800-\udfff]")


def normalize_documents(documents, name: str = "documents", *, strings: StringDocuments = "one-chunk",
                        blank: BlankChunks = "keep") -> list[list[str]]:
    """Validate a batch of documents, each a list of chunk strings, and return it as fresh lists: the one check of
    that shape, for the processor, the encoder, the framework adapters and the server (one wording: positions are
    written `name[i]` and `name[i][j]`).

    Args:
        documents: a list (or any iterable, read once here) of documents.
        name: what the caller calls the batch (`"documents"`, a request's `"input"`, ...).
        strings: a `str` where a document belongs is a one-chunk document (`"one-chunk"`), or refused (`"error"`,
            for callers whose documents must already be lists: a string would otherwise be read as its characters).
        blank: chunks of whitespace only are kept, for the tokenizer to judge (`"keep"`: `empty_chunks`), or
            refused here (`"error"`).

    >>> normalize_documents([["a", "b"], "c"])
    [['a', 'b'], ['c']]
    >>> normalize_documents(doc for doc in ["x", ("y", "z")])
    [['x'], ['y', 'z']]
    >>> normalize_documents(["rent"], "input", strings="error")
    Traceback (most recent call last):
    ...
    ValueError: input[0] must be a non-empty list of chunk strings, got a string ('rent'): wrap a one-chunk document as ['rent']
    >>> normalize_documents([["a", 3]])
    Traceback (most recent call last):
    ...
    ValueError: documents[0][1] must be a string, got int
    """
    if strings not in STRING_DOCUMENTS:
        raise ValueError(f"strings must be one of {STRING_DOCUMENTS}, got {strings!r}")
    if blank not in BLANK_CHUNKS:
        raise ValueError(f"blank must be one of {BLANK_CHUNKS}, got {blank!r}")
    expected = f"{name} must be a non-empty list of documents, each a non-empty list of chunk strings"
    if isinstance(documents, str):
        raise ValueError(f"{expected}, got a string: wrap a single document in a list")
    if not _is_collection(documents):
        raise ValueError(f"{expected}, got {type(documents).__name__}")
    documents = list(documents)
    if not documents:
        raise ValueError(f"{expected}, got an empty list")
    return [_document(document, f"{name}[{i}]", strings, blank) for i, document in enumerate(documents)]


def _document(document, where: str, strings: str, blank: str) -> list[str]:
    if blank == "keep" and type(document) is list and document and all(type(chunk) is str for chunk in document):
        return list(document)  # the common case, checked without the general path's per-chunk isinstance calls
    expected = f"{where} must be a non-empty list of chunk strings"
    if isinstance(document, str):
        if strings == "error":
            raise ValueError(f"{expected}, got a string ({document[:40]!r}): wrap a one-chunk document as "
                             f"[{document[:40]!r}]")
        document = [document]
    if not _is_collection(document):
        raise ValueError(f"{expected}, got {type(document).__name__}")
    document = list(document)
    if not document:
        raise ValueError(f"{expected}, got an empty list")
    for j, chunk in enumerate(document):
        if _is_collection(chunk):
            raise ValueError(f"{where}[{j}] must be a string, got a {type(chunk).__name__}: documents are lists of "
                             "chunks, one level deep")
        if not isinstance(chunk, str):
            raise ValueError(f"{where}[{j}] must be a string, got {type(chunk).__name__}")
        if blank == "error" and not chunk.strip():
            raise ValueError(f"{where}[{j}] is empty: every chunk needs text")
    return document


def check_count(value, name: str = "", least: int = 1) -> int:
    """`value` as an `int` when it is an integer (Python's or numpy's, not a bool) of at least `least` (1: a positive
    integer, 0: a non-negative one), else a `ValueError` naming `name`: the one check of counts and sizes in options.

    >>> check_count(3, "top_k")
    3
    >>> check_count(0, "top_k")
    Traceback (most recent call last):
    ...
    ValueError: top_k must be a positive integer, got 0
    >>> check_count("2", least=0)
    Traceback (most recent call last):
    ...
    ValueError: must be a non-negative integer, got '2'
    """
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < least:
        requirement = {1: "a positive integer", 0: "a non-negative integer"}.get(least, f"an integer >= {least}")
        raise ValueError(f"{name + ' ' if name else ''}must be {requirement}, got {value!r}")
    return int(value)


def normalize_titles(titles, num_documents: int) -> list[str | None]:
    """One title (a str, or None for none) per document.

    >>> normalize_titles(None, 2)
    [None, None]
    >>> normalize_titles(["Lease", None], 2)
    ['Lease', None]
    """
    if titles is None:
        return [None] * num_documents
    if isinstance(titles, str) or not _is_collection(titles):
        raise ValueError(
            f"titles must be a list with one title (str or None) per document, got {type(titles).__name__}"
            + (f" {titles!r}: wrap it in a list" if isinstance(titles, str) else "")
        )
    titles = list(titles)
    if len(titles) != num_documents:
        raise ValueError(f"titles must have one entry per document ({num_documents}), got {len(titles)}")
    for i, title in enumerate(titles):
        if title is not None and not isinstance(title, str):
            raise ValueError(f"titles[{i}] must be a string or None, got {type(title).__name__}")
        if title is not None:
            check_text(title, f"titles[{i}]")
    return titles


def _is_collection(value) -> bool:
    return isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping))


def check_texts(texts: list[str], where) -> None:
    """`check_text` of every text, `where(i)` naming text `i`: one search over them all, then the first bad one found.

    >>> check_texts(["fine", "bad " + chr(0xD800)], lambda i: f"chunk {i}")
    Traceback (most recent call last):
    ...
    ValueError: chunk 1 contains a lone surrogate (U+D800) at character 4: it is not valid Unicode text; decode the source with errors='replace' (or fix it) first
    """
    if _SURROGATE.search("".join(texts)) is None:
        return
    for i, text in enumerate(texts):
        check_text(text, where(i))


def check_text(text: str, where: str) -> None:
    """Raise a `ValueError` naming `where` if `text` is not valid Unicode (a lone surrogate, which no tokenizer takes)."""
    bad = _SURROGATE.search(text)
    if bad:
        raise ValueError(
            f"{where} contains a lone surrogate (U+{ord(bad.group()):04X}) at character {bad.start()}: it is not "
            "valid Unicode text; decode the source with errors='replace' (or fix it) first"
        )


__all__ = ["BLANK_CHUNKS", "STRING_DOCUMENTS", "BlankChunks", "StringDocuments", "check_count", "check_text",
           "check_texts", "normalize_documents", "normalize_titles"]
