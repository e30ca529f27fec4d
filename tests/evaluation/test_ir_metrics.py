"""nDCG / Recall / MRR against pytrec_eval (the engine MTEB uses) on randomised runs with ties."""

from __future__ import annotations

import random

import pytest

from contextembed.evaluation.ir_metrics import evaluate_run, ranked

pytrec_eval = pytest.importorskip("pytrec_eval")


def random_case(seed: int, graded: bool, ties: bool):
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(40)]
    qrels, run = {}, {}
    for q in range(rng.randint(1, 8)):
        qid = f"q{q}"
        judged = rng.sample(docs, rng.randint(1, 10))
        qrels[qid] = {d: (rng.randint(0, 3) if graded else rng.randint(0, 1)) for d in judged}
        retrieved = rng.sample(docs, rng.randint(1, 30))
        run[qid] = {d: (rng.randint(0, 4) / 4 if ties else rng.random()) for d in retrieved}
    if rng.random() < 0.3:
        qrels["only-in-qrels"] = {"d1": 1}
    if rng.random() < 0.3:
        run["only-in-run"] = {"d1": 0.5}
    return qrels, run


def pytrec_means(qrels, run, measure_names, per_query_key):
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, measure_names)
    scores = evaluator.evaluate(run)
    return sum(v[per_query_key] for v in scores.values()) / len(scores) if scores else 0.0


@pytest.mark.parametrize("seed", range(300))
def test_ndcg_and_recall_equal_pytrec_eval(seed):
    qrels, run = random_case(seed, graded=seed % 2 == 0, ties=seed % 3 != 0)
    means, _ = evaluate_run(qrels, run, ks=[1, 5, 10], metrics=["ndcg", "recall"])
    for k in (1, 5, 10):
        assert means[f"ndcg@{k}"] == pytest.approx(pytrec_means(qrels, run, {f"ndcg_cut.{k}"}, f"ndcg_cut_{k}"),
                                                   abs=1e-4)
        assert means[f"recall@{k}"] == pytest.approx(pytrec_means(qrels, run, {f"recall.{k}"}, f"recall_{k}"),
                                                     abs=1e-4)


@pytest.mark.parametrize("seed", range(100))
def test_mrr_equals_pytrec_recip_rank_of_the_cut_run(seed):
    qrels, run = random_case(seed, graded=True, ties=True)
    for k in (1, 3, 10):
        means, _ = evaluate_run(qrels, run, ks=[k], metrics=["mrr"])
        cut = {q: {d: run[q][d] for d in ranked(scores)[:k]} for q, scores in run.items()}
        assert means[f"mrr@{k}"] == pytest.approx(pytrec_means(qrels, cut, {"recip_rank"}, "recip_rank"), abs=1e-4)


def test_tie_order_is_descending_id():
    assert ranked({"a": 1.0, "b": 1.0, "c": 2.0}) == ["c", "b", "a"]


def test_bad_arguments():
    with pytest.raises(ValueError, match="metrics must be among"):
        evaluate_run({}, {}, metrics=["map"])
    with pytest.raises(ValueError, match="every k must be a positive integer"):
        evaluate_run({}, {}, ks=[0])
