"""The by-distance breakdown: token distances against a hand count, every query in one bucket, and each bucket's
figures equal to a run of its queries alone."""

from __future__ import annotations

import pytest

import contextembed
from contextembed.evaluation.context_bench import ContextDocument, ContextQuery, run_context_bench
from contextembed.evaluation.distance import (
    NO_EVIDENCE,
    OTHER_DOCUMENT,
    answer_evidence_distance,
    distance_bucket,
    distance_buckets,
    distance_labels,
    sentence_spans,
)
from contextembed.evaluation.run import distance_groupings, distance_setup

# Every word is one token of the tiny vocabulary (tests/conftest.py): the counts below are by hand.
LEASE = ["the lease of one street",  # 5 tokens: positions 0-4, separator at 5
         "rent is monthly",  # 3: 6-8, separator at 9
         "she was the tenant in the apartment",  # 7: 10-16, separator at 17
         "it is for the one date"]  # 6: 18-23
FILLER = "the rent of the apartment is for one year in the date"  # 12 tokens
LONG = ["the company", *[FILLER] * 6, "she was the landlord"]  # 2, six times 12, 4: the last starts at 2+6*13+1 = 81


def documents():
    return [ContextDocument("lease", LEASE), ContextDocument("long", LONG), ContextDocument("other", ["a table"])]


def queries():
    return [
        # answer d#3, evidence d#0: between them "rent is monthly" (3) + the 7 tokens + 3 separators = 13
        ContextQuery("far", "when is it due", ["lease"], ["lease#3"], [[["lease#0"]]], "dates"),
        # the nearest of two groups counts: lease#2 ends at 17, lease#3 starts at 18: the separator alone
        ContextQuery("near", "when is it due", ["lease"], ["lease#3"], [[["lease#0"]], [["lease#2"]]], "dates"),
        # several answers: the nearest answer-evidence pair counts (lease#1 to lease#0: the separator)
        ContextQuery("two", "rent", ["lease"], ["lease#3", "lease#1"], [[["lease#0"]]]),
        # 79 tokens between "the company" (ends at 2) and the last sentence (starts at 81): 6*12 + 7 separators
        ContextQuery("beyond", "the landlord", ["long"], ["long#7"], [[["long#0"]]], "entity"),
        ContextQuery("elsewhere", "rent", ["lease"], ["lease#1"], [[["other#0"]]], "entity"),
        ContextQuery("none", "the table", ["other"], ["other#0"], []),
    ]


@pytest.fixture
def encoder(built):
    return contextembed.load(str(built["bert"][0]))  # max_seq_length=64, no window head


def test_distances_against_a_hand_count(encoder):
    rows = encoder.processor.tokenize_documents([d.sentences for d in documents()], task="document")
    spans = {d.id: sentence_spans(row["chunk_ids"]) for d, row in zip(documents(), rows)}
    assert spans["lease"] == [(0, 5), (6, 9), (10, 17), (18, 24)]
    assert [answer_evidence_distance(q, spans) for q in queries()] == [13, 1, 1, 79, None, None]
    labels = distance_labels(documents(), queries(), encoder.processor, max_seq_length=64)
    # W=64: buckets 0-1, 2-7, 8-31, 32-63, >=64
    assert labels == ["8-31", "0-1", "0-1", ">=64", OTHER_DOCUMENT, NO_EVIDENCE]
    # The window head is the document's first tokens: "the company" (0-2) lies inside a 2-token head, not a 1-token one
    with_head = distance_labels(documents(), queries(), encoder.processor, max_seq_length=64, window_head_tokens=2)
    assert with_head[3] == ">=64, evidence in the window head"
    assert distance_labels(documents(), queries(), encoder.processor, 64, window_head_tokens=1)[3] == ">=64"
    # the hand counts of the first and fourth queries, at the bucket edges they sit next to
    assert distance_bucket(13, True, 32) == "4-15" and distance_bucket(79, True, 80) == "40-79"
    assert distance_bucket(79, True, 79) == ">=79"


def test_buckets_are_in_order_and_cover_every_query(encoder):
    setup = distance_setup(encoder)
    assert setup["max_seq_length"] == 64 and setup["window_head_tokens"] == 0
    assert setup["buckets"] == distance_buckets(64) == ["0-1", "2-7", "8-31", "32-63", ">=64", OTHER_DOCUMENT,
                                                        NO_EVIDENCE]
    (labels, order), = distance_groupings(encoder, documents(), queries()).values()
    assert set(labels) <= set(order)
    with pytest.raises(ValueError, match="max_seq_length must be a positive integer, got 0"):
        distance_buckets(0)


def test_each_bucket_equals_a_run_of_its_queries_alone(encoder):
    """Queries are scored independently against the same corpus, so a bucket's figures are those of a run on its
    queries only; the bucket counts add up to every query, those without evidence or capability included."""
    docs, qs = documents(), queries()
    groupings = distance_groupings(encoder, docs, qs)
    results = run_context_bench(encoder, docs, qs, groupings=groupings)
    labels, _ = groupings["by_distance"]
    for mode, metrics in results.items():
        by_distance = metrics["by_distance"]
        assert list(by_distance) == distance_buckets(64)  # every bucket, in order; the empty ones hold no query
        assert [label for label, bucket in by_distance.items() if not bucket["queries"]] == ["2-7", "32-63"]
        assert sum(bucket["queries"] for bucket in by_distance.values()) == len(qs)
        for label, bucket in by_distance.items():
            if not bucket["queries"]:
                assert bucket == {"queries": 0, "evidence_queries": 0}
                continue
            alone = run_context_bench(encoder, docs, [q for q, own in zip(qs, labels) if own == label],
                                      modes=(mode,))[mode]
            assert bucket == pytest.approx({k: v for k, v in alone.items() if k != "by_capability"})
    # two queries carry no capability: by_capability leaves them out, by_distance keeps them
    assert sum(c["queries"] for c in results["contextual"]["by_capability"].values()) == len(qs) - 2


def test_groupings_need_a_label_per_query(encoder):
    with pytest.raises(ValueError, match=r"groupings\['by_distance'\] must have one label per query \(6\), got 1"):
        run_context_bench(encoder, documents(), queries(), groupings={"by_distance": (["0-1"], ["0-1"])})
