"""The retrieval core: MaxSim, the one tie rule, the blocked exact scan, and the hits every search returns.

**MaxSim.** A document's score for a query is the score of its best chunk: s(q, d) = max_c q·c.

**Scores.** `contextembed.scoring.dot` computes every score in Python: float vectors as float64 sums of their
products, rounded to float32, so a score depends only on the two vectors (never on the block, batch or matrix shape
it was computed in, which move a float32 product by an ulp or two); codes as exact integers. Databases compute
their own scores (LanceDB, Qdrant and pgvector in float32); they are compared exactly too.

**The tie rule.** Results rank by score, highest first; equal scores rank by **document id, in code-point order**
(Python's `str` order; SQL's `COLLATE "C"`), then by **chunk index** within the document, lower first. Nothing
else decides an order: not float noise, not insertion order, not a database's internal layout. Rows, documents and
chunks are therefore kept in that order wherever positions stand for them (an index stores its documents sorted
by id, each document's chunks in order), so "the lower position first" and the rule are the same thing:

>>> ranking(np.array([0.5, 0.9, 0.5, 0.1])).tolist()   # positions 0 and 2 tie: 0 first
[1, 0, 2, 3]
>>> sorted([ChunkHit("b", 0.5, 0, 0, 1, "x"), ChunkHit("a", 0.5, 3, 0, 1, "y"), ChunkHit("a", 0.5, 1, 0, 1, "z")],
...        key=hit_order)[0].index
1

Where it is enforced: `ranking`, `top_k`, `rank_of_first` and `exact_search` here; `hit_order` for hits that arrive
from a database (`stores.base`, which also fetches past a cut-off until the tie at it is complete); `ORDER BY score
DESC, doc_id COLLATE "C", chunk` in the PostgreSQL store; context-bench's metrics (`evaluation.context_bench`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from contextembed.modeling import Precision, check_count
from contextembed.scoring import check_codes, dot

# A float32 product of two D-dimensional vectors, however its sum is ordered, is within
# (D * u / (1 - D * u) + u) * |q| * |v| of the float64 sum rounded to float32 (u = 2**-24, float32's unit roundoff).
_UNIT_ROUNDOFF = 2.0**-24


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


def maxsim(queries: np.ndarray, documents: Sequence[np.ndarray], precision: Precision = "float32") -> np.ndarray:
    """Document scores, the best chunk per document: (Q, D) and a list of (n_i, D) -> (Q, len(documents)).

    `precision` is that of both queries and chunk vectors (see `contextembed.scoring`); integer scores for codes.

    >>> q = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> docs = [np.array([[0.5, 0.75], [1.0, 0.0]]), np.array([[0.0, 1.0]])]
    >>> maxsim(q, docs).tolist()
    [[1.0, 0.0], [0.75, 1.0]]
    """
    queries = _as_2d(queries, "queries")
    if len(documents) == 0:
        return np.zeros((len(queries), 0), dtype=np.float32)
    chunks = [_as_2d(doc, f"documents[{i}]") for i, doc in enumerate(documents)]
    for i, doc in enumerate(chunks):
        if doc.shape[1] != queries.shape[1]:
            raise ValueError(f"documents[{i}] has dimension {doc.shape[1]}, queries have {queries.shape[1]}")
        if len(doc) == 0:
            raise ValueError(f"documents[{i}] has no chunk vectors")
    scores = dot(queries, np.concatenate(chunks), precision)  # (Q, total chunks)
    starts = np.cumsum([0] + [len(doc) for doc in chunks[:-1]])
    return np.maximum.reduceat(scores, starts, axis=1)


@dataclass
class SearchResult:
    """Per query, best first (the tie rule). Scores are float32 for float vectors, int32 for codes."""

    doc_ids: np.ndarray  # (Q, k_docs) document ids
    doc_scores: np.ndarray  # (Q, k_docs)
    doc_best_chunks: np.ndarray  # (Q, k_docs) row of each document's best chunk
    chunk_rows: np.ndarray  # (Q, k_chunks) rows of the best chunks in the whole corpus
    chunk_scores: np.ndarray  # (Q, k_chunks)


def exact_search(
    queries: np.ndarray,
    vectors: np.ndarray,
    doc_ids: np.ndarray,
    *,
    top_k_documents: int = 10,
    top_k_chunks: int = 10,
    block_size: int | None = None,
    best_chunks: bool = True,
    precision: Precision = "float32",
) -> SearchResult:
    """Top documents (by best chunk) and top chunks for each query, scanning `vectors` in blocks.

    Args:
        queries: (Q, D) float vectors, or codes of the same `precision` as `vectors`.
        vectors: (N, D) chunk vectors of the corpus (float, or codes of `precision`); a memory map works.
        doc_ids: (N,) document index of each row, non-decreasing (each document's rows contiguous, documents in
            tie order: sorted by id).
        top_k_documents / top_k_chunks: how many to return per query.
        block_size: rows scored at once; memory is O(Q * block_size + Q * num_documents). Default: about
            16M scores per block.
        best_chunks: also return each returned document's best chunk; `doc_best_chunks` is empty otherwise.
        precision: what `queries` and `vectors` hold: `float32`, or codes made by `quantize` at `int8`, `uint8`,
            `binary` or `ubinary` (scored as in `contextembed.scoring.dot`).

    Scores and order are those of `dot` and the tie rule (lower document index, then lower row, first). The scan
    multiplies float32 blocks at full speed and bounds how far each such score can be from `dot`'s; every
    document and chunk that could reach the top k within that bound is scored again with `dot` and ranked by the
    rule, so results never depend on the block size or on how many queries run together.

    >>> v = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]], dtype=np.float32)
    >>> r = exact_search(np.array([[0.0, 1.0]], dtype=np.float32), v, np.array([0, 0, 1]), top_k_documents=2,
    ...                  top_k_chunks=2, block_size=2)
    >>> r.doc_ids.tolist(), r.doc_scores.tolist(), r.doc_best_chunks.tolist(), r.chunk_rows.tolist()
    ([[0, 1]], [[1.0, 0.5]], [[1, 2]], [[1, 2]])
    """
    queries = np.atleast_2d(np.asarray(queries))
    doc_ids = np.asarray(doc_ids)
    if block_size is None:
        block_size = max(1024, (1 << 24) // max(len(queries), 1))
    _check_inputs(queries, vectors, doc_ids, precision, top_k_documents=top_k_documents, top_k_chunks=top_k_chunks,
                  block_size=block_size)
    scan = _Scan(queries, precision, num_docs=int(doc_ids[-1]) + 1 if len(doc_ids) else 0, k_chunks=top_k_chunks)
    for start in range(0, len(vectors), block_size):
        scan.add(vectors[start : start + block_size], doc_ids[start : start + block_size], start)
    starts = np.searchsorted(doc_ids, np.arange(scan.num_docs + 1))
    doc_order, doc_scores, best_rows = scan.documents(vectors, starts, top_k_documents)
    chunk_rows, chunk_scores = scan.chunks(vectors, top_k_chunks)
    if not best_chunks:
        best_rows = np.zeros((len(queries), 0), np.int64)
    return SearchResult(doc_order, doc_scores, best_rows, chunk_rows, chunk_scores)


class _Scan:
    """The running state of `exact_search`: per query, bounds on every document's best score and the chunks that
    may still reach the top k. A float32 block product is `dot`'s score within ±`error` (per query and block), so
    a document or chunk whose upper bound falls below the k-th best lower bound can never place, nor tie."""

    def __init__(self, queries: np.ndarray, precision: str, num_docs: int, k_chunks: int):
        self.queries, self.precision, self.num_docs, self.k_chunks = queries, precision, num_docs, k_chunks
        self.integer = precision != "float32"
        n_queries = len(queries)
        # (Q, docs) each document's best block product: float32 as computed; integer scores exactly, in float64
        self.doc_best = np.full((n_queries, num_docs), -np.inf, dtype=np.float64 if self.integer else np.float32)
        self.error = np.zeros((n_queries, 1))  # (Q, 1) the largest error of any block so far
        self.rows = np.zeros((n_queries, 0), dtype=np.int64)  # (Q, kept) candidate chunks, -1 for padding
        self.low = np.zeros((n_queries, 0))  # (Q, kept) bounds of their scores
        self.high = np.zeros((n_queries, 0))
        if not self.integer:
            width = queries.shape[1]
            relative = width * _UNIT_ROUNDOFF / (1 - width * _UNIT_ROUNDOFF) + _UNIT_ROUNDOFF
            self.query_error = 1.001 * relative * np.linalg.norm(queries.astype(np.float64), axis=1)  # (Q,)

    def add(self, block: np.ndarray, block_docs: np.ndarray, start: int) -> None:
        if self.integer:
            scores, error = dot(self.queries, block, self.precision), np.zeros((len(self.queries), 1))  # exact
        else:
            block = np.asarray(block, dtype=np.float32)
            scores = self.queries.astype(np.float32) @ block.T  # (Q, n): dot's scores within ±error
            error = (self.query_error * _largest_norm(block))[:, None]  # (Q, 1)
        self.error = np.maximum(self.error, error)
        segment_starts = np.flatnonzero(np.r_[True, block_docs[1:] != block_docs[:-1]])
        docs = block_docs[segment_starts]
        # A document split across blocks keeps the max of its parts.
        self.doc_best[:, docs] = np.maximum(self.doc_best[:, docs], np.maximum.reduceat(scores, segment_starts, axis=1))
        k = min(self.k_chunks, scores.shape[1])
        kth = _kth_largest(scores, k).astype(np.float64)  # (Q, 1)
        width = int((scores >= kth - 2 * error).sum(axis=1).max())  # the block's k best and all within reach
        columns = _largest(scores, width)  # (Q, width)
        picked = np.take_along_axis(scores, columns, axis=1).astype(np.float64)
        self._merge(np.where(picked >= kth - 2 * error, columns + start, -1), picked - error, picked + error)

    def _merge(self, rows: np.ndarray, low: np.ndarray, high: np.ndarray) -> None:
        """Add candidate chunks, then drop those whose upper bound is below the k-th best lower bound."""
        rows = np.concatenate([self.rows, rows], axis=1)
        low = np.where(rows >= 0, np.concatenate([self.low, low], axis=1), -np.inf)
        high = np.where(rows >= 0, np.concatenate([self.high, high], axis=1), -np.inf)
        floor = _kth_largest(low, min(self.k_chunks, rows.shape[1]))
        keep = high >= floor
        width = int(keep.sum(axis=1).max())
        columns = _largest(high, width)
        kept = np.take_along_axis(keep, columns, axis=1)
        self.rows = np.where(kept, np.take_along_axis(rows, columns, axis=1), -1)
        self.low, self.high = (np.take_along_axis(a, columns, axis=1) for a in (low, high))

    def documents(self, vectors, starts, k) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(Q, k) document indices, scores and best rows: every document that can place, scored by `dot`."""
        n_queries = len(self.queries)
        has_rows = np.diff(starts) > 0  # a document index without rows is never returned
        k = min(k, int(has_rows.sum()))
        order, best = np.zeros((n_queries, k), np.int64), np.zeros((n_queries, k), np.int64)
        scores = np.zeros((n_queries, k), np.int32 if self.integer else np.float32)
        noisy = self.doc_best.astype(np.float64)  # within ±error of each document's best score by `dot`
        floors = _kth_largest(noisy, k) - 2 * self.error if k else np.full((n_queries, 1), np.inf)  # (Q, 1)
        for q in range(n_queries):
            candidates = np.flatnonzero((noisy[q] >= floors[q, 0]) & has_rows)  # ascending: the tie order
            lengths = starts[candidates + 1] - starts[candidates]
            firsts = np.cumsum(lengths) - lengths  # each candidate's first position in `rows`
            rows = np.arange(lengths.sum()) + np.repeat(starts[candidates] - firsts, lengths)
            exact = dot(self.queries[q : q + 1], vectors[rows], self.precision)[0]  # (rows,)
            doc_best = np.maximum.reduceat(exact, firsts) if len(rows) else exact
            chosen = ranking(doc_best)[:k]
            order[q], scores[q] = candidates[chosen], doc_best[chosen]
            # Each document's best row is the first with its best score: the lower chunk index among equal ones.
            at_best = np.flatnonzero(exact == np.repeat(doc_best, lengths))
            segment, first = np.unique(np.searchsorted(firsts, at_best, side="right") - 1, return_index=True)
            best[q] = rows[at_best[first]][np.searchsorted(segment, chosen)]
        return order, scores, best

    def chunks(self, vectors, k) -> tuple[np.ndarray, np.ndarray]:
        """(Q, k) rows and scores of the best chunks: the kept candidates scored by `dot`, ranked by the rule."""
        n_queries, k = len(self.queries), min(k, len(vectors))
        rows_out = np.zeros((n_queries, k), np.int64)
        scores_out = np.zeros((n_queries, k), np.int32 if self.integer else np.float32)
        for q in range(n_queries):
            rows = np.sort(self.rows[q][self.rows[q] >= 0])  # ascending: the tie order
            exact = dot(self.queries[q : q + 1], vectors[rows], self.precision)[0]
            chosen = ranking(exact)[:k]
            rows_out[q], scores_out[q] = rows[chosen], exact[chosen]
        return rows_out, scores_out


