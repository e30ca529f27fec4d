"""scripts/within_document_matching.py: the answer ranked first among its own document's sentences, ties by the
lower index as everywhere else in the evaluation, other documents never part of the ranking."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from contextembed.evaluation.context_bench import ContextQuery

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "within_document_matching.py"


@pytest.fixture(scope="module")
def script():
    sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("within_document_matching", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.path.remove(str(SCRIPT.parent))


def _query(answers, target="a"):
    return ContextQuery(id="q", query="?", targets=[target], answers=answers)


def test_only_the_asked_documents_sentences_rank(script):
    vectors = {"a": np.array([[1.0, 0.0], [0.0, 1.0]]), "b": np.array([[5.0, 5.0]])}
    q = np.array([[0.2, 0.9]])
    assert script.answer_first_share([_query(["a#1"])], vectors, q) == 1.0  # b's higher score plays no part
    assert script.answer_first_share([_query(["a#0"])], vectors, q) == 0.0
    assert script.answer_first_share([_query(["a#0", "a#1"])], vectors, q) == 1.0  # any accepted answer
    assert script.answer_first_share([_query(["b#0"])], vectors, q) == 0.0  # an answer outside the target


def test_ties_rank_the_lower_index_first(script):
    vectors = {"a": np.array([[1.0, 0.0], [1.0, 1e-7]])}
    q = np.array([[1.0, 0.0]])
    assert script.answer_first_share([_query(["a#0"])], vectors, q) == 1.0
    assert script.answer_first_share([_query(["a#1"])], vectors, q) == 0.0


def test_the_share_matches_a_plain_argmax_on_random_scores(script):
    rng = np.random.default_rng(0)
    vectors = {f"d{i}": rng.normal(size=(rng.integers(2, 9), 4)) for i in range(20)}
    queries, expected = [], []
    for i in range(200):
        doc = f"d{rng.integers(20)}"
        n = len(vectors[doc])
        answers = sorted({int(x) for x in rng.integers(0, n, size=rng.integers(1, 3))})
        queries.append(_query([f"{doc}#{a}" for a in answers], target=doc))
    query_vectors = rng.normal(size=(200, 4))
    for query, q in zip(queries, query_vectors):
        scores = vectors[query.targets[0]] @ q
        expected.append(int(np.argmax(scores)) in {int(a.split("#")[1]) for a in query.answers})
    assert 0 < sum(expected) < 200
    assert script.answer_first_share(queries, vectors, query_vectors) == pytest.approx(np.mean(expected))
