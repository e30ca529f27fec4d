"""Families of near-identical documents built from real text: copies that differ only in what identifies them.

A family takes a run of real sections (a page of the Python or Perl docs, a manual page, a chapter of the Debian
FAQ, a speech) and makes `copies` documents of it that are identical word for word except the *identifying span*:
the name in the opening, an alias, a version number, who wrote it (among several people named in every copy), a
scope line ahead of a section, or a date. Queries ask about later sentences of the real text, which never contain
the identifying span: only the document around a sentence tells the copies apart, at distances from a few tokens to
several 512-token windows. The asked sentence may refer to the identity the way real text does ("The company notes
that ...", "She points out that ...", "In this release, ..."), the same words in every copy.

Each generator is one reference form; `HELD_OUT_GENERATORS` never build training documents (see
`split_texts` and scripts/build_training_data.py), so validation measures a form the model never trained on.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from contextembed.training.data import TrainingDocument, TrainingQuery, lines_document
from contextembed.training.texts import Text

GENERATORS = ("named", "alias", "version", "people", "scoped", "dated")
HELD_OUT_GENERATORS = ("dated",)  # validation only: never in training
HELD_OUT_SOURCES = ("sotu",)  # validation only: never in training
TRAINING_GENERATORS = tuple(g for g in GENERATORS if g not in HELD_OUT_GENERATORS)
KINDS = {"pydocs": "guide", "perldoc": "manual", "manpages": "manual page", "debianfaq": "FAQ", "sotu": "address"}
NEAR_TOKENS = 480  # an asked sentence ending within this many tokens of the document's start is read in one pass

SYLLABLES = ("ka", "lo", "mer", "vin", "dra", "sel", "tor", "bri", "nam", "qua", "rex", "fol", "gan", "pir", "zu",
             "hal", "ost", "len", "cor", "tia", "bel", "mun", "sar", "ved")
ORG_SUFFIXES = ("Ltd", "Group", "Systems", "Labs", "Foundation", "Institute", "Partners", "Works")
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
    """What one copy says about itself: its opening lines, an optional scope line, and how a query names it."""

    opening: list[str]
    names: list[str]  # the identifying strings of this copy (none of them occurs in the shared text)
    asks: list[str]  # ways a query names this copy
    scope: str | None = None  # a line put ahead of the asked sentences (the "scoped" generator)


def _name(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()


def _distinct(make: Callable[[], str], n: int) -> list[str]:
    values: list[str] = []
    while len(values) < n:
        value = make()
        if value not in values:
            values.append(value)
    return values


def identities(generator: str, kind: str, copies: int, rng: random.Random) -> tuple[list[Identity], str]:
    """`copies` identities for one family and the reference words the asked sentences start with ("" for none).

    >>> ids, _ = identities("version", "guide", 3, random.Random(0))
    >>> len({i.opening[0] for i in ids}), all(i.names[0] in i.opening[0] for i in ids)
    (3, True)
    """
    pick = rng.randrange(2)
    if generator == "named":
        orgs = _distinct(lambda: f"{_name(rng)} {rng.choice(ORG_SUFFIXES)}", copies)
        form = ("This {kind} is published by {o} for everyone who works there.", "{K} of {o}.")[pick]
        refer = rng.choice(["The company notes that ", "According to the organisation, ", ""])
        return [Identity([form.format(kind=kind, K=kind.capitalize(), o=o)], [o], [o]) for o in orgs], refer
    if generator == "alias":
        names = _distinct(lambda: _name(rng), 2 * copies)
        form = ("This {kind} comes from {n}, known to its members as {a}.", "{K} of {n} (called {a} for short).")[pick]
        refer = rng.choice(["Locally, ", "Here, ", ""])
        return [Identity([form.format(kind=kind, K=kind.capitalize(), n=n, a=a)], [n, a], [a])
                for n, a in zip(names[:copies], names[copies:])], refer
    if generator == "version":
        product = _name(rng)
        versions = _distinct(lambda: f"{rng.randint(1, 9)}.{rng.randint(0, 19)}" + (
            f".{rng.randint(0, 9)}" if rng.random() < 0.3 else ""), copies)
        form = ("This {kind} describes version {v} of {p}.", "{p} {v}: the {kind}.")[pick]
        refer = rng.choice(["In this release, ", "In this version, ", ""])
        return [Identity([form.format(kind=kind, p=product, v=v)], [v], [f"{product} {v}", f"version {v} of {product}"])
                for v in versions], refer
    if generator == "people":  # a shared cast: every copy names three people, who wrote it differs
        cast = _distinct(lambda: f"{_name(rng)} {_name(rng)}", copies)
        she, her = rng.choice([("She", "her"), ("He", "his")])
        refer = rng.choice([f"{she} points out that ", f"{she} explains that ", f"In {her} view, "])
        result = []
        for k, author in enumerate(cast):
            others = cast[(k + 1) % copies], cast[(k + 2) % copies]
            opening = [f"{author} wrote this {kind}.", f"{others[0]} and {others[1]} reviewed it."]
            result.append(Identity(opening, [author], [f"{author}'s {kind}", f"the {kind} {author} wrote"]))
        return result, refer
    if generator == "scoped":
        places = _distinct(lambda: _name(rng), copies)
        form = ("The rest of this {kind} applies only to the {x} office.", "Section for members in {x}.")[pick]
        return [Identity([], [x], [f"the {x} office" if pick == 0 else f"members in {x}"],
                         scope=form.format(kind=kind, x=x)) for x in places], ""
    if generator == "dated":
        dates = _distinct(lambda: f"{rng.choice(MONTHS)} {rng.randint(1950, 2030)}", copies)
        form = ("This {kind} is the edition of {d}.", "{K}, issued in {d}.")[pick]
        return [Identity([form.format(kind=kind, K=kind.capitalize(), d=d)], [d], [f"the {d} {kind}", f"the {d} edition"])
                for d in dates], ""
    raise ValueError(f"generator must be one of {GENERATORS}, got {generator!r}")


def content_words(sentence: str) -> list[str]:
    """The sentence's words that are not stop words, in order.

    >>> content_words("The cache is now cleared on every restart of the server.")
    ['cache', 'cleared', 'restart', 'server']
    """
    return [w for w in re.findall(r"[A-Za-z][A-Za-z'-]*[A-Za-z]", sentence) if w.lower() not in STOPWORDS]


QUERY_FORMS = ("{ident}: {words}", "{words} ({ident})", "What does {ident} say about {words}?",
               "{words}, according to {ident}", "In {ident}, {words}?", "{words} in {ident}")


def query_text(sentence: str, ident: str, rng: random.Random) -> str:
    """A query naming `ident` and 3-6 of the sentence's content words (a random subset, kept in order)."""
    words = content_words(sentence)
    keep = sorted(rng.sample(range(len(words)), min(len(words), rng.randint(3, 6))))
    text = rng.choice(QUERY_FORMS).format(ident=ident, words=" ".join(words[i] for i in keep))
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

    The copies' texts are identical except the identity's lines; every copy gets the same asked sentences, each
    query naming that copy's identity. A query's `kind` is `generator/near` or `generator/far` (whether the asked
    sentence ends within `NEAR_TOKENS` tokens of the document's start, as `count_tokens` counts them).
    """
    kind = KINDS.get(text.source, "document")
    if start is None:
        start = rng.randrange(max(1, len(text.sections)))
    body = _body(text, start, max_chars)
    people, refer = identities(generator, kind, copies, rng)
    forbidden = [n.lower() for identity in people for n in identity.names]
    lines_template: list[str | None] = []  # None marks where a copy's identity lines go
    paragraphs_of: list[list[int]] = []
    candidates = []
    title = text.title if text.title and text.title not in ("", text.id) else ""
    if people[0].opening:
        lines_template.append(None)
    if title:
        lines_template.append(title)
    for heading, paragraphs in body:
        if heading and heading != title:
            lines_template.append(heading)
        for sentences in paragraphs:
            first = len(lines_template)
            for sentence in sentences:
                if (30 <= len(sentence) <= 300 and len(content_words(sentence)) >= 4
                        and not any(f in sentence.lower() for f in forbidden)):
                    candidates.append(len(lines_template))
                lines_template.append(sentence)
            paragraphs_of.append(list(range(first, len(lines_template))))
    counts = {}
    for i in candidates:
        counts[lines_template[i]] = counts.get(lines_template[i], 0) + 1
    candidates = [i for i in candidates if counts[lines_template[i]] == 1 and i > 1]
    if len(candidates) < 2:
        return []
    stride = len(candidates) / min(queries_per_document, len(candidates))
    asked = sorted({candidates[min(len(candidates) - 1, int(k * stride + rng.random() * stride))]
                    for k in range(min(queries_per_document, len(candidates)))})
    originals = {i: lines_template[i] for i in asked}  # queries take their words from the real sentence
    if refer:
        for i in asked:
            lines_template[i] = refer + _lower_first(lines_template[i])
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
            else:
                lines.append(line)
        evidence = where.get("opening", []) + ([where["scope"]] if "scope" in where else [])
        prefix_chars = 0
        positions = []
        for line in lines:
            positions.append(prefix_chars)
            prefix_chars += len(line) + 1
        queries = []
        for i in asked:
            line = where[i]
            end = positions[line] + len(lines[line])
            distance = "near" if count_tokens("\n".join(lines)[:end]) <= NEAR_TOKENS else "far"
            ident = rng.choice(identity.asks)
            queries.append((query_text(originals[i], ident, rng), [line], evidence, f"{generator}/{distance}"))
        paragraphs = [[where[i] for i in p] for p in paragraphs_of]
        paragraphs = [evidence] + paragraphs if evidence else paragraphs
        documents.append(lines_document(f"{family}/{number}", text.source, family, lines, paragraphs, queries))
    return documents


def split_texts(texts: list[Text], validation_fraction: float, seed: int) -> tuple[list[Text], list[Text]]:
    """(training texts, validation texts): every text of a held-out source, and `validation_fraction` of each other
    source's texts (by text, so no page is in both), are for validation only.

    >>> texts = [Text(f"s/{i}", "pydocs", "t") for i in range(20)] + [Text("sotu/1", "sotu", "t")]
    >>> train, validation = split_texts(texts, 0.25, seed=0)
    >>> len(train) + len(validation), any(t.source == "sotu" for t in train)
    (21, False)
    """
    rng = random.Random(seed)
    train, validation = [], []
    for text in texts:
        held_out = text.source in HELD_OUT_SOURCES or rng.random() < validation_fraction
        (validation if held_out else train).append(text)
    return train, validation
