"""Reciprocal rank fusion and the Q2D-Web style RRF-subsampled corpus."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int = 60) -> list[tuple[str, float]]:
    """Fuse ranked lists: score(d) = sum over lists of 1 / (k + rank of d), ranks from 1.

    A list that does not contain d adds nothing. Ties go to the smaller document id.

    >>> reciprocal_rank_fusion([["a", "b", "c"], ["b", "c"]], k=1)
    [('b', 0.8333333333333333), ('c', 0.5833333333333333), ('a', 0.5)]
    """
    if not isinstance(k, (int, float)) or k < 0:
        raise ValueError(f"k must be a non-negative number, got {k!r}")
    scores: dict[str, float] = {}
    for ranking in rankings:
        if len(set(ranking)) != len(ranking):
            raise ValueError("a ranking lists a document twice")
        for rank, doc in enumerate(ranking, 1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def rrf_subsample(
    runs: Mapping[str, Mapping[str, Sequence[str]]],
    qrels: Mapping[str, Mapping[str, int]] | Sequence[Mapping[str, Mapping[str, int]]],
    depth: int,
    k: int = 60,
) -> set[str]:
    """The subsampled corpus: every judged-positive document plus, per query, the top `depth` of the RRF fusion
    of all retrievers' rankings.

    Args:
        runs: `{retriever: {query_id: ranked doc ids}}`.
        qrels: one or several relevance sets `{query_id: {doc_id: grade}}`; grade >= 1 is a positive.
        depth: distractors kept per query from the fused ranking.

    >>> runs = {"bm25": {"q": ["a", "b", "c"]}, "dense": {"q": ["b", "d", "a"]}}
    >>> sorted(rrf_subsample(runs, {"q": {"z": 1, "c": 0}}, depth=2))
    ['a', 'b', 'z']
    """
    if not isinstance(depth, int) or depth < 0:
        raise ValueError(f"depth must be a non-negative integer, got {depth!r}")
    qrel_sets = [qrels] if isinstance(qrels, Mapping) else list(qrels)
    keep = {doc for qrel in qrel_sets for grades in qrel.values() for doc, grade in grades.items() if grade >= 1}
    queries = sorted({q for run in runs.values() for q in run})
    for query in queries:
        fused = reciprocal_rank_fusion([run[query] for run in runs.values() if query in run], k=k)
        keep.update(doc for doc, _ in fused[:depth])
    return keep
