"""context-bench metrics on small hand-built cases with known values, and the loader's validation."""

from __future__ import annotations

import json

import numpy as np
import pytest

import itertools

from contextembed.evaluation.context_bench import (
    ContextQuery,
    aggregate,
    answers_first_ceiling,
    copy_groups,
    evidence_at_k,
    per_query_metrics,
    run_context_bench,
)
from contextembed.corpus import encode_once
from contextembed.evaluation.loaders import load_context_bench


class TestEvidence:
    def test_multi_sentence_alternative_needs_all_its_sentences(self):
        order = ["d#0", "d#1", "d#2", "d#3"]
        groups = [[["d#1", "d#3"]]]
        assert evidence_at_k(order, ["d#0"], groups, k=2, doc_rank=1) == (0.0, 0.0)  # d#3 is 3rd after removal
        assert evidence_at_k(order, ["d#0"], groups, k=3, doc_rank=1) == (1.0, 1.0)

    def test_only_the_top_ranked_answer_is_removed(self):
        order = ["d#4", "d#7", "d#1"]  # d#4 and d#7 are both accepted answers
        assert evidence_at_k(order, ["d#7", "d#4"], [[["d#7"]]], k=1, doc_rank=1) == (1.0, 1.0)
        assert evidence_at_k(order, ["d#7", "d#4"], [[["d#1"]]], k=1, doc_rank=1) == (0.0, 0.0)

    def test_gate_at_rank_10(self):
        order = ["d#0", "d#1"]
        assert evidence_at_k(order, [], [[["d#0"]]], k=1, doc_rank=10) == (1.0, 1.0)
        assert evidence_at_k(order, [], [[["d#0"]]], k=1, doc_rank=11) == (0.0, 0.0)
        assert evidence_at_k(order, [], [[["d#0"]]], k=1, doc_rank=None) == (0.0, 0.0)

    def test_partial_groups(self):
        groups = [[["d#1"]], [["d#9"], ["d#2"]], [["d#8"]]]
        assert evidence_at_k(["d#1", "d#2", "d#3"], [], groups, k=2, doc_rank=3) == (2 / 3, 0.0)

    def test_no_groups_is_refused(self):
        with pytest.raises(ValueError, match="at least one evidence group"):
            evidence_at_k(["d#0"], [], [], k=1, doc_rank=1)
        with pytest.raises(ValueError, match="at least one evidence group"):
            answers_first_ceiling(["d#0"], [], k=1)


def test_answers_first_ceiling_is_the_best_answers_first_ranking():
    """Oracle: every ranking of a small document that puts all its answers first (answers in any order, then the
    rest in any order), scored by `evidence_at_k`; the ceiling is their maximum. Alternatives never hold answers
    here, where the ceiling is exact."""
    rng = np.random.default_rng(0)
    for _ in range(150):
        n = int(rng.integers(3, 8))
        sentences = [f"d#{i}" for i in range(n)]
        answers = [s for s in sentences if rng.random() < 0.4] or [sentences[0]]
        others = [s for s in sentences if s not in answers]
        if not others:
            continue
        groups = [[list(rng.choice(others, size=int(rng.integers(1, min(3, len(others)) + 1)), replace=False))
                   for _ in range(int(rng.integers(1, 3)))] for _ in range(int(rng.integers(1, 4)))]
        k = int(rng.integers(1, n + 1))
        best = max(evidence_at_k(list(a) + list(o), answers, groups, k, doc_rank=1)
                   for a in itertools.permutations(answers) for o in itertools.permutations(others))
        assert answers_first_ceiling(answers, groups, k) == best


def test_answers_first_ceiling_bounds_the_metric_of_an_answers_first_embedding():
    """Ten answer lines and a title: the embedding that finds every line first loses the title at k=8."""
    vectors = np.array([[0.0, 1.0]] + [[1.0, 0.0]] * 10, dtype=np.float32)
    vectors[1:, 1] = np.linspace(0.1, 0.0, 10)
    row_ids = [f"d#{i}" for i in range(11)]
    queries = [ContextQuery("q", "ingredients?", ["d"], row_ids[1:], [[["d#0"]]])]
    (record,) = per_query_metrics(np.array([[1.0, 0.05]], dtype=np.float32), vectors, np.zeros(11, dtype=np.int64),
                                  row_ids, ["d"], queries, ks=[1, 8, 10])
    assert record["Answer@1"] == 1.0 and record["EvidenceRecall@1"] == 0.0
    assert record["EvidenceRecall@8"] == record["EvidenceRecallCeiling@8"] == 0.0
    assert record["EvidenceRecall@10"] == record["EvidenceRecallCeiling@10"] == 1.0


