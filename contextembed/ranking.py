"""The one tie rule, and everything that orders results by it: the hits, rankings of scores, merging ranked lists,
a document's best chunk, and reading a database's ranking past its cut-off until a tie there is complete.

**The tie rule.** Results rank by score, highest first; equal scores rank by **document id, in code-point order**
(Python's `str` order; SQL's `COLLATE "C"`), then by **chunk index** within the document, lower first. Nothing
else decides an order: not float noise, not insertion order, not a database's internal layout, not which segment of
an index a document sits in. Where positions stand for documents and chunks (an index segment keeps its documents
sorted by id, each document's chunks in order), "the lower position first" and the rule are the same thing:

>>> ranking(np.array([0.5, 0.9, 0.5, 0.1])).tolist()   # positions 0 and 2 tie: 0 first
[1, 0, 2, 3]
>>> sorted([ChunkHit("b", 0.5, 0, 0, 1, "x"), ChunkHit("a", 0.5, 3, 0, 1, "y"), ChunkHit("a", 0.5, 1, 0, 1, "z")],
...        key=hit_order)[0].index
1

**MaxSim.** A document's score for a query is the score of its best chunk (`document_maxima` over rows grouped by
document); among a ranking of chunks, a document's first chunk is its best (`best_per_document`). Rows are put in
the rule's order once (`rows_in_id_order`), so that positions stand for it. Scores themselves come from `contextembed.scoring.dot` (or a
database's own arithmetic); `contextembed.retrieval.exact_search` is the exact scan over vectors.

Everything that ranks calls this module: the exact scan, the folder index (which merges its segments' rankings with
`merge_ranked`), every database store (`read_ranked`, `rank_documents`: a database returns its top k in any order
among equal scores and may cut a run of equal scores anywhere), and the evaluation's metrics (`rank_of_first`). The
PostgreSQL store also orders by the rule in SQL (`ORDER BY score DESC, doc_id COLLATE "C", chunk`).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from contextembed.modeling import check_count


@dataclass(frozen=True)
class ChunkHit:
    """One chunk found for a query: its document, score, position in the document, character offsets and text."""

    document: str
    score: float
    index: int  # the chunk's position in its document
    start: int
    end: int
    text: str
    metadata: dict = field(default_factory=dict)

    def to_dict(self, score: bool = False) -> dict:
        """`{"index", "start", "end", "text"}` (with `score`, also the score first)."""
        found = {"index": self.index, "start": self.start, "end": self.end, "text": self.text}
        return {"index": self.index, "score": self.score, **found} if score else found


@dataclass(frozen=True)
class DocumentHit:
    """One document found for a query, scored by its best chunk (its answer), with `evidence`: the document's
    next-best chunks by the same score, best first (empty unless asked for; see `contextembed.search`)."""

    document: str
    score: float
    chunk: ChunkHit  # the document's best chunk
    evidence: tuple[ChunkHit, ...] = ()


def hit_order(hit: ChunkHit | DocumentHit) -> tuple:
    """The sort key of the tie rule for hits: score descending, then document id, then chunk index."""
    index = hit.index if isinstance(hit, ChunkHit) else hit.chunk.index
    return (-hit.score, hit.document, index)


def ranking(scores: np.ndarray) -> np.ndarray:
    """Positions by the tie rule: highest score first, equal scores by lower position.

    >>> ranking(np.array([3, 7, 7, 1])).tolist()
    [1, 2, 0, 3]
    """
    scores = np.asarray(scores)
    return np.lexsort((np.arange(len(scores)), -scores.astype(np.float64)))


def first_of(scores: np.ndarray, is_hit: np.ndarray) -> int | None:
    """Position of the hit that ranks first (highest score, the lower position among equal ones); None if none.

    >>> first_of(np.array([0.9, 0.5, 0.2, 0.5]), np.array([False, True, False, True]))
    1
    """
    hits = np.flatnonzero(is_hit)
    if not len(hits):
        return None
    return int(hits[scores[hits] == scores[hits].max()].min())


def rank_of_first(scores: np.ndarray, is_hit: np.ndarray) -> tuple[int | None, bool]:
    """1-based rank of the best-ranked hit under the tie rule, and whether a tie with a non-hit decided whether
    it ranks first (a non-hit with the same score and nothing scoring above).

    >>> rank_of_first(np.array([0.5, 0.2, 0.5]), np.array([False, False, True]))   # tied: position 0 first
    (2, True)
    >>> rank_of_first(np.array([0.2, 0.9, 0.5]), np.array([False, False, True]))
    (2, False)
    """
    best = first_of(scores, is_hit)
    if best is None:
        return None, False
    others = np.ones(len(scores), dtype=bool)
    others[best] = False
    above = others & (scores > scores[best])
    tied = others & (scores == scores[best])
    rank = int(above.sum() + (tied & (np.arange(len(scores)) < best)).sum()) + 1
    return rank, bool((tied & ~np.asarray(is_hit)).any() and not above.any())


def top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Columns of the k largest scores per row and their scores, best first; ties go to the lower column.

    >>> idx, val = top_k(np.array([[0.1, 0.9, 0.5, 0.9]]), k=3)
    >>> idx.tolist(), val.tolist()
    ([[1, 3, 2]], [[0.9, 0.9, 0.5]])
    """
    check_count(k, "k")
    scores = np.atleast_2d(scores)
    n_rows, n_cols = scores.shape
    k = min(k, n_cols)
    if k == 0:
        return np.zeros((n_rows, 0), dtype=np.int64), scores[:, :0]
    if k < n_cols:
        import torch

        # torch.topk is several times faster than argpartition here; ties are settled below either way.
        candidates = torch.topk(torch.from_numpy(np.ascontiguousarray(scores)), k, dim=1, sorted=False).indices.numpy()
    else:
        candidates = np.broadcast_to(np.arange(n_cols), (n_rows, n_cols))
    candidate_scores = np.take_along_axis(scores, candidates, axis=1)
    order = np.lexsort((candidates, -candidate_scores.astype(np.float64)), axis=1)
    indices = np.take_along_axis(candidates, order, axis=1).astype(np.int64)
    if k < n_cols:
        # topk may cut a run of equal scores arbitrarily; settle those rows by column order.
        kth = candidate_scores.min(axis=1, keepdims=True)
        at_kth = (scores == kth).sum(axis=1) > (candidate_scores == kth).sum(axis=1)
        for row in np.flatnonzero(at_kth):
            cols = np.flatnonzero(scores[row] >= kth[row, 0])
            indices[row] = cols[np.lexsort((cols, -scores[row, cols].astype(np.float64)))[:k]]
    return indices, np.take_along_axis(scores, indices, axis=1)