def _largest_norm(block: np.ndarray) -> float:
    """The largest row norm of a float32 block, rounded up (torch's reduction is several times faster than numpy's;
    reading a read-only memory map is safe, which torch warns about all the same)."""
    if not len(block):
        return 0.0
    import warnings

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        largest = float(torch.linalg.vector_norm(torch.from_numpy(block), dim=1).max())
    return largest * (1 + 1e-4)  # the norm's own float32 rounding, far above it


def _kth_largest(values: np.ndarray, k: int) -> np.ndarray:
    """(rows, 1): the k-th largest value of each row (k >= 1)."""
    import torch

    return torch.topk(torch.from_numpy(np.ascontiguousarray(values)), k, dim=1, sorted=False).values.min(
        dim=1, keepdim=True).values.numpy()


def _largest(values: np.ndarray, width: int) -> np.ndarray:
    """Columns of the `width` largest values of each row, in no particular order."""
    if width >= values.shape[1]:
        return np.broadcast_to(np.arange(values.shape[1]), values.shape).copy()
    import torch

    # torch.topk is several times faster than argpartition here.
    return torch.topk(torch.from_numpy(np.ascontiguousarray(values)), width, dim=1, sorted=False).indices.numpy()


def _check_inputs(queries, vectors, doc_ids, precision: str, **counts) -> None:
    check_codes(queries, precision, "queries")
    check_codes(vectors, precision, "vectors")
    if vectors.ndim != 2 or queries.shape[1] != vectors.shape[1]:
        raise ValueError(f"queries {queries.shape} and vectors {vectors.shape} must be 2-D with the same dimension")
    if len(doc_ids) != len(vectors):
        raise ValueError(f"doc_ids has {len(doc_ids)} entries for {len(vectors)} vectors")
    if len(doc_ids) and (np.any(np.diff(doc_ids) < 0) or doc_ids[0] < 0):
        raise ValueError("doc_ids must be non-negative and non-decreasing (each document's rows contiguous)")
    for name, value in counts.items():
        check_count(value, name)


def _as_2d(array, name: str) -> np.ndarray:
    array = np.asarray(array.cpu() if hasattr(array, "cpu") else array)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 1-D or 2-D array of vectors, got shape {array.shape}")
    return array
