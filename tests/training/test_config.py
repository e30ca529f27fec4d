"""Every training configuration either trains or fails at once with a message naming its problem: nothing loops
forever, nothing trains one step and calls itself trained, no bad value reaches the math."""

from __future__ import annotations

import json

import pytest

from contextembed.cli import main
from contextembed.training.batches import PlannedBatches
from contextembed.training.config import TrainConfig
from contextembed.training.data import TrainingDocument, TrainingQuery, read_documents, write_documents


def document(i: int, family: str) -> TrainingDocument:
    return TrainingDocument(f"d{i}", "s", family, "the rent is due", [(0, 15)], [], [TrainingQuery("rent", [(0, 15)])])


BAD_CONFIGS = {
    "max_document_tokens": ({"data": {"max_document_tokens": -1}},
                            "data.max_document_tokens must be a positive integer, got -1"),
    "max_minutes": ({"schedule": {"max_minutes": -1}},
                    r"schedule.max_minutes must be a positive number of minutes \(or null\), got -1"),
    "learning rate text": ({"schedule": {"learning_rate": "abc"}},
                           "schedule.learning_rate must be a positive number, got 'abc'"),
    "temperature zero": ({"losses": {"temperature": 0}}, "losses.temperature must be a positive number, got 0"),
    "teacher temperature": ({"losses": {"teacher_temperature": -0.1}},
                            "losses.teacher_temperature must be a positive number"),
    "negative chunking weight": ({"data": {"chunking_weights": {"sentences": 1.0, "tokens": -0.5}}},
                                 "data.chunking_weights must map some of .* to numbers >= 0"),
    "all chunking weights zero": ({"data": {"chunking_weights": {"sentences": 0}}}, "not all zero"),
    "max steps bool": ({"schedule": {"max_steps": True}}, "schedule.max_steps must be a positive integer, got True"),
    "bf16 text": ({"schedule": {"bf16": "yes"}}, "schedule.bf16 must be true or false"),
    "fraction above one": ({"losses": {"qat_fraction": 1.5}}, r"losses.qat_fraction must be a number in \[0, 1\]"),
    "matryoshka dims": ({"losses": {"matryoshka_dims": [0]}},
                        "losses.matryoshka_dims must be a non-empty list of positive integers"),
    "head choices": ({"data": {"window_head_choices": [32, -1]}},
                     r"data.window_head_choices must be a list of integers >= 0"),
    "head choices not a list": ({"data": {"window_head_choices": 32}}, r"data.window_head_choices must be a list"),
    "a flat field": ({"temperature": 0.1}, r"unknown training options in .*: \['temperature'\]"),
    "a field in the wrong group": ({"losses": {"max_steps": 3}}, r"\['losses.max_steps'\]"),
    "a group that is not an object": ({"losses": [1]}, "losses must be an object of LossConfig fields"),
    "a deleted knob": ({"losses": {"within_skip_answer": True}}, r"\['losses.within_skip_answer'\]"),
}


@pytest.mark.parametrize("case", BAD_CONFIGS)
def test_bad_config_values_are_named(case, tmp_path):
    values, message = BAD_CONFIGS[case]
    (tmp_path / "config.json").write_text(json.dumps(values))
    with pytest.raises(ValueError, match=message):
        TrainConfig.from_file(tmp_path / "config.json")


def test_a_config_that_is_not_an_object(tmp_path):
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="must hold a JSON object .*got a list"):
        TrainConfig.from_file(tmp_path / "list.json")
    (tmp_path / "broken.json").write_text('{"seed": ')
    with pytest.raises(ValueError, match="cannot read the training config .* as JSON"):
        TrainConfig.from_file(tmp_path / "broken.json")


def test_every_document_its_own_family_fails_instead_of_looping():
    documents = [document(i, f"family-{i}") for i in range(6)]
    with pytest.raises(ValueError, match="no family has 2 or more documents"):
        PlannedBatches(documents, TrainConfig.from_dict(max_steps=10, batch_size=4))


def test_training_that_cannot_run_fails_before_any_step(built, tmp_path):
    checkpoint = built["bert"][0]
    write_documents(tmp_path / "alone.jsonl", [document(i, f"f{i}") for i in range(4)])
    write_documents(tmp_path / "family.jsonl", [document(i, "f") for i in range(4)])
    from contextembed.training import train

    with pytest.raises(ValueError, match="no family has 2 or more documents"):
        train(checkpoint, tmp_path / "alone.jsonl", tmp_path / "run1", TrainConfig.from_dict(max_steps=5, batch_size=2))
    with pytest.raises(ValueError, match="longer than max_document_tokens=1 tokens"):
        train(checkpoint, tmp_path / "family.jsonl", tmp_path / "run2",
              TrainConfig.from_dict(max_steps=5, batch_size=2, max_document_tokens=1))
    with pytest.raises(ValueError, match="--resume: .* has no checkpoint to continue from"):
        train(checkpoint, tmp_path / "family.jsonl", tmp_path / "empty", TrainConfig.from_dict(max_steps=5, batch_size=2),
              resume=True)
    assert not (tmp_path / "run1").exists() and not (tmp_path / "empty").exists()  # nothing written either


def test_the_train_command_names_a_bad_config(built, tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({"losses": {"temperature": 0}}))
    assert main(["train", str(built["bert"][0]), "data.jsonl", str(tmp_path / "out"),
                 "--config", str(tmp_path / "config.json")]) == 2
    assert "losses.temperature must be a positive number, got 0" in capsys.readouterr().err


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