def document_maxima(scores: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """MaxSim over rows grouped by document: (Q, N) row scores, `starts` the first row of each document (non-empty,
    in order) -> (Q, documents), each document's best row score.

    >>> document_maxima(np.array([[0.2, 0.9, 0.4, 0.1]]), np.array([0, 2, 3])).tolist()
    [[0.9, 0.4, 0.1]]
    """
    scores = np.atleast_2d(scores)
    if scores.shape[1] == 0:
        return scores[:, :0]
    return np.maximum.reduceat(scores, np.asarray(starts), axis=1)


def rows_in_id_order(row_document: np.ndarray, document_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The reorder that makes positions follow the tie rule: (rows in the order of their documents' ids, each
    document's rows kept in order; and each row's new document position), from each row's document position and the
    documents' ids.

    >>> rows, new_document = rows_in_id_order(np.array([0, 0, 1]), ["b.txt", "a.txt"])
    >>> rows.tolist(), new_document.tolist()
    ([2, 0, 1], [0, 1, 1])
    """
    row_document = np.asarray(row_document)
    order = sorted(range(len(document_ids)), key=lambda d: document_ids[d])
    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order))
    rows = np.argsort(position[row_document], kind="stable")  # documents by id, each one's rows in order
    return rows.astype(np.int64), position[row_document[rows]]


def merge_ranked(rankings: Iterable[list], k: int) -> list:
    """The k first hits of several rankings that are each in rule order (one per segment of an index, say).

    >>> a = [ChunkHit("b", 0.9, 0, 0, 1, "x"), ChunkHit("b", 0.5, 1, 0, 1, "y")]
    >>> b = [ChunkHit("a", 0.5, 2, 0, 1, "z")]
    >>> [(h.document, h.index) for h in merge_ranked([a, b], k=2)]
    [('b', 0), ('a', 2)]
    """
    return list(heapq.merge(*rankings, key=hit_order))[:k]


def best_per_document(ranked: Iterable[ChunkHit]) -> list[DocumentHit]:
    """Documents in MaxSim order from a ranking of chunks: a document's first chunk in it is its best.

    >>> ranked = [ChunkHit("b", 0.9, 3, 0, 1, "x"), ChunkHit("b", 0.7, 0, 0, 1, "y"), ChunkHit("a", 0.5, 1, 0, 1, "z")]
    >>> [(d.document, d.score, d.chunk.index) for d in best_per_document(ranked)]
    [('b', 0.9, 3), ('a', 0.5, 1)]
    """
    best: dict[str, ChunkHit] = {}
    for hit in ranked:
        best.setdefault(hit.document, hit)
    return [DocumentHit(h.document, h.score, h) for h in best.values()]


def read_ranked(top: Callable[[int], list], k: int) -> tuple[list, bool]:
    """At least the k best hits (chunks, or documents) in rule order from `top(n)`, a database's n best in any
    order whose cut may fall inside a run of equal scores (fewer when it holds fewer), and whether that is every hit
    there is. `top` is asked for more until the run of equal scores at the k-th is complete: every hit scoring above
    the last one returned is there, in its place.

    >>> scores = [0.9, 0.5, 0.5, 0.1, 0.0, 0.0]   # the database cuts the tie at 2: asked for 4, the run is whole
    >>> top = lambda n: [ChunkHit(str(i), s, 0, 0, 1, "") for i, s in enumerate(scores)][:n][::-1]
    >>> hits, complete = read_ranked(top, 2)
    >>> [h.document for h in hits], complete
    (['0', '1', '2', '3'], False)
    """
    fetch = k
    while True:
        hits = sorted(top(fetch), key=hit_order)
        if len(hits) < fetch:
            return hits, True
        if hits[-1].score < hits[k - 1].score:  # the run of equal scores at k ends inside what came back
            return hits, False
        fetch *= 2


def rank_documents(top: Callable[[int], list[ChunkHit]], k: int) -> list[DocumentHit]:
    """The k best documents (MaxSim, the rule), each with its best chunk, from `top(n)` as `read_ranked` takes it.

    Chunks are read until k documents have appeared, and the k-th scores above the last chunk read, so every chunk
    that could tie it came back: exact whenever `top` is.

    >>> scores = {"a": [0.9, 0.8], "b": [0.8], "c": [0.1]}
    >>> chunks = [ChunkHit(d, s, i, 0, 1, "") for d, ss in scores.items() for i, s in enumerate(ss)]
    >>> [(h.document, h.score) for h in rank_documents(lambda n: sorted(chunks, key=hit_order)[:n], 2)]
    [('a', 0.9), ('b', 0.8)]
    """
    fetch = max(4 * k, 64)
    while True:
        ranked, complete = read_ranked(top, fetch)
        documents = best_per_document(ranked)
        if complete or (len(documents) >= k and documents[k - 1].score > ranked[-1].score):
            return documents[:k]
        fetch *= 4


__all__ = ["ChunkHit", "DocumentHit", "best_per_document", "document_maxima", "first_of", "hit_order", "merge_ranked",
           "rank_documents", "rank_of_first", "ranking", "read_ranked", "rows_in_id_order", "top_k"]
