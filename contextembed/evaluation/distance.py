"""How far each query's answer sits from its evidence, in the model's own tokens, and the buckets in which
`evaluate` reports the metrics by that distance (`by_distance`).

**Distance, exactly.** A document is tokenised as the model reads it for late chunking: each sentence by the
model's tokenizer alone (no special tokens), the chunk separator between sentences
(`ContextEmbedProcessor.tokenize_documents`). The distance between two sentences of one document is the number of
tokens strictly between them in that sequence: the sentences between them and the separators, so two neighbouring
sentences are 1 apart (the separator; 0 for a model without one). A query's distance is the smallest distance
between one of its accepted answer sentences and one of its evidence sentences (any alternative of any group) in
the same document.

**Buckets**, relative to the model's window W = `max_seq_length`: `[0, W/32)`, `[W/32, W/8)`, `[W/8, W/2)`,
`[W/2, W)` and `>= W` tokens (W/32 etc. rounded down; the empty ranges of a small window dropped). From W on no
window holds both sentences, so the answer's vector can have seen the evidence only through the window head (the
document's first `window_head_tokens` tokens, carried into every window): a query at `>= W` with an evidence
sentence of the answer's document wholly inside the window head has a bucket of its own. A query whose evidence lies
only in other documents than its answers ("evidence in another document") and a query without evidence, or without
an answer sentence to measure from ("no evidence"), have buckets of their own too, so every query is in exactly one
bucket and the buckets' query counts add up to the set's. `by_distance` lists every bucket, an empty one with
`"queries": 0`.
"""

from __future__ import annotations

from collections.abc import Sequence

from contextembed.evaluation.context_bench import ContextDocument, ContextQuery

OTHER_DOCUMENT = "evidence in another document"
NO_EVIDENCE = "no evidence"


def sentence_spans(chunk_ids: Sequence[int]) -> list[tuple[int, int]]:
    """`(start, end)` token positions of each chunk in one tokenised document, from its `chunk_ids` (-1 outside
    chunks: special tokens, prefix, separators), counted from the first chunk token.

    >>> sentence_spans([-1, 0, 0, -1, 1, -1, 2, 2, 2, -1])   # CLS, "a b", SEP, "c", SEP, "d e f", SEP
    [(0, 2), (3, 4), (5, 8)]
    """
    first = next(position for position, chunk in enumerate(chunk_ids) if chunk >= 0)
    spans: dict[int, list[int]] = {}
    for position, chunk in enumerate(chunk_ids):
        if chunk >= 0:
            span = spans.setdefault(chunk, [position - first, position - first + 1])
            span[1] = position - first + 1
    return [tuple(spans[chunk]) for chunk in range(len(spans))]


def tokens_between(a: tuple[int, int], b: tuple[int, int]) -> int:
    """Tokens strictly between two non-overlapping spans (end-exclusive), in either order.

    >>> tokens_between((0, 2), (3, 4)), tokens_between((5, 8), (0, 2)), tokens_between((0, 2), (2, 5))
    (1, 3, 0)
    """
    return max(b[0] - a[1], a[0] - b[1])


def answer_evidence_distance(query: ContextQuery, spans: dict[str, list[tuple[int, int]]]) -> int | None:
    """The query's distance (module docstring): the fewest tokens between an accepted answer sentence and an evidence
    sentence of the same document; None when no evidence sentence shares a document with an answer.

    >>> spans = {"d": [(0, 5), (6, 10), (11, 40), (41, 45)], "e": [(0, 3)]}
    >>> q = ContextQuery("q", "who?", ["d"], answers=["d#3"], evidence=[[["d#0"]], [["d#1", "e#0"]]])
    >>> answer_evidence_distance(q, spans)   # d#1 ends at 10, d#3 starts at 41
    31
    >>> answer_evidence_distance(ContextQuery("q", "who?", ["d"], ["d#3"], [[["e#0"]]]), spans) is None
    True
    """
    distances = [tokens_between(spans[a_doc][a_index], spans[e_doc][e_index])
                 for a_doc, a_index in map(_split, query.answers)
                 for e_doc, e_index in map(_split, _evidence_sentences(query)) if e_doc == a_doc]
    return min(distances, default=None)


