"""Reciprocal rank fusion, the RRF subsample, and near-duplicate removal at Jaccard >= 0.975."""

from __future__ import annotations

import random

import pytest

from contextembed.evaluation.dedup import deduplicate, jaccard, near_duplicate_groups, shingles
from contextembed.evaluation.fusion import reciprocal_rank_fusion, rrf_subsample


def test_rrf_equals_hand_computation():
    fused = dict(reciprocal_rank_fusion([["a", "b", "c"], ["c", "a"], ["d"]], k=60))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["b"] == pytest.approx(1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert fused["d"] == pytest.approx(1 / 61)
    assert [d for d, _ in reciprocal_rank_fusion([["a", "b", "c"], ["c", "a"], ["d"]])] == ["a", "c", "d", "b"]


def test_rrf_errors():
    with pytest.raises(ValueError, match="lists a document twice"):
        reciprocal_rank_fusion([["a", "a"]])
    with pytest.raises(ValueError, match="k must be a non-negative number"):
        reciprocal_rank_fusion([["a"]], k=-1)


def test_subsample_keeps_every_judged_positive():
    rng = random.Random(0)
    docs = [f"d{i}" for i in range(500)]
    runs = {name: {f"q{q}": rng.sample(docs, 100) for q in range(20)} for name in ("bm25", "dense", "colbert")}
    qrels_sets = [{f"q{q}": {rng.choice(docs): 1, rng.choice(docs): 0} for q in range(20)},
                  {f"q{q}": {rng.choice(docs): 2} for q in range(25)}]
    kept = rrf_subsample(runs, qrels_sets, depth=10)
    positives = {d for qrels in qrels_sets for grades in qrels.values() for d, g in grades.items() if g >= 1}
    assert positives <= kept
    for q in range(20):
        fused = reciprocal_rank_fusion([run[f"q{q}"] for run in runs.values()])
        assert {d for d, _ in fused[:10]} <= kept
    assert len(kept) < len(docs)


def text_with_jaccard(base_words, target, rng):
    """Edit the end of a text until its 5-gram Jaccard with the original falls just under `target`+0.005."""
    words = list(base_words)
    position = len(words) - 1
    while jaccard(shingles(" ".join(base_words)), shingles(" ".join(words))) > target + 0.005:
        words[position] = f"edit{rng.randint(0, 10**9)}"
        position -= 7
    return " ".join(words)


def test_planted_near_duplicates_found_and_loose_pairs_kept():
    rng = random.Random(3)
    vocabulary = [f"w{i}" for i in range(3000)]
    originals = {f"doc{i}": [rng.choice(vocabulary) for _ in range(1200)] for i in range(30)}
    corpus = {d: " ".join(w) for d, w in originals.items()}
    for i in range(5):
        corpus[f"dup{i}"] = text_with_jaccard(originals[f"doc{i}"], 0.98, rng)
        corpus[f"near{i}"] = text_with_jaccard(originals[f"doc{10 + i}"], 0.90, rng)
    for i in range(5):
        assert jaccard(shingles(corpus[f"dup{i}"]), shingles(corpus[f"doc{i}"])) >= 0.975
        assert jaccard(shingles(corpus[f"near{i}"]), shingles(corpus[f"doc{10 + i}"])) < 0.975
    groups = near_duplicate_groups(corpus, threshold=0.975)
    assert groups == sorted([sorted([f"doc{i}", f"dup{i}"]) for i in range(5)])
    kept = deduplicate(corpus, prefer=["dup0"])
    assert "dup0" in kept and "doc0" not in kept
    assert all(f"near{i}" in kept for i in range(5)) and "doc1" in kept and "dup1" not in kept
