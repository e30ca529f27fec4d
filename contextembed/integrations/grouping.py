"""Grouping a framework's flat list of chunks back into documents: the one rule every adapter shares.

A chunk belongs to the document its source id names; a document's chunks are encoded in the order of their
position key (a character offset or a chunk index). Nothing is guessed: a chunk without a source id, without a
position, or with a position another chunk of its document already has is an error that names it, unless the
caller chose to encode chunks without a source id as one-chunk documents (`missing_source="alone"`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Literal

import numpy as np

from contextembed.modeling import EmptyChunks

MISSING_SOURCE = ("error", "alone")
MissingSource = Literal["error", "alone"]


def group_chunks(sources: Sequence[Hashable | None], positions: Sequence[float | None], *,
                 missing_source: MissingSource = "error", what: str = "chunk") -> list[list[int]]:
    """Indices of the chunks of each document: documents in order of first appearance, chunks by position.

    >>> group_chunks(["b", "a", "b", "a"], [7, 0, 2, 5])
    [[2, 0], [1, 3]]
    >>> group_chunks(["a", None], [0, None], missing_source="alone")
    [[0], [1]]
    >>> group_chunks(["a", None], [0, 3])
    Traceback (most recent call last):
    ...
    ValueError: chunk 1 has no source document id: without it its document cannot be rebuilt (pass missing_source='alone' to encode such chunks as one-chunk documents)
    >>> group_chunks(["a", "a"], [4, 4])
    Traceback (most recent call last):
    ...
    ValueError: chunks 0 and 1 of document 'a' both claim position 4: are two documents sharing one id?
    """
    if missing_source not in MISSING_SOURCE:
        raise ValueError(f"missing_source must be one of {MISSING_SOURCE}, got {missing_source!r}")
    if len(sources) != len(positions):
        raise ValueError(f"{len(sources)} source ids for {len(positions)} positions")
    groups: dict[Hashable, list[int]] = {}
    for i, (source, position) in enumerate(zip(sources, positions)):
        if source is None:
            if missing_source == "error":
                raise ValueError(f"{what} {i} has no source document id: without it its document cannot be "
                                 "rebuilt (pass missing_source='alone' to encode such chunks as one-chunk documents)")
            groups[("__alone__", i)] = [i]
            continue
        if position is None or isinstance(position, bool) or not isinstance(position, (int, float, np.number)):
            raise ValueError(f"{what} {i} of document {source!r} has no position (got {position!r}): its place in "
                             "the document is unknown")
        groups.setdefault(source, []).append(i)
    ordered = []
    for source, members in groups.items():
        members = sorted(members, key=lambda i: positions[i])
        for a, b in zip(members, members[1:]):
            if positions[a] == positions[b]:
                raise ValueError(f"{what}s {a} and {b} of document {source!r} both claim position {positions[a]}: "
                                 "are two documents sharing one id?")
        ordered.append(members)
    return ordered


def encode_grouped(model, texts: Sequence[str], sources: Sequence[Hashable | None],
                   positions: Sequence[float | None], *, missing_source: MissingSource = "error",
                   empty_chunks: EmptyChunks = "error",
                   what: str = "chunk", **encode_kwargs) -> list[np.ndarray]:
    """One contextual vector per chunk, in input order: each document's chunks encoded together, in order.

    A chunk with no text (empty or whitespace only) is an error naming it, or with `empty_chunks="zero"` keeps an
    all-zero vector (it scores 0 against every query; nothing is dropped). `encode_kwargs` go to
    `encode_documents` (for example `output_dim`).
    """
    if len(texts) != len(sources):
        raise ValueError(f"{len(texts)} texts for {len(sources)} source ids")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"{what} {i} must have str text, got {type(text).__name__}")
        if not text.strip() and empty_chunks == "error":
            raise ValueError(f"{what} {i} (document {sources[i]!r}) has empty text: it has nothing to embed "
                             "(empty_chunks='zero' keeps an all-zero vector for it)")
    groups = group_chunks(sources, positions, missing_source=missing_source, what=what)
    vectors = model.encode_documents([[texts[i] for i in group] for group in groups], empty_chunks=empty_chunks,
                                     **encode_kwargs)
    out: list[np.ndarray | None] = [None] * len(texts)
    for group, rows in zip(groups, vectors):
        for i, row in zip(group, rows):
            out[i] = row
    return out
