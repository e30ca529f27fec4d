"""Training data: built from structure with gold spans, and never containing the shipped evaluation documents."""

from __future__ import annotations

import json

import pytest

from contextembed.evaluation.datasets import SHIPPED_LAYOUTS, shipped_dataset
from contextembed.evaluation.loaders import load_context_bench
from contextembed.training.data import family_batches, read_documents, write_documents
from contextembed.training.sources import exclude_evaluation_documents, recipe_documents, template_documents


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


def test_no_template_document_is_near_an_evaluation_document():
    texts = {}
    for name in (n for n, f in SHIPPED_LAYOUTS.items() if f == "context-bench"):
        texts.update({f"{name}/{d.id}": "\n".join(d.sentences) for d in load_context_bench(shipped_dataset(name))[0]})
    documents = template_documents(families_per_kind=2)
    kept, dropped = exclude_evaluation_documents(documents, texts)
    assert dropped == [] and len(kept) == len(documents)


def test_template_families_share_every_clause_and_differ_in_the_opening():
    documents = template_documents(families_per_kind=2, documents_per_family=4)
    family = [d for d in documents if d.family == documents[0].family]
    assert len(family) == 4
    bodies = {d.text.split("\n", 3)[3] for d in family}
    openings = {d.text.split("\n", 1)[0] for d in family}
    assert len(bodies) == 1 and len(openings) == 4
    (body,) = bodies
    for document in family:
        entity_line = document.text.split("\n", 1)[0]
        for query in document.queries:
            ((start, end),) = query.answer
            assert document.text[start:end] in body.split("\n")  # the answer is a clause every sibling shares
            assert query.evidence == [(0, len(entity_line))]  # and what tells them apart is the opening


def test_batches_stay_within_one_family():
    documents = template_documents(families_per_kind=3, documents_per_family=8)
    for batch in family_batches(documents, 8, seed=1):
        assert len({documents[i].family for i in batch}) == 1 and len(batch) == 8


def test_training_files_round_trip_and_are_checked(tmp_path):
    documents = template_documents(families_per_kind=1, documents_per_family=2)
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

    write_sets = runpy.run_path(str(Path(__file__).parents[2] / "scripts" / "build_validation_sets.py"))["write_sets"]
    documents = template_documents(families_per_kind=1, documents_per_family=3, seed=0)
    write_documents(tmp_path / "data.validation.jsonl", documents)
    folders = write_sets(tmp_path / "data.validation.jsonl", tmp_path / "sets")
    assert set(folders) == {"templates"}
    loaded_documents, queries = load_context_bench(folders["templates"])  # the loader cross-checks every reference
    assert len(loaded_documents) == len(documents)
    assert len(queries) == sum(len(d.queries) for d in documents)
    by_id = {d.id: d for d in documents}
    for query in queries[:10]:  # an answer sentence holds the answer span's text
        document = by_id[query.targets[0]]
        source = next(q for q in document.queries if q.text == query.query)
        answer_text = document.text[slice(*source.answer[0])]
        sentences = [document.text[s:e] for s, e in document.sentences]
        assert any(answer_text in sentences[int(ref.split("#")[1])] or sentences[int(ref.split("#")[1])] in answer_text
                   for ref in query.answers)
