"""Chunkers: offsets cover exactly the chunk texts, and every bad chunker is named."""

from __future__ import annotations

import pytest

from contextembed.chunking import CHUNKERS, Chunk, TokenChunks, chunk_text

TEXT = (
    "# Lease\nThis lease is for 14 Harbor Street. The tenant is Ana Ruiz.\n\n"
    "## Rent\nMonthly rent is $1,850. It is due on the first day of each month.\n\n"
    "Café rules: no smoking — ever. Quiet hours start at 10 p.m.\n"
)


@pytest.mark.parametrize("chunker", [c for c in CHUNKERS] + [TokenChunks(8, 3)])
def test_offsets_round_trip(built, chunker):
    tokenizer = built["bert"][2].tokenizer
    chunks = chunk_text(TEXT, chunker, tokenizer=tokenizer)
    assert chunks
    for chunk in chunks:
        assert TEXT[chunk.start : chunk.end] == chunk.text
        assert chunk.text.strip() == chunk.text and chunk.text
    starts = [c.start for c in chunks]
    assert starts == sorted(starts)


def test_sentences_cover_the_text_in_order():
    chunks = chunk_text(TEXT, "sentences")
    assert "It is due on the first day of each month." in [c.text for c in chunks]
    joined = "".join(TEXT[c.start : c.end] for c in chunks)
    assert "".join(joined.split()) == "".join(TEXT.split())


def test_paragraphs_and_markdown_sections():
    assert len(chunk_text(TEXT, "paragraphs")) == 3
    sections = chunk_text(TEXT, "markdown")
    assert [s.text.splitlines()[0] for s in sections] == ["# Lease", "## Rent"]
    assert sections[1].text.endswith("10 p.m.")


def test_token_windows_overlap(built):
    tokenizer = built["bert"][2].tokenizer
    chunks = chunk_text(TEXT, TokenChunks(10, 4), tokenizer=tokenizer)
    assert len(chunks) > 3
    assert all(a.start < b.start < a.end for a, b in zip(chunks, chunks[1:]))  # consecutive windows overlap


def test_callable_chunkers():
    assert chunk_text("ab ab", lambda t: ["ab", "ab"]) == [Chunk("ab", 0, 2), Chunk("ab", 3, 5)]
    assert chunk_text("hello world", lambda t: [(0, 5), (6, 11)])[1] == Chunk("world", 6, 11)


@pytest.mark.parametrize(
    ("chunker", "message"),
    [
        ("words", r"chunker must be one of \('sentences', 'paragraphs', 'markdown', 'tokens'\)"),
        (42, "chunker must be one of"),
        (lambda t: ["absent"], "chunk 0 returned by the chunker is not in the text"),
        (lambda t: [(0, 999)], "outside the text"),
        (lambda t: [3.5], "a chunker must return strings"),
    ],
)
def test_bad_chunkers(chunker, message):
    with pytest.raises(ValueError, match=message):
        chunk_text("some text", chunker)


def test_bad_token_windows():
    with pytest.raises(ValueError, match="size must be a positive integer"):
        TokenChunks(0)
    with pytest.raises(ValueError, match=r"overlap must be an integer in \[0, size\)"):
        TokenChunks(4, 4)
    with pytest.raises(ValueError, match="needs the model's tokenizer"):
        chunk_text("text", "tokens")


def test_empty_text_has_no_chunks():
    assert chunk_text("   \n ", "sentences") == []
    assert chunk_text("", "paragraphs") == []


