"""nDCG@k, Recall@k and MRR@k with trec_eval's conventions (what pytrec_eval and MTEB compute).

- A run is `{query_id: {doc_id: score}}`, qrels are `{query_id: {doc_id: grade}}` (graded relevance).
- Ranking: score descending, ties broken by document id in **descending** string order (trec_eval).
- nDCG gain is the grade itself (linear), discount 1/log2(rank + 1); the ideal ranking sorts the qrels'
  positive grades; a query with no positive grade scores 0.
- Recall@k: relevant (grade >= 1) documents in the top k over all relevant documents.
- MRR@k: 1/rank of the first relevant document within the top k, else 0.
- Means are over the queries present in both the run and the qrels (pytrec_eval drops the others).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from contextembed.modeling import check_count

METRICS = ("ndcg", "recall", "mrr")

Run = Mapping[str, Mapping[str, float]]
Qrels = Mapping[str, Mapping[str, int]]


def ranked(scores: Mapping[str, float]) -> list[str]:
    """Document ids by score descending, ties by id descending (trec_eval's order).

    >>> ranked({"a": 0.5, "b": 0.5, "c": 0.9})
    ['c', 'b', 'a']
    """
    return [doc for doc, _ in sorted(scores.items(), key=lambda item: (item[1], item[0]), reverse=True)]


def ndcg_at_k(ranking: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    """nDCG@k of one ranked list.

    >>> round(ndcg_at_k(["x", "d1", "d2"], {"d1": 1, "d2": 2}, k=3), 4)
    0.6199
    """
    dcg = sum(grades.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranking[:k]))
    ideal = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(rank + 2) for rank, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranking: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    """Share of the relevant documents found in the top k.

    >>> recall_at_k(["d1", "x", "d2"], {"d1": 1, "d2": 1, "d3": 0}, k=2)
    0.5
    """
    relevant = {doc for doc, grade in grades.items() if grade >= 1}
    return len(relevant.intersection(ranking[:k])) / len(relevant) if relevant else 0.0


def mrr_at_k(ranking: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    """Reciprocal rank of the first relevant document in the top k.

    >>> mrr_at_k(["x", "y", "d1"], {"d1": 2}, k=3), mrr_at_k(["x", "y", "d1"], {"d1": 2}, k=2)
    (0.3333333333333333, 0.0)
    """
    for rank, doc in enumerate(ranking[:k], 1):
        if grades.get(doc, 0) >= 1:
            return 1.0 / rank
    return 0.0


def evaluate_run(
    qrels: Qrels, run: Run, ks: Sequence[int] = (10,), metrics: Sequence[str] = METRICS
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Mean and per-query metrics (`"ndcg@10"`, `"recall@1000"`, ...) of a run against qrels.

    >>> means, _ = evaluate_run({"q": {"d1": 1}}, {"q": {"d1": 0.2, "d2": 0.9}}, ks=[1, 2])
    >>> means["mrr@1"], means["mrr@2"], means["recall@2"]
    (0.0, 0.5, 1.0)
    """
    for metric in metrics:
        if metric not in METRICS:
            raise ValueError(f"metrics must be among {METRICS}, got {metric!r}")
    for k in ks:
        check_count(k, "every k")
    functions = {"ndcg": ndcg_at_k, "recall": recall_at_k, "mrr": mrr_at_k}
    per_query: dict[str, dict[str, float]] = {}
    for query_id in sorted(set(run) & set(qrels)):
        ranking = ranked(run[query_id])
        per_query[query_id] = {f"{m}@{k}": functions[m](ranking, qrels[query_id], k) for m in metrics for k in ks}
    names = [f"{m}@{k}" for m in metrics for k in ks]
    means = {name: (sum(q[name] for q in per_query.values()) / len(per_query) if per_query else 0.0)
             for name in names}
    return means, per_query
