"""Training examples: documents with character spans for sentences and paragraphs, and queries whose answer and
evidence are character spans (gold token labels, valid under any chunking), plus the chunking drawn per batch.

A training file is JSON lines, one document per line:

    {"id": "recipes/0042", "source": "recipes", "family": "recipes", "text": "...",
     "sentences": [[start, end], ...], "paragraphs": [[start, end], ...],
     "queries": [{"text": "...", "answer": [[start, end], ...], "evidence": [[start, end], ...],
                  "teacher": [[start, end, score], ...], "kind": "named/far"}]}

`teacher` (optional) holds an independent teacher's scores in [0, 1] for sentences around the answer (scaled by
`evidence_weight` in the labels, never above the answer's 1); `kind` (optional) names what the query tests.

Batches are drawn from one family at a time (the other documents of a batch are hard negatives).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from contextembed.chunking import Chunk, TokenChunks

Span = tuple[int, int]
# The chunkers training draws from: three of CHUNKERS, and "fragments" (sentences, some split after their first
# words, so that near-empty chunks such as a clause number "10." occur in training and learn not to win).
TRAINING_CHUNKERS = ("sentences", "paragraphs", "tokens", "fragments")
FRAGMENT_RATE = 0.2  # the share of sentences the fragments chunker splits
TOKEN_WINDOW_SIZES = (64, 128, 256, 512)


@dataclass
class TrainingQuery:
    text: str
    answer: list[Span]
    evidence: list[Span] = field(default_factory=list)
    teacher: list[tuple[int, int, float]] = field(default_factory=list)
    kind: str = ""


@dataclass
class TrainingDocument:
    id: str
    source: str
    family: str
    text: str
    sentences: list[Span]
    paragraphs: list[Span]
    queries: list[TrainingQuery]

    @classmethod
    def from_dict(cls, record: dict) -> TrainingDocument:
        """A document from one JSON record; a field of the wrong type is a `ValueError` naming it."""
        if not isinstance(record, dict):
            raise ValueError(f"a training document is a JSON object, got {type(record).__name__}")
        for name in ("id", "source", "family", "text"):
            if not isinstance(record.get(name), str):
                raise ValueError(f"field {name!r} must be a string, got {type(record.get(name)).__name__}")
        queries = record.get("queries")
        if not isinstance(queries, list) or not all(isinstance(q, dict) for q in queries):
            raise ValueError("field 'queries' must be a list of objects")
        for i, query in enumerate(queries):
            if not isinstance(query.get("text"), str):
                raise ValueError(f"queries[{i}].text must be a string, got {type(query.get('text')).__name__}")
        return cls(record["id"], record["source"], record["family"], record["text"],
                   _spans(record.get("sentences"), "sentences"), _spans(record.get("paragraphs", []), "paragraphs"),
                   [TrainingQuery(q["text"], _spans(q.get("answer"), f"queries[{i}].answer"),
                                  _spans(q.get("evidence", []), f"queries[{i}].evidence"),
                                  _scores(q.get("teacher", []), f"queries[{i}].teacher"), str(q.get("kind", "")))
                    for i, q in enumerate(queries)])


def _scores(values, name: str) -> list[tuple[int, int, float]]:
    """`[[start, end, score], ...]` with integer offsets and a score in [0, 1].

    >>> _scores([[0, 4, 0.5]], "teacher")
    [(0, 4, 0.5)]
    >>> _scores([[0, 4, 2]], "teacher")
    Traceback (most recent call last):
    ...
    ValueError: field 'teacher' must be a list of [start, end, score] with a score in [0, 1], got [0, 4, 2]
    """
    if not isinstance(values, list):
        raise ValueError(f"field {name!r} must be a list of [start, end, score], got {type(values).__name__}")
    result = []
    for value in values:
        if (not isinstance(value, list) or len(value) != 3 or any(isinstance(v, bool) for v in value)
                or not all(isinstance(v, int) for v in value[:2]) or not isinstance(value[2], (int, float))
                or not 0 <= value[2] <= 1):
            raise ValueError(f"field {name!r} must be a list of [start, end, score] with a score in [0, 1], "
                             f"got {value!r}")
        result.append((value[0], value[1], float(value[2])))
    return result


def _spans(values, name: str) -> list[Span]:
    """`[[start, end], ...]` as tuples of integers.

    >>> _spans([[0, 4], [5, 9]], "sentences")
    [(0, 4), (5, 9)]
    >>> _spans([["0", "4"]], "sentences")
    Traceback (most recent call last):
    ...
    ValueError: field 'sentences' must be a list of [start, end] integer pairs, got ['0', '4']
    """
    if not isinstance(values, list):
        raise ValueError(f"field {name!r} must be a list of [start, end] integer pairs, got {type(values).__name__}")
    for value in values:
        if (not isinstance(value, list) or len(value) != 2
                or any(isinstance(v, bool) or not isinstance(v, int) for v in value)):
            raise ValueError(f"field {name!r} must be a list of [start, end] integer pairs, got {value!r}")
    return [tuple(v) for v in values]


def lines_document(doc_id: str, source: str, family: str, lines: list[str], paragraphs: list[list[int]],
                   queries: list[tuple]) -> TrainingDocument:
    """A document made of lines joined by newlines (one sentence each); paragraphs are lists of line indices and
    each query is `(text, answer lines, evidence lines)` or `(text, answer lines, evidence lines, kind)`.

    >>> d = lines_document("d", "s", "f", ["Title.", "Rent is due."], [[0], [1]], [("rent?", [1], [0], "named/near")])
    >>> d.text[slice(*d.queries[0].answer[0])], d.queries[0].kind
    ('Rent is due.', 'named/near')
    """
    text, spans = "", []
    for line in lines:
        spans.append((len(text), len(text) + len(line)))
        text += line + "\n"
    to_spans = lambda indices: [spans[i] for i in indices]  # noqa: E731
    return TrainingDocument(
        doc_id, source, family, text.rstrip("\n"), spans,
        [(spans[p[0]][0], spans[p[-1]][1]) for p in paragraphs if p],
        [TrainingQuery(q[0], to_spans(q[1]), to_spans(q[2]), kind=q[3] if len(q) > 3 else "") for q in queries])


def write_documents(path: str | Path, documents: list[TrainingDocument]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for document in documents:
            f.write(json.dumps(asdict(document), ensure_ascii=False) + "\n")


def read_documents(path: str | Path) -> list[TrainingDocument]:
    """Read a training file; each record is checked (spans inside the text, at least one query)."""
    from contextembed.jsonl import read_records

    documents = []
    for line, record in read_records(Path(path)):
        where = f"{path}:{line}"
        try:
            document = TrainingDocument.from_dict(record)
        except ValueError as error:
            raise ValueError(f"{where}: not a training document: {error}") from error
        spans = [*document.sentences, *document.paragraphs]
        spans += [s for q in document.queries for s in (*q.answer, *q.evidence, *(t[:2] for t in q.teacher))]
        if not document.queries or not document.sentences:
            raise ValueError(f"{where}: a training document needs sentences and at least one query")
        if any(not 0 <= s < e <= len(document.text) for s, e in spans):
            raise ValueError(f"{where}: a span lies outside the text of {len(document.text)} characters")
        documents.append(document)
    if not documents:
        raise ValueError(f"{path} holds no training documents")
    return documents


def chunk_document(document: TrainingDocument, chunker: str, tokenizer=None, window: int = 128,
                   rng: random.Random | None = None) -> list[Chunk]:
    """The document's chunks under one of `TRAINING_CHUNKERS`, as `Chunk`s with character offsets."""
    if chunker == "sentences":
        spans = document.sentences
    elif chunker == "paragraphs":
        spans = document.paragraphs or document.sentences
    elif chunker == "tokens":
        return TokenChunks(window)(document.text, tokenizer)
    elif chunker == "fragments":
        spans = fragment_spans(document.text, document.sentences, rng or random.Random(0))
    else:
        raise ValueError(f"chunker must be one of {TRAINING_CHUNKERS}, got {chunker!r}")
    return [Chunk(document.text[s:e], s, e) for s, e in spans]