def test_per_query_metrics_on_known_vectors():
    # Two documents of two sentences; the query points at sentence b#1; b's other sentence is next best.
    vectors = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.6, 0.8, 0.0], [0.0, 1.0, 0.0]], dtype=np.float32)
    row_doc = np.array([0, 0, 1, 1])
    row_ids = ["a#0", "a#1", "b#0", "b#1"]
    query = np.array([[0.0, 1.0, 0.0]], dtype=np.float32)
    queries = [ContextQuery("q", "text", ["b"], ["b#1"], [[["b#0"]], [["a#0"]]])]
    (record,) = per_query_metrics(query, vectors, row_doc, row_ids, ["a", "b"], queries, ks=[1, 2])
    assert record == {"Document@1": 1.0, "Document@2": 1.0, "Answer@1": 1.0, "Answer@2": 1.0, "tied": 0.0,
                      "EvidenceRecall@1": 0.5, "AllEvidence@1": 0.0, "EvidenceRecall@2": 0.5, "AllEvidence@2": 0.0,
                      "EvidenceRecallCeiling@1": 0.5, "AllEvidenceCeiling@1": 0.0,
                      "EvidenceRecallCeiling@2": 1.0, "AllEvidenceCeiling@2": 1.0}


def test_ties_go_to_the_lower_document_id_not_the_corpus_order():
    """Two copies of one sentence in two documents, the corpus listing "b" before "a": the tie rule ranks a's copy
    first (document id, then sentence index), and the tie is reported."""
    copy = [0.6, 0.8, 0.0]
    vectors = np.array([copy, [0.0, 0.0, 1.0], copy, [0.0, 0.0, 1.0]], dtype=np.float32)
    queries = [ContextQuery("q", "text", ["b"], ["b#0"])]
    (record,) = per_query_metrics(np.array([copy], dtype=np.float32), vectors, np.array([0, 0, 1, 1]),
                                  ["b#0", "b#1", "a#0", "a#1"], ["b", "a"], queries, ks=[1, 2])
    assert (record["Document@1"], record["Answer@1"], record["Answer@2"], record["tied"]) == (0.0, 0.0, 1.0, 1.0)


class NoisyModel:
    """Every vector it returns carries fresh noise of ~1e-7, as batch composition leaves a real model's; copies
    of one text differ unless the text is encoded once."""

    def __init__(self):
        self.rng = np.random.default_rng(0)

    def _vector(self, text: str) -> np.ndarray:
        vector = np.array([len(text) % 3, text.count("a"), 1.0]) + self.rng.normal(scale=1e-7, size=3)
        return (vector / np.linalg.norm(vector)).astype(np.float32)

    def encode_queries(self, texts, **options):
        return np.stack([self._vector(t) for t in texts])

    def encode_documents(self, documents, **options):
        return [np.stack([self._vector(chunk) for chunk in document]) for document in documents]


def test_float_noise_does_not_decide_a_tie():
    """Copies of a sentence embedded alone get one vector (each distinct text is encoded once), so whatever noise
    the encoder adds, the copies tie exactly and the rule decides: the lower document id first, every time."""
    from contextembed.evaluation.context_bench import ContextDocument

    documents = [ContextDocument("b", ["rent due", "a cat"]), ContextDocument("a", ["rent due", "no pets"])]
    queries = [ContextQuery("asks b", "rent due", ["b"], ["b#0"]), ContextQuery("asks a", "rent due", ["a"], ["a#0"])]
    for _ in range(5):
        results = run_context_bench(NoisyModel(), documents, queries, ks=[1], modes=["independent"])
        assert results["independent"]["Copy@1"] == 0.5 and results["independent"]["tied"] == 1.0
    vectors = encode_once(NoisyModel(), [["rent due"], ["a cat"], ["rent due"]])
    assert np.array_equal(vectors[0], vectors[2])


