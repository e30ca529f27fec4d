"""Families from real text: copies that differ only in what identifies them, asked about sentences that never
name it; and the split that keeps a whole source and a whole generator out of training."""

from __future__ import annotations

import random
import re

import pytest

from training_families import (
    GENERATORS,
    HELD_OUT_GENERATORS,
    HELD_OUT_SOURCES,
    HELD_OUT_TEXTS,
    NEAR_TOKENS,
    TRAINING_GENERATORS,
    content_words,
    family_documents,
    identities,
    split_texts,
)
from training_texts import Text

SENTENCES = [
    "The configuration file is read once when the service starts.",
    "Each line holds a key and a value separated by an equals sign.",
    "Comments begin with a hash sign and run to the end of the line.",
    "Unknown keys are reported in the log and otherwise ignored.",
    "The reload command rereads the file without stopping running jobs.",
    "Paths may be absolute or relative to the folder of the file.",
    "A missing file is treated as an empty configuration.",
    "Values longer than one line continue after a trailing backslash.",
]


LETTERS = "bcdfgklmnprstvz"


def real_text(paragraphs: int = 12) -> Text:
    """A manual page of distinct sentences (a made-up word in each), 3 paragraphs of 4 sentences per section."""
    sentences = (f"{SENTENCES[n % 8][:-1]} for the {LETTERS[n % 15]}o{LETTERS[n // 15 % 15]}a table."
                 for n in range(paragraphs * 4))
    sections = [(f"Part {k}", [" ".join(next(sentences) for _ in range(4)) for _ in range(3)])
                for k in range(paragraphs // 3)]
    return Text("manpages/demo.5", "manpages", "demo", sections)


def mentions(text: str, name: str) -> bool:
    """Whether `text` holds `name` as whole words (any case: a query starts with a capital)."""
    return re.search(rf"(?<!\w){re.escape(name.lower())}(?!\w)", text.lower()) is not None


def names_of(family, generator, seed: int = 0) -> list[str]:
    """Every identifying string of every copy, regenerated with the same seed."""
    people = identities(generator, "manual page", len(family), random.Random(seed))
    return sorted({n for identity in people for n in identity.names}, key=len, reverse=True)


@pytest.mark.parametrize("generator", GENERATORS)
def test_copies_differ_only_in_the_identifying_span(generator):
    family = family_documents(real_text(), generator, random.Random(0), copies=8, max_chars=3000, start=0)
    assert len(family) == 8 and len({d.family for d in family}) == 1
    names = names_of(family, generator)
    assert len(names) >= 8
    masked = set()
    for document in family:
        text = document.text
        for name in names:
            text = text.replace(name, "X")
        masked.add(text)
    assert len(masked) == 1  # with every identity masked, the copies are the same text
    assert len({d.text for d in family}) == 8


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("generator", GENERATORS)
def test_the_asked_sentence_never_holds_what_the_query_names_and_the_query_names_its_copy(generator, seed):
    family = family_documents(real_text(), generator, random.Random(seed), copies=8, max_chars=3000, start=0)
    names = names_of(family, generator, seed)
    people = identities(generator, "manual page", 8, random.Random(seed))
    for document, identity in zip(family, people):
        own = [n for i in people if i.names[0] in document.text for n in i.names]  # everyone the copy mentions
        assert document.queries
        for query in document.queries:
            (start, end), = query.answer
            answer = document.text[start:end]
            asked = [a for a in identity.asks if mentions(query.text, a)]
            assert asked  # the query names its own copy
            assert not any(mentions(answer, a) for a in asked)  # the asked sentence never repeats it
            assert not any(mentions(query.text, n) for n in names if n not in own)  # no other copy is named
            assert set(answer.split()) - set(identity.refer.split())  # real text, not only reference words
            assert query.kind.startswith(generator + "/")
            assert all(document.text[s:e] and any(n in document.text[s:e] for n in own) for s, e in query.evidence)


def test_the_same_seed_draws_the_same_names_and_another_seed_others():
    first = [i.names for i in identities("people", "guide", 8, random.Random(7))]
    assert first == [i.names for i in identities("people", "guide", 8, random.Random(7))]
    assert first != [i.names for i in identities("people", "guide", 8, random.Random(8))]


def test_an_alias_is_used_by_the_sentences_or_by_the_queries_never_both():
    directions = set()
    for seed in range(30):
        for identity in identities("alias", "guide", 8, random.Random(seed)):
            full, alias = identity.names
            assert alias in identity.opening[0] and full in identity.opening[0]
            in_sentences, in_queries = alias in identity.refer, alias in identity.asks
            assert not (in_sentences and in_queries)
            directions.add((in_sentences, in_queries))
    assert directions == {(True, False), (False, True), (False, False)}


def test_several_people_of_one_gender_are_named_in_every_copy_and_who_wrote_it_differs():
    people = identities("people", "guide", 8, random.Random(3))
    authors = [i.names[0] for i in people]
    assert len(set(authors)) == 8
    for identity in people:
        opening = " ".join(identity.opening)
        assert sum(a in opening for a in authors) == 3  # three of the cast in every copy
        assert opening.index(identity.names[0]) == min(opening.index(a) for a in authors if a in opening)
    assert re.match(r"(She|He|In (her|his) view|According to (her|him)|(Her|His) advice)", people[0].refer)


def test_an_faq_heading_becomes_a_natural_question_answered_by_its_paragraph():
    sections = [(f"How do I configure the {w} table?", [" ".join(SENTENCES[k:k + 3]), SENTENCES[k + 4]])
                for k, w in enumerate(("boa", "coda", "dota", "foza"))]
    text = Text("perldoc/perlfaq9", "perldoc", "perlfaq9", sections)
    asked = []
    for seed in range(6):
        for document in family_documents(text, "named", random.Random(seed), copies=2, max_chars=3000, start=0):
            for query in document.queries:
                question = next((h for h, _ in sections if h in query.text), None)
                if question:
                    answer = [document.text[s:e] for s, e in query.answer]
                    paragraph = next(p for h, (p, _) in sections if h == question)
                    assert " ".join(answer).endswith(paragraph[-40:])  # the whole first paragraph answers it
                    asked.append(question)
    assert asked  # questions are used where the text has them


def test_distance_is_counted_in_tokens_from_the_document_start():
    family = family_documents(real_text(24), "named", random.Random(1), copies=2, max_chars=9000, start=0,
                              queries_per_document=8, count_tokens=lambda s: len(s.split()))
    for document in family:
        for query in document.queries:
            words = len(document.text[: query.answer[0][1]].split())
            assert query.kind == ("named/near" if words <= NEAR_TOKENS else "named/far")
    assert {q.kind for q in family[0].queries} == {"named/near", "named/far"}


def test_a_text_too_short_to_ask_about_makes_no_family():
    text = Text("pydocs/x", "pydocs", "x", [("", ["Too short."])])
    assert family_documents(text, "named", random.Random(0)) == []


def test_unknown_generator_is_named():
    with pytest.raises(ValueError, match="generator must be one of"):
        family_documents(real_text(), "rhyming", random.Random(0))


def test_held_out_source_and_generator_never_train():
    assert set(HELD_OUT_GENERATORS) & set(TRAINING_GENERATORS) == set()
    assert set(TRAINING_GENERATORS) | set(HELD_OUT_GENERATORS) == set(GENERATORS)
    texts = [Text(f"{source}/{i}", source, "t") for source in ("pydocs", "perldoc", *HELD_OUT_SOURCES)
             for i in range(50)] + [Text(i, i.split("/")[0], "faq") for i in HELD_OUT_TEXTS]
    train, validation = split_texts(texts, 0.1, seed=3)
    assert not any(t.source in HELD_OUT_SOURCES or t.id in HELD_OUT_TEXTS for t in train)
    assert set(HELD_OUT_TEXTS) <= {t.id for t in validation}  # the held-out FAQ pages validate natural questions
    assert {t.id for t in train} & {t.id for t in validation} == set()
    assert len(train) + len(validation) == len(texts)
    assert any(t.source == "pydocs" for t in validation)  # pages of the training sources are held out too


def test_query_words_come_from_the_real_sentence_not_the_reference_words():
    family = family_documents(real_text(), "people", random.Random(2), copies=3, max_chars=3000, start=0)
    refer = identities("people", "manual page", 3, random.Random(2))[0].refer
    for document in family:
        for query in document.queries:
            answer = document.text[slice(*query.answer[0])]
            assert answer.startswith(refer)  # the asked sentence refers by pronoun
            assert not set(content_words(refer)) & set(content_words(query.text))  # "points", "advice", ...