def fragment_spans(text: str, sentences: list[Span], rng: random.Random, rate: float = FRAGMENT_RATE) -> list[Span]:
    """Sentence spans, each sentence of four or more words split after its first one or two words at `rate`.

    >>> fragment_spans("10. Late rent is charged. Pay.", [(0, 25), (26, 30)], random.Random(0), rate=1.0)
    [(0, 3), (4, 25), (26, 30)]
    """
    spans = []
    for start, end in sentences:
        words = list(re.finditer(r"\S+", text[start:end]))
        if len(words) >= 4 and rng.random() < rate:
            k = rng.choice((1, 1, 2))  # words in the fragment
            spans += [(start, start + words[k - 1].end()), (start + words[k].start(), end)]
        else:
            spans.append((start, end))
    return spans


def word_labels(text: str, query: TrainingQuery, evidence_weight: float = 0.5) -> list[tuple[int, int, float]]:
    """Scores of the document's words: 1 inside an answer span, `evidence_weight` inside evidence, else the
    teacher's score (scaled by `evidence_weight`) where it scored the sentence, else 0.

    Words stand in for tokens: the teacher's chunk relevance only needs a score per small unit.

    >>> word_labels("Rent is due. It is late.", TrainingQuery("q", answer=[(13, 24)], evidence=[(0, 12)]))
    [(0, 4, 0.5), (5, 7, 0.5), (8, 12, 0.5), (13, 15, 1.0), (16, 18, 1.0), (19, 24, 1.0)]
    >>> word_labels("Rent is due. It is late.", TrainingQuery("q", answer=[(0, 12)], teacher=[(13, 24, 0.5)]))
    [(0, 4, 1.0), (5, 7, 1.0), (8, 12, 1.0), (13, 15, 0.25), (16, 18, 0.25), (19, 24, 0.25)]
    """
    labels = []
    for match in re.finditer(r"\S+", text):
        s, e = match.span()
        score = 0.0
        if any(s < ae and as_ < e for as_, ae in query.answer):
            score = 1.0
        elif any(s < ee and es < e for es, ee in query.evidence):
            score = evidence_weight
        else:
            score = max([evidence_weight * t for ts, te, t in query.teacher if s < te and ts < e], default=0.0)
        labels.append((s, e, score))
    return labels


def family_batches(documents: list[TrainingDocument], batch_size: int, seed: int) -> list[list[int]]:
    """Document indices in batches of one family each (at most `batch_size`, sizes spread evenly), shuffled;
    a family of one document forms no batch.

    >>> docs = [TrainingDocument(str(i), "s", "a" if i < 5 else "b", "x", [(0, 1)], [], []) for i in range(8)]
    >>> sorted(len(b) for b in family_batches(docs, 4, seed=0))
    [2, 3, 3]
    """
    rng = random.Random(seed)
    by_family: dict[str, list[int]] = {}
    for i, document in enumerate(documents):
        by_family.setdefault(document.family, []).append(i)
    batches = []
    for members in by_family.values():
        rng.shuffle(members)
        count = -(-len(members) // batch_size)
        for k in range(count):
            batch = members[k::count]
            if len(batch) >= 2:
                batches.append(batch)
    rng.shuffle(batches)
    return batches