def test_copy_at_1_compares_only_the_answer_text_s_copies():
    """Three documents share the sentence "same" (rows a#1, b#1, c#1). Another sentence outranks every copy, so
    Answer@1 is 0 for both queries, while Copy@1 says whether the asked copy beats its two twins."""
    texts = ["alpha", "same", "beta", "same", "gamma", "same"]
    row_ids = ["a#0", "a#1", "b#0", "b#1", "c#0", "c#1"]
    scores = np.array([0.1, 0.5, 0.9, 0.7, 0.2, 0.6], dtype=np.float32)  # b#0 first; b#1 best of the copies
    vectors, query = np.diag(scores), np.ones((1, 6), dtype=np.float32)
    queries = [ContextQuery("asks b", "q", ["b"], ["b#1"]), ContextQuery("asks c", "q", ["c"], ["c#1"]),
               ContextQuery("no copies", "q", ["a"], ["a#0"])]
    records = per_query_metrics(np.repeat(query, 3, axis=0), vectors, np.array([0, 0, 1, 1, 2, 2]), row_ids,
                                ["a", "b", "c"], queries, ks=[1], row_copies=copy_groups(texts))
    assert [r["Answer@1"] for r in records] == [0.0, 0.0, 0.0]
    assert [r.get("Copy@1") for r in records] == [1.0, 0.0, None]  # a#0's text occurs once: not scored
    assert aggregate(records)["Copy@1"] == 0.5 and aggregate(records)["copy_queries"] == 2
    (unscored,) = per_query_metrics(query, vectors, np.array([0, 0, 1, 1, 2, 2]), row_ids, ["a", "b", "c"],
                                    queries[:1], ks=[1])
    assert "Copy@1" not in unscored


def test_copy_at_1_scores_each_shared_answer_line_against_its_own_copies():
    """A list answer (b#0, b#1, b#2): b#0's text is b's alone, so it is not scored, however high it ranks; "salt"
    (b#1) beats a's copy, "oil" (b#2) loses to c's: Copy@1 is the mean over the two shared lines."""
    texts = ["salt", "oil", "flour", "salt", "oil", "oil"]
    row_ids = ["a#0", "a#1", "b#0", "b#1", "b#2", "c#0"]
    vectors = np.diag(np.array([0.2, 0.3, 0.9, 0.5, 0.4, 0.6], dtype=np.float32))
    queries = [ContextQuery("list", "q", ["b"], ["b#0", "b#1", "b#2"])]
    (record,) = per_query_metrics(np.ones((1, 6), dtype=np.float32), vectors, np.array([0, 0, 1, 1, 1, 2]), row_ids,
                                  ["a", "b", "c"], queries, ks=[1], row_copies=copy_groups(texts))
    assert record["Answer@1"] == 1.0 and record["Copy@1"] == 0.5


def test_copy_at_1_ties_follow_the_stated_rule():
    """Copies embedded alone share one vector: the lowest document id wins, whichever copy is asked, in whatever
    order the corpus lists the documents."""
    vectors = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]], dtype=np.float32)
    queries = [ContextQuery(f"q{i}", "q", [d], [f"{d}#0"]) for i, d in enumerate("bac")]
    records = per_query_metrics(np.ones((3, 2), dtype=np.float32), vectors, np.array([0, 1, 2]),
                                ["b#0", "a#0", "c#0"], ["b", "a", "c"], queries, ks=[1],
                                row_copies=copy_groups(["x", "x", "x"]))
    assert [r["Copy@1"] for r in records] == [0.0, 1.0, 0.0]


