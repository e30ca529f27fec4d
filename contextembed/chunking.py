"""Split raw text into chunks that remember where they came from.

Every chunker returns `Chunk`s with `text == source[start:end]`, so a caller can show a hit in
its context. Sentences come from blingfire (a maintained, fast sentence splitter), token
windows from the model's own tokenizer offsets.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Literal

from contextembed.choices import CHUNKERS, ChunkerName
from contextembed.modeling import check_count, check_text



@dataclass(frozen=True)
class Chunk:
    """A piece of a document: its text and its character span in the original string."""

    text: str
    start: int
    end: int


def split_sentences(text: str) -> list[Chunk]:
    """One chunk per sentence (blingfire). A "sentence" without a letter (a clause number such as `10.`, a lone
    figure) is joined to the sentence after it (the last one, to the one before): alone it means nothing, and as a
    chunk of its own it would be a search hit that shows the reader nothing.

    >>> [c.text for c in split_sentences("Rent is due on the first. The tenant paid $5.50 today!")]
    ['Rent is due on the first.', 'The tenant paid $5.50 today!']
    >>> [c.text for c in split_sentences("9. Rent is due on the first.\\n10. Pets are allowed. 11.")]
    ['9. Rent is due on the first.', '10. Pets are allowed. 11.']
    """
    import blingfire

    if not text.strip():
        return []
    _, spans = blingfire.text_to_sentences_and_offsets(text)
    return _join_letterless(text, _strip_spans(text, spans))


def _join_letterless(text: str, chunks: list[Chunk]) -> list[Chunk]:
    """Each chunk with no letter joined to the next chunk (trailing ones to the last chunk with a letter)."""
    joined: list[Chunk] = []
    start = None  # where the letterless run waiting for the next chunk begins
    for chunk in chunks:
        if not any(character.isalpha() for character in chunk.text):
            start = chunk.start if start is None else start
            continue
        begin = chunk.start if start is None else start
        joined.append(Chunk(text[begin : chunk.end], begin, chunk.end))
        start = None
    if start is not None:  # letterless to the end: joined to the chunk before, or one chunk when there is none
        begin = joined.pop().start if joined else start
        joined.append(Chunk(text[begin : chunks[-1].end], begin, chunks[-1].end))
    return joined


def split_paragraphs(text: str) -> list[Chunk]:
    """One chunk per block of text between blank lines.

    >>> [(c.text, c.start) for c in split_paragraphs("First one.\\n\\n  Second\\nline.\\n")]
    [('First one.', 0), ('Second\\nline.', 14)]
    """
    breaks = list(re.finditer(r"\n[ \t]*\n", text))
    starts = [0] + [m.end() for m in breaks]
    ends = [m.start() for m in breaks] + [len(text)]
    return _strip_spans(text, list(zip(starts, ends)))


def split_markdown_sections(text: str) -> list[Chunk]:
    """One chunk per markdown section: a heading line (`#` to `######`) and the text up to the next heading.

    >>> [c.text for c in split_markdown_sections("Intro.\\n# Rent\\nIs due.\\n## Late fees\\nTen dollars.")]
    ['Intro.', '# Rent\\nIs due.', '## Late fees\\nTen dollars.']
    """
    starts = [m.start() for m in re.finditer(r"^#{1,6}[ \t]", text, flags=re.M)]
    bounds = sorted({0, *starts, len(text)})
    return _strip_spans(text, list(zip(bounds[:-1], bounds[1:])))


class TokenChunks:
    """Chunks of `size` tokens of the model's tokenizer, consecutive chunks sharing `overlap` tokens (the `"tokens"`
    chunker; unrelated to the model's windows, which hold whole documents)."""

    def __init__(self, size: int = 128, overlap: int = 0):
        check_count(size, "size")
        if not isinstance(overlap, int) or not 0 <= overlap < size:
            raise ValueError(f"overlap must be an integer in [0, size), got {overlap!r}")
        self.size, self.overlap = size, overlap

    def __call__(self, text: str, tokenizer) -> list[Chunk]:
        if tokenizer is None:
            raise ValueError("the 'tokens' chunker needs the model's tokenizer")
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is not None:
            # The Rust tokenizer itself: transformers' wrapper would warn that a whole document is "longer than the
            # specified maximum sequence length", which is the point here, not an error.
            offsets = backend.encode(text, add_special_tokens=False).offsets
        else:
            offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        offsets = [(s, e) for s, e in offsets if e > s]
        chunks = []
        for first in range(0, len(offsets), self.size - self.overlap):
            span = offsets[first : first + self.size]
            chunks.append(Chunk(text[span[0][0] : span[-1][1]], span[0][0], span[-1][1]))
            if first + self.size >= len(offsets):
                break
        return chunks

    def __repr__(self) -> str:
        return f"TokenChunks(size={self.size}, overlap={self.overlap})"


