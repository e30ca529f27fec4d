"""The hand-written validation families (data_builders/handwritten_families.py): copies that differ only in their
values, asked sentences that never hold a name, questions that name their own copy."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "data_builders" / "handwritten_families.py"


@pytest.fixture(scope="module")
def handwritten():
    spec = importlib.util.spec_from_file_location("handwritten_families", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def test_copies_differ_only_in_their_values_and_asked_sentences_name_no_one(handwritten):
    for set_name, documents in handwritten.sets().items():
        families: dict[str, list] = {}
        for document in documents:
            families.setdefault(document.family, []).append(document)
        for family, copies in families.items():
            genre = (handwritten.PRONOUN_GENRES if set_name == "handwritten-pronoun"
                     else handwritten.GENRES)[family.split("/")[0]]
            values = sorted({v for copy in genre.values for v in copy.values()}, key=len, reverse=True)
            masked = set()
            for document in copies:
                text = document.text
                for value in values:
                    text = text.replace(value, "X")
                masked.add(text)
            assert len(copies) == 8 and len(masked) == 1 and len({d.text for d in copies}) == 8
            for document, own in zip(copies, genre.values):
                for query in document.queries:
                    (start, end), = query.answer
                    assert not any(v in document.text[start:end] for v in values if genre.kind != "alias")
                    assert any(v in query.text for v in own.values())  # the question names its own copy


def test_the_pronoun_set_rests_on_many_sentences(handwritten):
    documents = handwritten.sets()["handwritten-pronoun"]
    asked = {document.text[slice(*query.answer[0])] for document in documents for query in document.queries}
    assert len(asked) == 29 and len(documents) == 32
    assert {q.kind for d in documents for q in d.queries} == {"pronoun/near"}
    genders = {("She" in " ".join(s for s, _ in g.asked)) for g in handwritten.PRONOUN_GENRES.values()}
    assert genders == {True, False}  # women and men
