"""The teacher of natural questions: cached sentence vectors, soft labels for the sentences around an answer."""

from __future__ import annotations

import numpy as np
import pytest

from contextembed.training.data import read_documents, word_labels, write_documents
from training_teacher import EmbeddingCache, Teacher, faq_documents, scaled_scores
from training_texts import Text

VOCABULARY = "install package mirror kernel upgrade release debian archive source network".split()


class CountingEncoder:
    """Bag-of-words vectors over a small vocabulary, counting every text it is asked to encode."""

    def __init__(self):
        self.seen: list[str] = []

    def __call__(self, texts):
        self.seen += texts
        return np.array([[t.lower().count(w) + 0.01 for w in VOCABULARY] for t in texts], dtype=np.float32)


def test_vectors_are_cached_on_disk_by_model_and_text(tmp_path):
    encoder = CountingEncoder()
    teacher = Teacher(encoder, EmbeddingCache(tmp_path / "cache.sqlite", "bow:1"))
    first = teacher.scores("install a package", ["the package mirror", "a kernel upgrade"])
    assert len(encoder.seen) == 3
    again = Teacher(encoder, EmbeddingCache(tmp_path / "cache.sqlite", "bow:1"))  # a new process, same file
    np.testing.assert_allclose(again.scores("install a package", ["a kernel upgrade", "the package mirror"]),
                               first[::-1], rtol=1e-6)
    assert len(encoder.seen) == 3  # nothing encoded twice
    other = Teacher(encoder, EmbeddingCache(tmp_path / "cache.sqlite", "bow:2"))  # another model: its own vectors
    other.scores("install a package", ["the package mirror"])
    assert len(encoder.seen) == 5


def test_scaled_scores_mark_only_what_beats_the_median():
    labels = scaled_scores(np.array([0.9, 0.1, 0.2, 0.5, 0.3]))
    assert labels.max() == 1.0 and labels.min() == 0.0 and labels[0] == 1.0
    assert (labels[[1, 2, 4]] == 0).sum() >= 2
    np.testing.assert_array_equal(scaled_scores(np.array([0.4, 0.4])), [0.0, 0.0])


def faq_text() -> Text:
    return Text("debianfaq/8", "debianfaq", "Package tools", [
        ("How do I install a package?", ["Use apt to install a package from a mirror. It fetches the package.",
                                         "A kernel upgrade may need a reboot."]),
        ("Where is the archive?", ["The debian archive lives on every mirror of the network."]),
        ("Not a question", ["This section is skipped."]),
    ])


def test_faq_questions_are_queries_with_gold_answers_and_teacher_labels(tmp_path):
    teacher = Teacher(CountingEncoder(), EmbeddingCache(tmp_path / "cache.sqlite", "bow:1"))
    (document,) = faq_documents([faq_text()], teacher)
    assert [q.text for q in document.queries] == ["How do I install a package?", "Where is the archive?"]
    install, archive = document.queries
    answer = " ".join(document.text[s:e] for s, e in install.answer)
    assert answer == "Use apt to install a package from a mirror. It fetches the package."
    assert document.text[slice(*install.evidence[0])] == "How do I install a package?"
    assert "skipped" not in document.text
    assert install.teacher and all(0 < score <= 1 for *_, score in install.teacher)
    labelled = {document.text[s:e] for s, e, _ in install.teacher}
    assert not labelled & {document.text[s:e] for s, e in install.answer}  # the gold answer keeps its 1
    assert [document.text[s:e] for s, e in archive.answer] == [
        "The debian archive lives on every mirror of the network."]
    labels = word_labels(document.text, install, evidence_weight=0.5)
    assert max(score for *_, score in labels if score < 1) <= 0.5  # teacher labels never outrank the answer

    write_documents(tmp_path / "faq.jsonl", [document])  # the labels survive the training file
    assert read_documents(tmp_path / "faq.jsonl") == [document]


def test_a_teacher_score_out_of_range_is_refused(tmp_path):
    teacher = Teacher(CountingEncoder(), EmbeddingCache(tmp_path / "cache.sqlite", "bow:1"))
    (document,) = faq_documents([faq_text()], teacher)
    document.queries[0].teacher = [(0, 4, 1.5)]
    write_documents(tmp_path / "bad.jsonl", [document])
    with pytest.raises(ValueError, match=r"bad.jsonl:1: .*teacher.*score in \[0, 1\]"):
        read_documents(tmp_path / "bad.jsonl")


def test_without_a_teacher_only_gold_labels():
    (document,) = faq_documents([faq_text()], None)
    assert all(not q.teacher for q in document.queries)
