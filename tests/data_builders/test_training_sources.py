"""Training data: built from structure with gold spans, and never containing the shipped evaluation documents."""

from __future__ import annotations

import json
import random

import pytest

from contextembed.evaluation.datasets import shipped_dataset
from contextembed.evaluation.loaders import load_context_bench
from contextembed.training.data import family_batches, read_documents, write_documents
from training_families import GENERATORS, family_documents
from training_sources import exclude_evaluation_documents, recipe_documents
from tests.data_builders.test_training_families import real_text


def families(count: int, copies: int = 8, seed: int = 0):
    rng = random.Random(seed)
    return [d for k in range(count) for d in family_documents(real_text(), GENERATORS[k % len(GENERATORS)], rng,
                                                              copies=copies, max_chars=2000)]


def shipped_recipes():
    documents, _ = load_context_bench(shipped_dataset("recipes"))
    return documents


def test_recipes_of_the_evaluation_set_are_excluded_by_title_and_by_minhash(tmp_path):
    evaluation = shipped_recipes()
    recipes = {}
    for i, doc in enumerate(evaluation[:3]):  # three evaluation recipes, in the package's layout
        title = doc.sentences[0].removeprefix("Recipe: ").removesuffix(".")
        start = doc.sentences.index("Procedure:")
        ingredients = doc.sentences[doc.sentences.index("Ingredients:") + 1 : start]
        recipes[f"eval{i}"] = {"title": title, "ingredients": ingredients, "steps": doc.sentences[start + 1 :]}
    copy = dict(recipes["eval2"], title=recipes["eval2"]["title"] + " (my version)")  # renamed near-duplicate
    recipes["renamed"] = copy
    recipes["other"] = {"title": "Plain Toast", "ingredients": ["bread", "butter"],
                        "steps": ["Toast the bread until golden.", "Spread with butter and serve."]}
    (tmp_path / "recipes.json").write_text(json.dumps(recipes))
    titles = {recipes["eval0"]["title"], recipes["eval1"]["title"], recipes["eval2"]["title"]}
    built = recipe_documents(titles, path=tmp_path / "recipes.json")
    assert sorted(d.id for d in built) == ["recipes/other", "recipes/renamed"]  # excluded by title
    texts = {f"recipes/{d.id}": "\n".join(d.sentences) for d in evaluation}
    kept, dropped = exclude_evaluation_documents(built, texts)
    assert [d.id for d in kept] == ["recipes/other"] and dropped == ["recipes/renamed"]  # and by MinHash


def test_batches_stay_within_one_family():
    documents = families(6)
    for batch in family_batches(documents, 8, seed=1):
        assert len({documents[i].family for i in batch}) == 1 and len(batch) == 8


def test_training_files_round_trip_and_are_checked(tmp_path):
    documents = families(1, copies=2)
    write_documents(tmp_path / "data.jsonl", documents)
    assert read_documents(tmp_path / "data.jsonl") == documents
    record = json.loads((tmp_path / "data.jsonl").read_text().splitlines()[0])
    record["queries"][0]["answer"] = [[0, 10**6]]
    (tmp_path / "bad.jsonl").write_text(json.dumps(record) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:1: a span lies outside the text"):
        read_documents(tmp_path / "bad.jsonl")


def test_the_validation_split_becomes_evaluation_sets_per_source(tmp_path):
    import runpy
    from pathlib import Path

    write_sets = runpy.run_path(str(Path(__file__).parents[2] / "data_builders" / "validation_sets.py"))["write_sets"]
    documents = families(3, copies=3)
    write_documents(tmp_path / "data.validation.jsonl", documents)
    folders = write_sets(tmp_path / "data.validation.jsonl", tmp_path / "sets")
    assert set(folders) == {"manpages"}
    loaded_documents, queries = load_context_bench(folders["manpages"])  # the loader cross-checks every reference
    assert len(loaded_documents) == len(documents)
    assert len(queries) == sum(len(d.queries) for d in documents)
    assert {q.capability for q in queries} == {q.kind for d in documents for q in d.queries}  # near/far by kind
    by_id = {d.id: d for d in documents}
    for query in queries[:10]:  # an answer sentence holds the answer span's text
        document = by_id[query.targets[0]]
        source = next(q for q in document.queries if q.text == query.query)
        answer_text = document.text[slice(*source.answer[0])]
        sentences = [document.text[s:e] for s, e in document.sentences]
        assert any(answer_text in sentences[int(ref.split("#")[1])] or sentences[int(ref.split("#")[1])] in answer_text
                   for ref in query.answers)