def test_miss_causes_split_every_answer_at_1_miss_by_its_first_sentence():
    """Oracle: random corpora of 3 documents x 3 sentences, some sentences repeated word for word across documents.
    For every query Answer@1 and the three causes sum to 1, and the cause is the one read off a plain sort of the
    scores (distinct here, so no tie rule is involved): the first non-answer row's document and text; EvidenceFirst@1
    says whether that row is the query's evidence sentence."""
    rng = np.random.default_rng(0)
    row_doc = np.repeat(np.arange(3), 3)
    row_ids = [f"{d}#{i}" for d in "abc" for i in range(3)]
    seen = set()
    for _ in range(200):
        texts = [str(t) for t in rng.integers(0, 4, size=9)]
        scores = rng.permutation(9).astype(np.float32) / 10
        target = int(rng.integers(3))
        answer = 3 * target + int(rng.integers(3))
        evidence = 3 * target + int(rng.integers(3))  # sometimes the answer itself, which can never rank first instead
        queries = [ContextQuery("q", "q", ["abc"[target]], [row_ids[answer]], [[[row_ids[evidence]]]])]
        (record,) = per_query_metrics(np.ones((1, 9), dtype=np.float32), np.diag(scores), row_doc, row_ids,
                                      list("abc"), queries, ks=[1], row_copies=copy_groups(texts))
        causes = {name: record[name] for name in ("WrongSentence@1", "WrongCopy@1", "WrongDocument@1")}
        assert record["Answer@1"] + sum(causes.values()) == 1.0
        first = next(int(i) for i in np.argsort(-scores) if i != answer)
        if record["Answer@1"]:
            expected = None
        elif row_doc[first] == target:
            expected = "WrongSentence@1"
        elif texts[first] == texts[answer]:
            expected = "WrongCopy@1"
        else:
            expected = "WrongDocument@1"
        assert [name for name, value in causes.items() if value] == ([expected] if expected else [])
        assert record["EvidenceFirst@1"] == float(expected is not None and first == evidence != answer)
        seen.add(expected)
        seen.add("EvidenceFirst@1" if record["EvidenceFirst@1"] else None)
    assert seen == {None, "WrongSentence@1", "WrongCopy@1", "WrongDocument@1", "EvidenceFirst@1"}  # every branch


def test_miss_causes_follow_the_tie_rule():
    """Copies embedded alone tie: the lowest document id ranks first, so asking for the second copy is a miss in
    the wrong copy, and asking for the first is a hit with no cause."""
    vectors = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    queries = [ContextQuery("q0", "q", ["a"], ["a#0"]), ContextQuery("q1", "q", ["b"], ["b#0"])]
    records = per_query_metrics(np.array([[1.0, 0.0]] * 2, dtype=np.float32), vectors, np.array([0, 1, 2]),
                                ["a#0", "b#0", "c#0"], ["a", "b", "c"], queries, ks=[1],
                                row_copies=copy_groups(["x", "x", "y"]))
    assert [(r["Answer@1"], r["WrongCopy@1"]) for r in records] == [(1.0, 0.0), (0.0, 1.0)]
    assert aggregate(records)["WrongCopy@1"] == 0.5


def test_queries_without_evidence_are_left_out_of_evidence_means():
    records = [{"Answer@1": 1.0, "EvidenceRecall@1": 1.0, "AllEvidence@1": 1.0}, {"Answer@1": 0.0}]
    assert aggregate(records) == {"Answer@1": 0.5, "EvidenceRecall@1": 1.0, "AllEvidence@1": 1.0, "queries": 2,
                                  "evidence_queries": 1}


def write(folder, documents, queries):
    folder.mkdir(exist_ok=True)
    (folder / "documents.jsonl").write_text("".join(json.dumps(d) + "\n" for d in documents))
    (folder / "queries.jsonl").write_text("".join(q if isinstance(q, str) else json.dumps(q) + "\n" for q in queries))
    return folder


DOC = {"id": "d", "sentences": ["one.", "two."]}
QUERY = {"id": "q", "query": "two?", "targets": ["d"], "answers": ["d#1"], "evidence": [[["d#0"]]]}


def test_loader_round_trip(tmp_path):
    documents, queries = load_context_bench(write(tmp_path / "ok", [DOC], [QUERY]))
    assert documents[0].sentences == ["one.", "two."] and queries[0].evidence == [[["d#0"]]]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({**QUERY, "answers": ["d#5"]}, r"queries.jsonl:1: 'd#5': document 'd' has 2 sentences"),
        ({**QUERY, "targets": ["nope"]}, r"queries.jsonl:1: 'targets' must list known document ids"),
        ({**QUERY, "evidence": [["d#0"]]}, r"queries.jsonl:1: each alternative must be a non-empty list"),
        ({**QUERY, "answers": ["d-1"]}, r"is not a sentence id '<doc id>#<index>'"),
        ({k: v for k, v in QUERY.items() if k != "query"}, r"queries.jsonl:1: missing field 'query'"),
        ("{not json\n", r"queries.jsonl:1: not valid JSON"),
    ],
)
def test_loader_reports_file_and_line(tmp_path, query, message):
    with pytest.raises(ValueError, match=message):
        load_context_bench(write(tmp_path / "bad", [DOC], [query]))
