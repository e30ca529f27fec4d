"""What `contextembed search` prints: ranked documents with their best chunks in context, and the comparison
of late chunking with chunks encoded alone. Everything shown comes from chunk records (an index's
`chunks.jsonl`), never from the source files."""

from __future__ import annotations

import unicodedata
from itertools import groupby

import numpy as np

from contextembed.index import document_text
from contextembed.quantization import int8_scale


def show_results(query: str, result, records: list[dict], *, chunks_per_doc: int, context: int,
                 precision: str, output_dim: int, int8_clip_sigmas: float | None) -> None:
    """Print the ranked documents of one query (`result` from `exact_search`) with their best chunks."""
    texts = {doc: document_text(list(rows)) for doc, rows in groupby(records, key=lambda r: r["doc"])}
    print(f'Query: "{printable(query)}"')
    print(f"{len(texts)} documents, {len(records)} chunks, each embedded with its whole document in view\n")
    chunk_rank = {int(row): rank for rank, row in enumerate(result.chunk_rows[0])}
    for rank, (doc, score) in enumerate(zip(result.doc_ids[0], result.doc_scores[0]), 1):
        rows = sorted((r for r in range(len(records)) if records[r]["doc"] == doc),
                      key=lambda r: chunk_rank[r])[:chunks_per_doc]
        print(f"{rank}. {printable(records[rows[0]]['path'])}  (score {show_score(score, precision, output_dim, int8_clip_sigmas)})")
        for row in rows:
            record = records[row]
            score = result.chunk_scores[0][chunk_rank[row]]
            print(f"   chunk {record['chunk']} [chars {record['start']}-{record['end']}] score "
                  f"{show_score(score, precision, output_dim, int8_clip_sigmas)}")
            print(f"      {snippet(texts[int(doc)], record['start'], record['end'], context)}")
        print()


def results_json(query: str, result, records: list[dict], *, precision: str) -> dict:
    """The ranked documents of one query as one JSON-ready object: each document's name, score and best chunk
    (index, character offsets, text). Scores are cosines for float vectors and the integer score for codes.

    >>> from types import SimpleNamespace
    >>> records = [{"doc": 0, "path": "a.txt", "chunk": 0, "start": 0, "end": 4, "text": "Rent"}]
    >>> found = SimpleNamespace(doc_ids=[[0]], doc_scores=[[0.5]], doc_best_chunks=[[0]])
    >>> results_json("rent?", found, records, precision="float32")["documents"]
    [{'document': 'a.txt', 'score': 0.5, 'chunk': {'index': 0, 'start': 0, 'end': 4, 'text': 'Rent'}}]
    """
    as_number = float if precision == "float32" else int
    documents = []
    for doc, score, row in zip(result.doc_ids[0], result.doc_scores[0], result.doc_best_chunks[0]):
        record = records[int(row)]
        documents.append({"document": record["path"], "score": as_number(score),
                          "chunk": {"index": record["chunk"], "start": record["start"], "end": record["end"],
                                    "text": record["text"]}})
    return {"query": query, "precision": precision, "documents": documents}


def hits_json(query: str, hits, *, precision: str) -> dict:
    """`results_json`'s object for documents found in a store (`DocumentHit`s, best first).

    >>> from contextembed.stores import ChunkHit, DocumentHit
    >>> hit = DocumentHit("a.txt", 0.5, ChunkHit("a.txt", 0.5, 0, 0, 4, "Rent"))
    >>> hits_json("rent?", [hit], precision="float32")["documents"]
    [{'document': 'a.txt', 'score': 0.5, 'chunk': {'index': 0, 'start': 0, 'end': 4, 'text': 'Rent'}}]
    """
    as_number = float if precision == "float32" else int
    return {"query": query, "precision": precision,
            "documents": [{"document": h.document, "score": as_number(h.score), "chunk": h.chunk.to_dict()}
                          for h in hits]}


def show_store_results(query: str, hits, *, uri: str, chunks: int, precision: str, output_dim: int,
                       int8_clip_sigmas: float | None) -> None:
    """Print the ranked documents found in a store, each with its best chunk."""
    print(f'Query: "{printable(query)}"')
    print(f"{chunks} chunks in {printable(uri)}, each embedded with its whole document in view\n")
    for rank, hit in enumerate(hits, 1):
        score = show_score(hit.score, precision, output_dim, int8_clip_sigmas)
        print(f"{rank}. {printable(hit.document)}  (score {score})")
        print(f"   chunk {hit.chunk.index} [chars {hit.chunk.start}-{hit.chunk.end}]")
        print(f"      «{one_line(hit.chunk.text)}»\n")


def show_comparison(model, query: np.ndarray, vectors: np.ndarray, records: list[dict], *, output_dim,
                    batch_size: int) -> None:
    """Rank the chunks with and without their documents' context, side by side (float vectors)."""
    alone = model.encode_documents([c["text"] for c in records], output_dim=output_dim, batch_size=batch_size,
                                   show_progress_bar=False)
    n = min(8, len(records))
    print(f"Top {n} chunks in the whole corpus:")
    for title, scores in (("with their document (late chunking)", query[0] @ vectors.T),
                          ("each chunk encoded alone", query[0] @ np.concatenate(alone).T)):
        print(f"  {title}:")
        for row in np.lexsort((np.arange(len(scores)), -scores))[:n]:
            record = records[row]
            tied = int(np.sum(np.abs(scores - scores[row]) <= 1e-6)) - 1
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