def distance_buckets(max_seq_length: int, window_head_tokens: int = 0) -> list[str]:
    """The bucket labels in order: five token ranges relative to the window W, the window head's bucket when the
    model carries one, then the two buckets without a distance.

    >>> distance_buckets(512, window_head_tokens=48)  # doctest: +NORMALIZE_WHITESPACE
    ['0-15', '16-63', '64-255', '256-511', '>=512', '>=512, evidence in the window head',
     'evidence in another document', 'no evidence']
    >>> distance_buckets(16)[:4]  # 16 // 32 = 0: the first range merges away
    ['0-1', '2-7', '8-15', '>=16']
    """
    edges = _edges(max_seq_length)
    labels = [f"{low}-{high - 1}" for low, high in zip(edges[:-1], edges[1:])] + [f">={max_seq_length}"]
    if window_head_tokens:
        labels.append(f">={max_seq_length}, evidence in the window head")
    return labels + [OTHER_DOCUMENT, NO_EVIDENCE]


def distance_bucket(distance: int | None, has_evidence: bool, max_seq_length: int,
                    in_window_head: bool = False) -> str:
    """The bucket (a label of `distance_buckets`) of one query.

    >>> [distance_bucket(d, True, 512) for d in (0, 15, 16, 300, 511, 512)]
    ['0-15', '0-15', '16-63', '256-511', '256-511', '>=512']
    >>> distance_bucket(900, True, 512, in_window_head=True), distance_bucket(None, False, 512)
    ('>=512, evidence in the window head', 'no evidence')
    """
    if not has_evidence:
        return NO_EVIDENCE
    if distance is None:
        return OTHER_DOCUMENT
    if distance >= max_seq_length:
        return f">={max_seq_length}" + (", evidence in the window head" if in_window_head else "")
    edges = _edges(max_seq_length)
    high = next(edge for edge in edges[1:] if distance < edge)
    return f"{edges[edges.index(high) - 1]}-{high - 1}"


def distance_labels(documents: Sequence[ContextDocument], queries: Sequence[ContextQuery], processor,
                    max_seq_length: int, window_head_tokens: int = 0) -> list[str]:
    """The bucket of each query, the documents tokenised by `processor` (a `ContextEmbedProcessor`) as the model
    reads them."""
    rows = processor.tokenize_documents([list(d.sentences) for d in documents], task="document")
    spans = {d.id: sentence_spans(row["chunk_ids"]) for d, row in zip(documents, rows)}
    labels = []
    for query in queries:
        distance = answer_evidence_distance(query, spans)
        answer_docs = {doc for doc, _ in map(_split, query.answers)}
        in_head = window_head_tokens > 0 and any(
            doc in answer_docs and spans[doc][index][1] <= window_head_tokens
            for doc, index in map(_split, _evidence_sentences(query)))
        labels.append(distance_bucket(distance, bool(query.evidence and query.answers), max_seq_length, in_head))
    return labels


def _edges(max_seq_length: int) -> list[int]:
    if isinstance(max_seq_length, bool) or not isinstance(max_seq_length, int) or max_seq_length <= 0:
        raise ValueError(f"max_seq_length must be a positive integer, got {max_seq_length!r}")
    # a window under 32 tokens has fewer buckets (the edges that round to the same token merge)
    return sorted({0, max_seq_length // 32, max_seq_length // 8, max_seq_length // 2, max_seq_length})


def _split(sentence: str) -> tuple[str, int]:
    doc_id, _, index = sentence.rpartition("#")
    return doc_id, int(index)


def _evidence_sentences(query: ContextQuery) -> list[str]:
    return [s for group in query.evidence for alternative in group for s in alternative]
