"""Every training configuration either trains or fails at once with a message naming its problem: nothing loops
forever, nothing trains one step and calls itself trained, no bad value reaches the math."""

from __future__ import annotations

import json
import signal
from contextlib import contextmanager

import pytest

from contextembed.cli import main
from contextembed.training.batches import PlannedBatches
from contextembed.training.config import TrainConfig
from contextembed.training.data import TrainingDocument, TrainingQuery, read_documents, write_documents


@contextmanager
def deadline(seconds: int):
    """Fail instead of hanging: the defects this file guards against were infinite loops."""
    def expire(signum, frame):
        raise AssertionError(f"still running after {seconds} s: a configuration that cannot train must fail fast")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def document(i: int, family: str) -> TrainingDocument:
    return TrainingDocument(f"d{i}", "s", family, "the rent is due", [(0, 15)], [], [TrainingQuery("rent", [(0, 15)])])


BAD_CONFIGS = {
    "max_document_tokens": ({"max_document_tokens": -1}, "max_document_tokens must be a positive integer, got -1"),
    "max_minutes": ({"max_minutes": -1}, r"max_minutes must be a positive number of minutes \(or null\), got -1"),
    "learning rate text": ({"learning_rate": "abc"}, "learning_rate must be a positive number, got 'abc'"),
    "temperature zero": ({"temperature": 0}, "temperature must be a positive number, got 0"),
    "teacher temperature": ({"teacher_temperature": -0.1}, "teacher_temperature must be a positive number"),
    "negative chunking weight": ({"chunking_weights": {"sentences": 1.0, "tokens": -0.5}},
                                 "chunking_weights must map some of .* to numbers >= 0"),
    "all chunking weights zero": ({"chunking_weights": {"sentences": 0}}, "not all zero"),
    "max steps bool": ({"max_steps": True}, "max_steps must be a positive integer, got True"),
    "bf16 text": ({"bf16": "yes"}, "bf16 must be true or false"),
    "skip answer number": ({"within_skip_answer": 1}, "within_skip_answer must be true or false, got 1"),
    "redundant answers above one": ({"redundant_answer_relevance": 1.5},
                                    r"redundant_answer_relevance must be a number in \[0, 1\] \(or null\), got 1.5"),
    "redundant answers text": ({"redundant_answer_relevance": "low"}, "redundant_answer_relevance must be a number"),
    "redundant answers where, not a bool": ({"redundant_answer_in_dist": "no"},
                                            "redundant_answer_in_dist must be true or false, got 'no'"),
    "fraction above one": ({"qat_fraction": 1.5}, r"qat_fraction must be a number in \[0, 1\]"),
    "matryoshka dims": ({"matryoshka_dims": [0]}, "matryoshka_dims must be a non-empty list of positive integers"),
    "head choices": ({"window_head_choices": [32, -1]}, r"window_head_choices must be a list of integers >= 0"),
    "head choices not a list": ({"window_head_choices": 32}, r"window_head_choices must be a list"),
    "document mix": ({"document_mix": 1.0}, r"document_mix must be a number in \[0, 1\) or null"),
}


@pytest.mark.parametrize("case", BAD_CONFIGS)
def test_bad_config_values_are_named(case, tmp_path):
    values, message = BAD_CONFIGS[case]
    (tmp_path / "config.json").write_text(json.dumps(values))
    with pytest.raises(ValueError, match=message):
        TrainConfig.from_file(tmp_path / "config.json")


def test_a_config_that_is_not_an_object(tmp_path):
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="must hold a JSON object of TrainConfig fields, got a list"):
        TrainConfig.from_file(tmp_path / "list.json")
    (tmp_path / "broken.json").write_text('{"seed": ')
    with pytest.raises(ValueError, match="cannot read the training config .* as JSON"):
        TrainConfig.from_file(tmp_path / "broken.json")


def test_every_document_its_own_family_fails_instead_of_looping():
    documents = [document(i, f"family-{i}") for i in range(6)]
    with deadline(20), pytest.raises(ValueError, match="no family has 2 or more documents"):
        PlannedBatches(documents, TrainConfig(max_steps=10, batch_size=4))


def test_training_that_cannot_run_fails_before_any_step(built, tmp_path):
    checkpoint = built["bert"][0]
    write_documents(tmp_path / "alone.jsonl", [document(i, f"f{i}") for i in range(4)])
    write_documents(tmp_path / "family.jsonl", [document(i, "f") for i in range(4)])
    from contextembed.training import train

    with deadline(60):
        with pytest.raises(ValueError, match="no family has 2 or more documents"):
            train(checkpoint, tmp_path / "alone.jsonl", tmp_path / "run1", TrainConfig(max_steps=5, batch_size=2))
        with pytest.raises(ValueError, match="longer than max_document_tokens=1 tokens"):
            train(checkpoint, tmp_path / "family.jsonl", tmp_path / "run2",
                  TrainConfig(max_steps=5, batch_size=2, max_document_tokens=1))
        with pytest.raises(ValueError, match="--resume: .* has no checkpoint to continue from"):
            train(checkpoint, tmp_path / "family.jsonl", tmp_path / "empty", TrainConfig(max_steps=5, batch_size=2),
                  resume=True)
    assert not (tmp_path / "run1").exists() and not (tmp_path / "empty").exists()  # nothing written either


def test_the_train_command_names_a_bad_config(built, tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({"temperature": 0}))
    assert main(["train", str(built["bert"][0]), "data.jsonl", str(tmp_path / "out"),
                 "--config", str(tmp_path / "config.json")]) == 2
    assert "temperature must be a positive number, got 0" in capsys.readouterr().err


BAD_RECORDS = {
    "text not a string": ({"text": 42}, "field 'text' must be a string, got int"),
    "string spans": ({"sentences": [["0", "15"]]}, r"field 'sentences' must be a list of \[start, end\] integer pairs"),
    "queries not a list": ({"queries": "rent"}, "field 'queries' must be a list of objects"),
    "query text missing": ({"queries": [{"answer": [[0, 4]]}]}, r"queries\[0\].text must be a string"),
    "record is a list": (None, "JSON object, got list"),
}


@pytest.mark.parametrize("case", BAD_RECORDS)
def test_bad_training_records_are_named_with_their_line(case, tmp_path):
    changes, message = BAD_RECORDS[case]
    good = {"id": "d", "source": "s", "family": "f", "text": "the rent is due", "sentences": [[0, 15]],
            "paragraphs": [], "queries": [{"text": "rent", "answer": [[0, 4]]}]}
    record = [1, 2] if changes is None else {**good, **changes}
    (tmp_path / "data.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(record) + "\n")
    with pytest.raises(ValueError, match=f"data.jsonl:2: .*{message}"):
        read_documents(tmp_path / "data.jsonl")