ChunkerLike = ChunkerName | TokenChunks | Callable[[str], Sequence]


def chunk_text(text: str, chunker: ChunkerLike = "sentences", tokenizer=None) -> list[Chunk]:
    """Split `text` with a named chunker (`CHUNKERS`), a `TokenChunks`, or any callable.

    A callable may return strings (found in order in `text`), `(start, end)` spans or `Chunk`s, in document
    order (each starting at or after the previous one's start).

    >>> [c.start for c in chunk_text("ab ab", lambda t: ["ab", "ab"])]
    [0, 3]
    """
    if not isinstance(text, str):
        raise ValueError(f"raw text must be a str, got {type(text).__name__}")
    check_text(text, "the text")
    if isinstance(chunker, str):
        if chunker not in CHUNKERS:
            raise ValueError(f"chunker must be one of {CHUNKERS} or a callable, got {chunker!r}")
        if chunker == "tokens":
            return TokenChunks()(text, tokenizer)
        return {"sentences": split_sentences, "paragraphs": split_paragraphs,
                "markdown": split_markdown_sections}[chunker](text)
    if isinstance(chunker, TokenChunks):
        return chunker(text, tokenizer)
    if not callable(chunker):
        raise ValueError(f"chunker must be one of {CHUNKERS} or a callable, got {type(chunker).__name__}")
    pieces = chunker(text)
    if pieces is None or isinstance(pieces, (str, bytes)) or not isinstance(pieces, Iterable):
        raise ValueError(f"the chunker returned {type(pieces).__name__}: it must return a list of strings, "
                         "(start, end) spans or Chunks")
    chunks = _locate(text, list(pieces))
    if not chunks and text.strip():
        raise ValueError("the chunker returned no chunks for a non-empty text")
    return chunks


def _locate(text: str, pieces: Sequence) -> list[Chunk]:
    chunks, cursor = [], 0
    for i, piece in enumerate(pieces):
        if isinstance(piece, Chunk):
            start, end = piece.start, piece.end
        elif isinstance(piece, str):
            start = text.find(piece, cursor)
            if start < 0:
                raise ValueError(f"chunk {i} returned by the chunker is not in the text after offset {cursor}")
            end = start + len(piece)
        elif isinstance(piece, (tuple, list)) and len(piece) == 2:
            start, end = piece
        else:
            raise ValueError(f"a chunker must return strings, (start, end) spans or Chunks; chunk {i} is {piece!r}")
        if not all(isinstance(x, Integral) and not isinstance(x, bool) for x in (start, end)):
            raise ValueError(f"chunk {i} has span ({start!r}, {end!r}): offsets must be integers, got "
                             f"{type(start).__name__} and {type(end).__name__}")
        start, end = int(start), int(end)
        if not 0 <= start <= end <= len(text):
            raise ValueError(f"chunk {i} has span ({start}, {end}) outside the text of length {len(text)}")
        if chunks and start < chunks[-1].start:
            raise ValueError(f"chunk {i} starts at {start}, before chunk {i - 1} (at {chunks[-1].start}): a chunker "
                             "must return chunks in document order")
        chunks.append(Chunk(text[start:end], start, end))
        cursor = end
    return chunks


def _strip_spans(text: str, spans: list[tuple[int, int]]) -> list[Chunk]:
    chunks = []
    for start, end in spans:
        piece = text[start:end]
        if piece.strip():
            start += len(piece) - len(piece.lstrip())
            end -= len(piece) - len(piece.rstrip())
            chunks.append(Chunk(text[start:end], start, end))
    return chunks
