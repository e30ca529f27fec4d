"""What `contextembed search` prints: ranked documents with their best chunks (or answer and evidence) in context,
and the comparison of late chunking with chunks encoded alone. Everything shown comes from what the store holds
(an index's `chunks.jsonl`, a database's rows), never from the source files."""

from __future__ import annotations

import unicodedata

import numpy as np

from contextembed.quantization import int8_scale


def show_results(query: str, hits, texts: dict[str, str], *, header: str, context: int, precision: str,
                 output_dim: int, int8_clip_sigmas: float | None, evidence: bool = False) -> None:
    """Print the ranked documents of one query (`DocumentHit`s from `contextembed.search.search`), each with its
    chunks in their context (`texts`: each document's text, rebuilt from its chunks): the best chunk and the next
    ones; with `evidence`, labelled as the answer and its evidence, then the reader view."""
    from contextembed.search import reader_view

    print(f'Query: "{printable(query)}"')
    print(f"{header}\n")
    for rank, hit in enumerate(hits, 1):
        score = show_score(hit.score, precision, output_dim, int8_clip_sigmas)
        print(f"{rank}. {printable(hit.document)}  (score {score})")
        for i, chunk in enumerate([hit.chunk, *hit.evidence]):
            label = ("answer   " if i == 0 else "evidence ") if evidence else ""
            print(f"   {label}chunk {chunk.index} [chars {chunk.start}-{chunk.end}] score "
                  f"{show_score(chunk.score, precision, output_dim, int8_clip_sigmas)}")
            print(f"      {snippet(texts[hit.document], chunk.start, chunk.end, context)}")
        if evidence:
            print(f"   reader view: {printable(reader_view(hit))}")
        print()


def results_json(query: str, hits, *, precision: str, evidence: bool = False) -> dict:
    """The ranked documents of one query as one JSON-ready object: each document's name, score and best chunk
    (index, character offsets, text); with `evidence`, also its evidence chunks (each with its score) and the
    reader view. Scores are cosines for float vectors and the integer score for codes.

    >>> from contextembed.ranking import ChunkHit, DocumentHit
    >>> evidence = (ChunkHit("a.txt", 0.25, 0, 0, 4, "Flat"),)
    >>> hit = DocumentHit("a.txt", 0.5, ChunkHit("a.txt", 0.5, 1, 5, 9, "Rent"), evidence)
    >>> results_json("rent?", [hit], precision="float32")["documents"]
    [{'document': 'a.txt', 'score': 0.5, 'chunk': {'index': 1, 'start': 5, 'end': 9, 'text': 'Rent'}}]
    >>> results_json("rent?", [hit], precision="float32", evidence=True)["documents"][0]["evidence"]
    [{'index': 0, 'score': 0.25, 'start': 0, 'end': 4, 'text': 'Flat'}]
    """
    from contextembed.search import reader_view

    as_number = float if precision == "float32" else int
    documents = []
    for hit in hits:
        entry = {"document": hit.document, "score": as_number(hit.score), "chunk": hit.chunk.to_dict()}
        if evidence:
            entry["evidence"] = [{**c.to_dict(score=True), "score": as_number(c.score)} for c in hit.evidence]
            entry["reader_view"] = reader_view(hit)
        documents.append(entry)
    return {"query": query, "precision": precision, "documents": documents}


def show_comparison(model, query: np.ndarray, vectors: np.ndarray, records: list[dict], *, output_dim,
                    batch_size: int) -> None:
    """Rank the chunks with and without their documents' context, side by side (float vectors), by the tie rule."""
    from contextembed.corpus import encode_once
    from contextembed.ranking import ranking
    from contextembed.scoring import dot

    # Each distinct text encoded once: copies of a sentence get one vector, and tie exactly.
    alone = encode_once(model, [[c["text"]] for c in records], output_dim=output_dim, batch_size=batch_size,
                        show_progress_bar=False)
    n = min(8, len(records))
    print(f"Top {n} chunks in the whole corpus:")
    for title, scores in (("with their document (late chunking)", dot(query, vectors)[0]),
                          ("each chunk encoded alone", dot(query, alone)[0])):
        print(f"  {title}:")
        for row in ranking(scores)[:n]:
            record = records[row]
            tied = int(np.sum(scores == scores[row])) - 1
            note = f"  (tied with {tied} other chunks)" if tied else ""
            print(f"    {scores[row]:.4f}  {printable(record['path']):<28} {one_line(record['text'])[:60]}{note}")
    print("\nIdentical sentences in different documents get identical vectors when encoded alone; with late "
          "chunking each carries what its own document says around it.")


def show_score(score, precision: str, output_dim: int, int8_clip_sigmas: float | None) -> str:
    """A score as the cosine it stands for; codes also show their integer score. `int8_clip_sigmas=None` (codes of
    unnormalised vectors, the tanh scheme) stands for no cosine: only the integer score is shown.

    >>> show_score(0.5, "float32", 384, 5.0)
    '0.5000'
    >>> show_score(100, "binary", 384, 5.0)
    '100 (binary: 384 - 2 x Hamming distance)'
    """
    if precision == "float32":
        return f"{float(score):.4f}"
    if precision in ("int8", "uint8") and int8_clip_sigmas is None:
        return f"{int(score)} ({precision} tanh codes, dot product)"
    if precision in ("int8", "uint8"):
        return f"{float(score) / int8_scale(output_dim, int8_clip_sigmas) ** 2:.4f} ({precision} {int(score)})"
    return f"{int(score)} ({precision}: {output_dim} - 2 x Hamming distance)"


def snippet(text: str, start: int, end: int, context: int) -> str:
    """The chunk in «» with up to `context` characters on each side, on one line.

    >>> snippet("Alpha beta. Gamma delta. Epsilon.", 12, 24, 6)
    '…beta. «Gamma delta.» Epsil…'
    """
    before, after = text[max(0, start - context) : start], text[end : end + context]
    return (("…" if start > context else "") + one_line(before, keep_edges=True) + "«" + one_line(text[start:end])
            + "»" + one_line(after, keep_edges=True) + ("…" if end + context < len(text) else ""))


def printable(text: str) -> str:
    r"""`text` safe to print on a terminal: control and format characters (escape sequences such as `ESC]0;...BEL`
    or `ESC[2J`, bidirectional overrides) are shown escaped instead of being sent to the terminal. An index someone
    shares is data, and data must not drive the reader's terminal.

    >>> printable("rent\x1b]0;pwned\x07 due\u202e")
    'rent\\x1b]0;pwned\\x07 due\\u202e'
    """
    return "".join(_escape(c) if unicodedata.category(c) in ("Cc", "Cf") and c not in "\n\t" else c for c in text)


def _escape(character: str) -> str:
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def one_line(text: str, keep_edges: bool = False) -> str:
    """Whitespace runs collapsed to one space; control characters escaped (`printable`).

    >>> one_line("  a\\n b  ", keep_edges=True)
    ' a b '
    """
    collapsed = " ".join(printable(text).split())
    if keep_edges and text[:1].isspace():
        collapsed = " " + collapsed
    if keep_edges and text[-1:].isspace() and collapsed.strip():
        collapsed += " "
    return collapsed
