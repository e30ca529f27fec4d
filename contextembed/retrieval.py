"""The retrieval core: MaxSim over chunk vectors and the blocked exact scan (`exact_search`).

**MaxSim.** A document's score for a query is the score of its best chunk: s(q, d) = max_c q·c.

**Scores.** `contextembed.scoring.dot` computes every score in Python: float vectors as float64 sums of their
products, rounded to float32, so a score depends only on the two vectors (never on the block, batch or matrix shape
it was computed in, which move a float32 product by an ulp or two); codes as exact integers. Databases compute
their own scores (LanceDB, Qdrant and pgvector in float32); they are compared exactly too.

**Order.** Everything here ranks by the one tie rule of `contextembed.ranking` (score, then document id, then chunk
index): rows, documents and chunks are kept in that order wherever positions stand for them (an index segment stores
its documents sorted by id, each document's chunks in order), so "the lower position first" is the rule.

**Non-finite vectors.** A NaN or infinite value in a query or a chunk vector has no place in a ranking: it is a
`ValueError` naming the query or the row, never a crash from inside nor a silent rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from contextembed.modeling import Precision, check_count
from contextembed.ranking import document_maxima, ranking
from contextembed.scoring import check_codes, dot

# A float32 product of two D-dimensional vectors, however its sum is ordered, is within
# (D * u / (1 - D * u) + u) * |q| * |v| of the float64 sum rounded to float32 (u = 2**-24, float32's unit roundoff).
_UNIT_ROUNDOFF = 2.0**-24


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
    return document_maxima(scores, np.cumsum([0] + [len(doc) for doc in chunks[:-1]]))


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
    live_documents: np.ndarray | None = None,
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
        live_documents: (num documents,) booleans: only these documents (and their rows) are ranked; the others
            are skipped as if absent (deleted documents, or those a filter leaves out), without copying `vectors`.

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
    num_docs = int(doc_ids[-1]) + 1 if len(doc_ids) else 0
    live = _checked_live(live_documents, num_docs)
    scan = _Scan(queries, precision, live, k_chunks=top_k_chunks)
    for start in range(0, len(vectors), block_size):
        scan.add(vectors[start : start + block_size], doc_ids[start : start + block_size], start)
    starts = np.searchsorted(doc_ids, np.arange(scan.num_docs + 1))
    doc_order, doc_scores, best_rows = scan.documents(vectors, starts, top_k_documents)
    chunk_rows, chunk_scores = scan.chunks(vectors, np.diff(starts)[live].sum(), top_k_chunks)
    if not best_chunks:
        best_rows = np.zeros((len(queries), 0), np.int64)
    return SearchResult(doc_order, doc_scores, best_rows, chunk_rows, chunk_scores)


class _Scan:
    """The running state of `exact_search`: per query, bounds on every document's best score and the chunks that
    may still reach the top k. A float32 block product is `dot`'s score within ±`error` (per query and block), so
    a document or chunk whose upper bound falls below the k-th best lower bound can never place, nor tie."""

    def __init__(self, queries: np.ndarray, precision: str, live: np.ndarray, k_chunks: int):
        self.queries, self.precision, self.k_chunks = queries, precision, k_chunks
        self.live, self.num_docs = live, len(live)
        num_docs = self.num_docs
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
        dead = ~self.live[block_docs]  # (n,) rows of documents left out
        if dead.all():
            return
        if self.integer:
            scores, error = dot(self.queries, block, self.precision), np.zeros((len(self.queries), 1))  # exact
        else:
            block = np.asarray(block, dtype=np.float32)
            scores = self.queries.astype(np.float32) @ block.T  # (Q, n): dot's scores within ±error
            _check_finite_scores(scores, block, start)
            error = (self.query_error * _largest_norm(block))[:, None]  # (Q, 1)
        if dead.any():  # a left-out row can never place: it scores below everything (and is dropped at the end)
            scores = scores.astype(np.float64 if self.integer else np.float32)
            scores[:, dead] = -np.inf
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
        reach = (picked >= kth - 2 * error) & (picked > -np.inf)
        self._merge(np.where(reach, columns + start, -1), picked - error, picked + error)

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
        has_rows = (np.diff(starts) > 0) & self.live  # a document without rows, or left out, is never returned
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
            doc_best = document_maxima(exact, firsts)[0]
            chosen = ranking(doc_best)[:k]
            order[q], scores[q] = candidates[chosen], doc_best[chosen]
            # Each document's best row is the first with its best score: the lower chunk index among equal ones.
            at_best = np.flatnonzero(exact == np.repeat(doc_best, lengths))
            segment, first = np.unique(np.searchsorted(firsts, at_best, side="right") - 1, return_index=True)
            best[q] = rows[at_best[first]][np.searchsorted(segment, chosen)]
        return order, scores, best

    def chunks(self, vectors, live_rows: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(Q, k) rows and scores of the best chunks: the kept candidates scored by `dot`, ranked by the rule."""
        n_queries, k = len(self.queries), min(k, int(live_rows))
        rows_out = np.zeros((n_queries, k), np.int64)
        scores_out = np.zeros((n_queries, k), np.int32 if self.integer else np.float32)
        for q in range(n_queries):
            rows = np.sort(self.rows[q][self.rows[q] >= 0])  # ascending: the tie order
            exact = dot(self.queries[q : q + 1], vectors[rows], self.precision)[0]
            chosen = ranking(exact)[:k]
            rows_out[q], scores_out[q] = rows[chosen], exact[chosen]
        return rows_out, scores_out


def _check_finite_scores(scores: np.ndarray, block: np.ndarray, start: int) -> None:
    """A `ValueError` naming the first row whose scores are not finite: its vector holds NaN or an infinity (or
    values so large their products overflow float32)."""
    if np.isfinite(scores).all():
        return
    bad = np.flatnonzero(~np.isfinite(scores).all(axis=0))[0]
    what = "holds NaN or infinite values" if not np.isfinite(block[bad]).all() else \
        "holds values so large that its scores overflow float32"
    raise ValueError(f"the chunk vector at row {start + int(bad)} {what}: every vector must be finite")


def _checked_live(live, num_docs: int) -> np.ndarray:
    if live is None:
        return np.ones(num_docs, dtype=bool)
    live = np.asarray(live)
    if live.dtype != bool or live.shape != (num_docs,):
        raise ValueError(f"live_documents must be {num_docs} booleans (one per document), got "
                         f"{live.dtype} of shape {live.shape}")
    return live


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
    if precision == "float32" and not np.isfinite(queries).all():
        raise ValueError(f"query {int(np.flatnonzero(~np.isfinite(queries).all(axis=1))[0])} holds NaN or infinite "
                         "values: every vector must be finite")
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
