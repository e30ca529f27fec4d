"""Search with evidence: for each document found, its answer (the best chunk) and the chunks that make it verifiable.

A reader (a person, or an agent deciding what to read) needs the answer sentence **and** the few sentences elsewhere
in the document that say which lease, which section, who "she" is. `search` returns them from any store (the folder
index, LanceDB, Qdrant, PostgreSQL): the documents ranked by their best chunk (MaxSim), and with `evidence=N`, each
document's next-best N chunks by the same score, the answer left out, ties by the rule of `contextembed.retrieval`.
A store fetches the chunks of the documents it returns by id (never scanning the corpus again), and their scores are
computed here, from the stored vectors, with `contextembed.scoring.dot`.

`document_evidence` builds the same result from any document's chunks and scores, such as the vectors the HTTP
server returns (`/v1/contextualizedembeddings`); `reader_view` shows a result as one passage: the answer and its
evidence in document order, the answer marked, a marker wherever chunks were left out.

>>> from contextembed.chunking import Chunk
>>> chunks = [Chunk("Lease for 88 Ocean Drive.", 0, 25), Chunk("Rent is due monthly.", 26, 46),
...           Chunk("Pets are allowed.", 47, 64), Chunk("The Tenant pays for electricity.", 65, 97)]
>>> hit = document_evidence("lease.txt", chunks, [0.6, 0.2, 0.1, 0.9], evidence=1)
>>> hit.chunk.text, [e.text for e in hit.evidence]
('The Tenant pays for electricity.', ['Lease for 88 Ocean Drive.'])
>>> reader_view(hit)
'Lease for 88 Ocean Drive. […] «The Tenant pays for electricity.»'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from contextembed.chunking import Chunk
from contextembed.modeling import check_count
from contextembed.ranking import ChunkHit, DocumentHit, ranking
from contextembed.retrieval import SearchResult, exact_search
from contextembed.scoring import dot

GAP = "[…]"
ANSWER_MARKS = ("«", "»")


def search(store, query: np.ndarray, k: int = 10, *, evidence: int = 0, where=None) -> list[DocumentHit]:
    """The k best documents of `store` for one query vector (of the store's precision), best first, each with its
    answer chunk and, with `evidence=N`, up to N more of its chunks (all the others, for a document with N or
    fewer: the number is a most, never an error).

    `where` filters by document metadata as `store.search_documents` does. Evidence scores are those of
    `contextembed.scoring.dot` on the stored vectors (a database's own score of the answer may differ from it in the
    last float32 digit).
    """
    check_count(k, "k")
    evidence = check_evidence(evidence)
    hits = store.search_documents(query, k, where)
    if not evidence or not hits:
        return hits
    documents = {d.id: d for d in store.fetch_documents([h.document for h in hits])}
    query = np.asarray(query)
    precision = store.info.precision
    found = []
    for hit in hits:
        document = documents.get(hit.document)
        if document is None:  # deleted by another writer since it was found: the answer alone
            found.append(hit)
            continue
        scores = dot(np.atleast_2d(query), np.asarray(document.vectors), precision)[0]  # (chunks,)
        with_evidence = document_evidence(hit.document, document.chunks, scores, evidence, answer=hit.chunk.index,
                                          metadata=hit.chunk.metadata)
        found.append(replace(hit, evidence=with_evidence.evidence))
    return found


def document_evidence(document: str, chunks: Sequence[Chunk | str], scores: Sequence[float], evidence: int, *,
                      answer: int | None = None, metadata: dict | None = None) -> DocumentHit:
    """One document's answer and evidence from its chunks and their scores for a query (higher is better).

    Args:
        document: the document's id.
        chunks: its chunks in order, as `Chunk`s (text and character offsets) or strings (offsets then count in
            the chunks joined by one space).
        scores: (len(chunks),) each chunk's score, e.g. `chunk_vectors @ query_vector` for the vectors of
            `/v1/contextualizedembeddings` and of the query.
        evidence: how many more chunks to return (at most; a document with fewer returns all its others).
        answer: the answer's index when it is already known (a store's best chunk); default: the best by the rule.

    The answer's score is the document's score; evidence comes best first, ties by the lower chunk index.
    """
    evidence = check_evidence(evidence)
    scores = np.asarray(scores)
    if scores.ndim != 1 or len(scores) != len(chunks) or not len(chunks):
        raise ValueError(f"scores must hold one number per chunk ({len(chunks)} chunks), got shape {scores.shape}")
    chunks = _as_chunks(chunks)
    order = ranking(scores)
    answer = int(order[0]) if answer is None else answer
    if not 0 <= answer < len(chunks):
        raise ValueError(f"answer must be a chunk index in [0, {len(chunks)}), got {answer!r}")
    as_number = float if np.issubdtype(scores.dtype, np.floating) else int

    def hit(i: int) -> ChunkHit:
        return ChunkHit(document, as_number(scores[i]), i, chunks[i].start, chunks[i].end, chunks[i].text,
                        dict(metadata or {}))

    more = [int(i) for i in order if i != answer][:evidence]
    return DocumentHit(document, as_number(scores[answer]), hit(answer), tuple(hit(i) for i in more))


def reader_view(hit: DocumentHit, *, gap: str = GAP, marks: tuple[str, str] = ANSWER_MARKS) -> str:
    """The answer and its evidence as one passage in document order: the answer between `marks`, `gap` wherever
    chunks were left out (before the first one shown, too, unless it is the document's first chunk).

    >>> answer = ChunkHit("d", 0.9, 3, 40, 52, "She pays it.")
    >>> reader_view(DocumentHit("d", 0.9, answer, (ChunkHit("d", 0.5, 2, 20, 39, "Jane is the tenant."),)))
    '[…] Jane is the tenant. «She pays it.»'
    """
    shown = sorted([hit.chunk, *hit.evidence], key=lambda c: c.index)
    parts, previous = [], -1
    for chunk in shown:
        if chunk.index > previous + 1:
            parts.append(gap)
        text = " ".join(chunk.text.split())
        parts.append(f"{marks[0]}{text}{marks[1]}" if chunk is hit.chunk else text)
        previous = chunk.index
    return " ".join(parts)


def check_evidence(evidence) -> int:
    """`evidence` as a count of chunks: a non-negative integer, else a `ValueError` naming it.

    >>> check_evidence(2)
    2
    >>> check_evidence(-1)
    Traceback (most recent call last):
    ...
    ValueError: evidence must be a non-negative integer, got -1
    """
    if not isinstance(evidence, (int, np.integer)) or isinstance(evidence, bool) or evidence < 0:
        raise ValueError(f"evidence must be a non-negative integer, got {evidence!r}")
    return int(evidence)


def _as_chunks(chunks: Sequence[Chunk | str]) -> list[Chunk]:
    """`Chunk`s as they are; strings placed as if joined by one space."""
    out, start = [], 0
    for i, chunk in enumerate(chunks):
        if isinstance(chunk, str):
            out.append(Chunk(chunk, start, start + len(chunk)))
        elif isinstance(chunk, Chunk):
            out.append(chunk)
        else:
            raise ValueError(f"chunks[{i}] must be a Chunk or a string, got {type(chunk).__name__}")
        start = out[-1].end + 1
    return out


__all__ = ["GAP", "SearchResult", "check_evidence", "document_evidence", "exact_search", "reader_view", "search"]
