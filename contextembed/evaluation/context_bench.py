"""context-bench metrics (Document@K, Answer@K, Evidence Recall@K, All-Evidence@K) and their runner.

Definitions (SPEC.md §3), over an exhaustive ranking of every chunk (sentence) of the corpus:

- documents are ranked by their best chunk; d* is the best-ranked of the query's target documents;
- **Document@K** = 1[rank(d*) <= K];
- **Answer@K** = 1[an accepted answer sentence is among the top K chunks of the whole corpus];
- **Evidence Recall@K**: rank d*'s sentences by similarity, remove the top-ranked accepted answer
  sentence, keep the top K of the rest as R_K; evidence group j is recovered when one of its
  alternatives (a set of one or more sentences) lies wholly inside R_K;
  EvidenceRecall@K = 1[rank(d*) <= 10] * (recovered groups / groups);
- **All-Evidence@K** = 1[rank(d*) <= 10] * 1[every group recovered];
- **Copy@1**, for a query whose answer sentence also occurs, word for word, elsewhere in the corpus (as in a family
  of near-identical copies): for each accepted answer's text that some other sentence repeats, 1[an accepted answer
  ranks first among the sentences with that text]; the query's Copy@1 is the mean over those texts (one text for a
  one-sentence answer; each shared line of an ingredient list).
  Only context can tell such copies apart, so this is late chunking's own share of Answer@1, apart from how well the
  backbone matches the query's words; a sentence embedded alone ties with its copies and scores what the tie rule
  gives (the copy in the document with the lowest id wins), chance for a family whose copies are asked about
  equally.
- **where Answer@1 misses**, for every query, from the sentence that ranks first when no accepted answer does (the
  best-ranked non-answer): **WrongSentence@1** = 1 when it is another sentence of a target document (the document
  was found, the sentence in it was not: a neighbour's words, or its evidence, matched better); **WrongCopy@1** = 1
  when it is, word for word, an accepted answer's text in a document that is not a target (the sentence was found,
  in the wrong copy: the context failed); **WrongDocument@1** = 1 otherwise. Answer@1 + WrongSentence@1 + WrongCopy@1 +
  WrongDocument@1 = 1 for every query, so the means say what share of the misses each cause takes. Within them,
  **EvidenceFirst@1** = 1 when that sentence is one of the query's evidence sentences (the supporting context ranked
  above the answer, such as the sentence that names the copy; 0 for a query without evidence).

Where a query accepts several answer sentences (every line of an ingredient list), all but the top one stay in the
ranking, so an embedding that ranks every answer above the rest of d* leaves only K - (answers - 1) places for the
evidence. `answers_first_ceiling` is the most such an embedding can reach (`EvidenceRecallCeiling@K`,
`AllEvidenceCeiling@K`, recorded beside the metrics): a property of the queries, not of the model, and the reason a
model that finds the answers can score below one that ranks the title first.

Queries without evidence groups are left out of the two evidence means (their number is reported);
they still count for Document@K and Answer@K.

Ties follow the one rule of `contextembed.retrieval`: equal scores rank the lower document id first, then the lower
sentence index. Scores are compared exactly, and float noise never makes or breaks a tie: a text is embedded once
however often it occurs (a sentence embedded alone, and its word-for-word copies, share one vector; the same batch
of another size would otherwise move each copy by ~1e-7), and `scoring.dot`'s scores depend on the two vectors
alone. Each query records `tied`: whether a tie decided its Document@1 or Answer@1, so the report says how many
figures rest on the rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from contextembed.corpus import encode_once
from contextembed.ranking import document_maxima, first_of, rank_of_first, ranking, rows_in_id_order
from contextembed.scoring import dot

EVIDENCE_GATE = 10
MODES = ("contextual", "independent", "whole-document")


@dataclass
class ContextDocument:
    id: str
    sentences: list[str]


@dataclass
class ContextQuery:
    id: str
    query: str
    targets: list[str]  # document ids
    answers: list[str]  # accepted answer sentences, as "docid#index"
    evidence: list[list[list[str]]] = field(default_factory=list)  # groups -> alternatives -> sentence ids
    capability: str | None = None


def sentence_id(doc_id: str, index: int) -> str:
    """The id of a document's sentence.

    >>> sentence_id("lease-3", 4)
    'lease-3#4'
    """
    return f"{doc_id}#{index}"


def copy_groups(texts: Sequence[str]) -> np.ndarray:
    """A group per row: rows with exactly the same text share one (the index of its first occurrence).

    >>> copy_groups(["a", "b", "a", "c", "b"]).tolist()
    [0, 1, 0, 3, 1]
    """
    first: dict[str, int] = {}
    return np.array([first.setdefault(text, i) for i, text in enumerate(texts)], dtype=np.int64)


def evidence_at_k(
    sentence_order: Sequence[str],
    answers: Sequence[str],
    groups: Sequence[Sequence[Sequence[str]]],
    k: int,
    doc_rank: int | None,
    gate: int = EVIDENCE_GATE,
) -> tuple[float, float]:
    """(Evidence Recall@k, All-Evidence@k) of one query with at least one evidence group.

    `sentence_order` is d*'s sentences ranked by similarity. The top-ranked accepted answer is removed,
    then a group counts as recovered when one of its alternatives lies wholly in the next k sentences.

    >>> order = ["d#2", "d#0", "d#5", "d#6", "d#1"]          # d#2 is the answer
    >>> groups = [[["d#0"]], [["d#5", "d#1"], ["d#6"]], [["d#9"]]]
    >>> evidence_at_k(order, ["d#2"], groups, k=2, doc_rank=1)
    (0.3333333333333333, 0.0)
    >>> evidence_at_k(order, ["d#2"], groups, k=3, doc_rank=1)
    (0.6666666666666666, 0.0)
    >>> evidence_at_k(order, ["d#2"], groups, k=3, doc_rank=11)   # d* outside the top 10: gated to zero
    (0.0, 0.0)
    """
    if not groups:
        raise ValueError("evidence_at_k needs at least one evidence group")
    answers = set(answers)
    top_answer = next((s for s in sentence_order if s in answers), None)
    remaining = [s for s in sentence_order if s != top_answer]
    window = set(remaining[:k])
    recovered = [any(set(alternative) <= window for alternative in group) for group in groups]
    gated = doc_rank is not None and doc_rank <= gate
    return (float(gated) * sum(recovered) / len(recovered), float(gated and all(recovered)))


def answers_first_ceiling(answers: Sequence[str], groups: Sequence[Sequence[Sequence[str]]], k: int
                          ) -> tuple[float, float]:
    """The most (Evidence Recall@k, All-Evidence@k) that a ranking of d*'s sentences with every accepted answer
    above every other sentence can reach (d* found in the top 10).

    The top answer is removed, the other answers fill the first places of the window, and the evidence gets what
    is left: the groups recovered are the most whose chosen alternatives' non-answer sentences, together, fit in
    those places (one sentence may serve several groups; searched exhaustively, as queries have a few groups). An
    upper bound, exact when no alternative holds an answer sentence.

    >>> groups = [[["d#0"]], [["d#1"]]]                      # a title and a heading
    >>> answers_first_ceiling(["d#2", "d#3"], groups, k=10)  # one answer left: 9 places for 2 groups
    (1.0, 1.0)
    >>> answers_first_ceiling([f"d#{i}" for i in range(2, 12)], groups, k=10)  # 9 answers left: 1 place
    (0.5, 0.0)
    >>> answers_first_ceiling([f"d#{i}" for i in range(2, 14)], groups, k=10)  # 11 answers left: none
    (0.0, 0.0)
    """
    if not groups:
        raise ValueError("answers_first_ceiling needs at least one evidence group")
    answers = set(answers)
    places = max(k - max(len(answers) - 1, 0), 0)
    options = [{frozenset(s for s in alternative if s not in answers) for alternative in group} for group in groups]

    def most(index: int, chosen: frozenset) -> int:
        if index == len(options):
            return 0
        best = most(index + 1, chosen)  # this group left out
        for alternative in options[index]:
            union = chosen | alternative
            if len(union) <= places:
                best = max(best, 1 + most(index + 1, union))
        return best

    recovered = most(0, frozenset())
    return recovered / len(groups), float(recovered == len(groups))


def per_query_metrics(
    query_vectors: np.ndarray,
    vectors: np.ndarray,
    row_doc: np.ndarray,
    row_ids: Sequence[str],
    doc_names: Sequence[str],
    queries: Sequence[ContextQuery],
    ks: Sequence[int],
    sentence_level: bool = True,
    block_size: int | None = None,
    precision: str = "float32",
    row_copies: np.ndarray | None = None,
) -> list[dict[str, float]]:
    """context-bench metrics of every query of one embedding run.

    Args:
        query_vectors: (Q, D) query vectors (or int8 codes, with int8 `vectors`).
        vectors: (N, D) one row per sentence (`sentence_level`) or per document.
        row_doc: (N,) document index of each row, non-decreasing.
        row_ids: sentence id of each row ("docid#i"); ignored when not `sentence_level`.
        doc_names: document id of each document index (in any order: rows are put in the tie rule's order, by
            document id, first).
        queries: the annotated queries, in the order of `query_vectors`.
        ks: the K values to report.
        sentence_level: False for one vector per document (only Document@K is defined).
        precision: `float32`, or `int8` when both are int8 codes (scored exactly in integers).
        row_copies: (N,) `copy_groups` of the rows' texts, to score Copy@1; None leaves it out.

    Returns:
        One dict per query; evidence metrics only for queries with evidence groups, Copy@1 only for queries with an
        answer text that a row other than an accepted answer repeats.
    """
    vectors, row_doc, row_ids, doc_names, row_copies = _by_document_id(vectors, row_doc, row_ids, doc_names,
                                                                       row_copies, sentence_level)
    starts = np.searchsorted(row_doc, np.arange(len(doc_names) + 1))
    name_to_index = {name: i for i, name in enumerate(doc_names)}
    row_index = {row_id: i for i, row_id in enumerate(row_ids)} if sentence_level else {}
    block = max(1, (block_size or 1 << 24) // max(len(vectors), 1))
    records = []
    for first in range(0, len(queries), block):
        scores = dot(query_vectors[first : first + block], vectors, precision).astype(np.float64)  # (q, N)
        doc_scores = document_maxima(scores, starts[:-1])  # (q, docs): MaxSim
        for offset, query in enumerate(queries[first : first + block]):
            records.append(_query_metrics(query, scores[offset], doc_scores[offset], name_to_index, row_index,
                                          row_ids, starts, ks, sentence_level, row_copies if sentence_level else None))
    return records


def _by_document_id(vectors, row_doc, row_ids, doc_names, row_copies, sentence_level: bool):
    """The rows reordered so that positions follow the tie rule (`rows_in_id_order`)."""
    if list(doc_names) == sorted(doc_names):
        return vectors, np.asarray(row_doc), row_ids, list(doc_names), row_copies
    rows, new_doc = rows_in_id_order(row_doc, doc_names)
    return (vectors[rows], new_doc, [row_ids[r] for r in rows] if sentence_level else row_ids, sorted(doc_names),
            None if row_copies is None else np.asarray(row_copies)[rows])


def _query_metrics(query: ContextQuery, scores, doc_scores, name_to_index, row_index, row_ids, starts, ks,
                   sentence_level: bool, row_copies: np.ndarray | None) -> dict[str, float]:
    is_target = np.zeros(len(doc_scores), dtype=bool)
    is_target[[name_to_index[t] for t in query.targets if t in name_to_index]] = True
    rank, doc_tied = rank_of_first(doc_scores, is_target)
    record: dict[str, float] = {f"Document@{k}": float(rank is not None and rank <= k) for k in ks}
    if not sentence_level:
        record["tied"] = float(doc_tied)
        return record
    is_answer = np.zeros(len(scores), dtype=bool)
    is_answer[[row_index[a] for a in query.answers if a in row_index]] = True
    answer_rank, answer_tied = rank_of_first(scores, is_answer)
    for k in ks:
        record[f"Answer@{k}"] = float(answer_rank is not None and answer_rank <= k)
    record["tied"] = float(doc_tied or answer_tied)
    if row_copies is not None:
        wins = []
        for text in np.unique(row_copies[is_answer]):
            copies = row_copies == text  # the rows with this accepted answer's exact text
            if (copies & ~is_answer).any():
                copy_rank, _ = rank_of_first(scores[copies], is_answer[copies])
                wins.append(float(copy_rank == 1))
        if wins:
            record["Copy@1"] = sum(wins) / len(wins)
        is_evidence = np.zeros(len(scores), dtype=bool)
        is_evidence[[row_index[i] for group in query.evidence for alternative in group for i in alternative
                     if i in row_index]] = True
        record.update(miss_causes(scores, is_answer, answer_rank == 1, row_copies, starts, is_target, is_evidence))
    if query.evidence:
        d_star = first_of(doc_scores, is_target)  # the loaders check that every target exists
        rows = np.arange(starts[d_star], starts[d_star + 1])
        sentence_order = [row_ids[rows[i]] for i in ranking(scores[rows])]
        for k in ks:
            recall, complete = evidence_at_k(sentence_order, query.answers, query.evidence, k, rank)
            record[f"EvidenceRecall@{k}"], record[f"AllEvidence@{k}"] = recall, complete
        own = [a for a in query.answers if a in row_index and starts[d_star] <= row_index[a] < starts[d_star + 1]]
        for k in ks:
            ceiling = answers_first_ceiling(own, query.evidence, k)
            record[f"EvidenceRecallCeiling@{k}"], record[f"AllEvidenceCeiling@{k}"] = ceiling
    return record


def miss_causes(scores: np.ndarray, is_answer: np.ndarray, hit: bool, row_copies: np.ndarray, starts: np.ndarray,
                is_target: np.ndarray, is_evidence: np.ndarray | None = None) -> dict[str, float]:
    """Where one query's Answer@1 went (module docstring): `WrongSentence@1`, `WrongCopy@1`, `WrongDocument@1`, all 0
    when `hit`, else 1 for the cause of the best-ranked non-answer row; `EvidenceFirst@1` 1 when that row is one of
    `is_evidence`.

    Rows 0-1 are document 0 (the target), rows 2-3 document 1; row 2 repeats the answer's text (row 0):

    >>> starts, target, copies = np.array([0, 2, 4]), np.array([True, False]), np.array([0, 1, 0, 3])
    >>> answer = np.array([True, False, False, False])
    >>> miss_causes(np.array([0.5, 0.9, 0.1, 0.2]), answer, False, copies, starts, target)
    {'WrongSentence@1': 1.0, 'WrongCopy@1': 0.0, 'WrongDocument@1': 0.0, 'EvidenceFirst@1': 0.0}
    >>> evidence = np.array([False, True, False, False])  # row 1 is the query's evidence (the copy's name, say)
    >>> miss_causes(np.array([0.5, 0.9, 0.1, 0.2]), answer, False, copies, starts, target, evidence)
    {'WrongSentence@1': 1.0, 'WrongCopy@1': 0.0, 'WrongDocument@1': 0.0, 'EvidenceFirst@1': 1.0}
    >>> miss_causes(np.array([0.5, 0.1, 0.9, 0.2]), answer, False, copies, starts, target)["WrongCopy@1"]
    1.0
    >>> miss_causes(np.array([0.5, 0.1, 0.2, 0.9]), answer, False, copies, starts, target)["WrongDocument@1"]
    1.0
    """
    causes = dict.fromkeys(("WrongSentence@1", "WrongCopy@1", "WrongDocument@1", "EvidenceFirst@1"), 0.0)
    first = None if hit else first_of(scores, ~is_answer)
    if first is None:  # a hit, or a corpus with nothing but answers
        return causes
    causes["EvidenceFirst@1"] = float(is_evidence is not None and bool(is_evidence[first]))
    document = int(np.searchsorted(starts, first, side="right")) - 1
    if is_target[document]:
        causes["WrongSentence@1"] = 1.0
    elif row_copies[first] in set(row_copies[is_answer].tolist()):
        causes["WrongCopy@1"] = 1.0
    else:
        causes["WrongDocument@1"] = 1.0
    return causes


def aggregate(records: Sequence[dict[str, float]]) -> dict[str, float]:
    """Mean of each metric over the queries that have it, with the query counts.

    >>> aggregate([{"Document@1": 1.0, "EvidenceRecall@10": 0.5}, {"Document@1": 0.0}])
    {'Document@1': 0.5, 'EvidenceRecall@10': 0.5, 'queries': 2, 'evidence_queries': 1}
    >>> aggregate([{"Answer@1": 0.0, "Copy@1": 1.0}, {"Answer@1": 1.0}])["copy_queries"]
    1
    """
    names = list(dict.fromkeys(name for record in records for name in record))
    means: dict[str, float] = {}
    for name in names:
        values = [record[name] for record in records if name in record]
        means[name] = sum(values) / len(values)
    means["queries"] = len(records)
    means["evidence_queries"] = sum(any(n.startswith("Evidence") for n in r) for r in records)
    if "Copy@1" in means:
        means["copy_queries"] = sum("Copy@1" in r for r in records)
    return means


def breakdown(records: Sequence[dict[str, float]], labels: Sequence[str | None],
              order: Sequence[str] | None = None) -> dict[str, dict[str, float]]:
    """`aggregate` of the queries of each label (a query's label is `labels[i]`; `None` leaves it out): every label
    of `order` in that order (one no query has as `{"queries": 0, ...}`), else the labels present, sorted.

    >>> by_label = breakdown([{"Answer@1": 1.0}, {"Answer@1": 0.0}, {"Answer@1": 1.0}], ["near", "far", None],
    ...                      order=["near", "far", "beyond"])
    >>> {label: (values.get("Answer@1"), values["queries"]) for label, values in by_label.items()}
    {'near': (1.0, 1), 'far': (0.0, 1), 'beyond': (None, 0)}
    """
    if len(labels) != len(records):
        raise ValueError(f"labels must have one entry per query ({len(records)}), got {len(labels)}")
    present = {label for label in labels if label is not None}
    unknown = present - set(order) if order is not None else set()
    if unknown:
        raise ValueError(f"labels must be among {list(order)}, got {sorted(unknown)}")
    return {label: aggregate([r for r, own in zip(records, labels) if own == label])
            for label in (order if order is not None else sorted(present))}


def run_context_bench(
    model,
    documents: Sequence[ContextDocument],
    queries: Sequence[ContextQuery],
    *,
    ks: Sequence[int] = (1, 10),
    modes: Sequence[str] = MODES,
    batch_size: int = 32,
    show_progress_bar: bool | None = None,
    precision: str = "float32",
    titles: Sequence[str] | None = None,
    local_mix: float = 0.0,
    groupings: Mapping[str, tuple[Sequence[str | None], Sequence[str]]] | None = None,
) -> dict[str, dict[str, float]]:
    """Embed the corpus three ways and score the queries (in `precision`: `float32` or the checkpoint's `int8`),
    with Copy@1 wherever an answer sentence has word-for-word copies in other documents.

    - `contextual`: each document's sentences embedded with late chunking (one pass per document; with `titles`,
      each document's title is context in every window, as `encode_documents(..., titles=...)` takes it; with
      `local_mix`, each sentence's vector mixed with it encoded alone, as `encode_documents(..., local_mix=...)`);
    - `independent`: each sentence embedded alone (the answer/evidence baseline);
    - `whole-document`: one vector per document (the Document@K baseline).

    Returns `{mode: {metric: value}}`, plus a `by_capability` entry per mode when queries carry one, and for each
    `{name: (labels, order)}` of `groupings` (a label per query, as `breakdown` takes them) a `name` entry per mode.
    """
    for mode in modes:
        if mode not in MODES:
            raise ValueError(f"modes must be among {MODES}, got {mode!r}")
    for name, (labels, _) in (groupings or {}).items():  # checked before the corpus is embedded
        if len(labels) != len(queries):
            raise ValueError(f"groupings[{name!r}] must have one label per query ({len(queries)}), got {len(labels)}")
    doc_names = [d.id for d in documents]
    row_doc = np.repeat(np.arange(len(documents)), [len(d.sentences) for d in documents])
    row_ids = [sentence_id(d.id, i) for d in documents for i in range(len(d.sentences))]
    row_copies = copy_groups([s for d in documents for s in d.sentences])
    if precision not in ("float32", "int8"):
        raise ValueError(f"precision must be 'float32' or 'int8', got {precision!r}")
    options = {"batch_size": batch_size, "show_progress_bar": show_progress_bar, "precision": precision}
    query_vectors = model.encode_queries([q.query for q in queries], **options)

    results: dict[str, dict[str, float]] = {}
    for mode in modes:
        if mode == "contextual":
            mixed = {"local_mix": local_mix} if local_mix else {}
            vectors = encode_once(model, [d.sentences for d in documents], titles, **options, **mixed)
        elif mode == "independent":
            vectors = encode_once(model, [[s] for d in documents for s in d.sentences], **options)
        else:
            vectors = encode_once(model, [[" ".join(d.sentences)] for d in documents], **options)
        sentence_level = mode != "whole-document"
        rows = row_doc if sentence_level else np.arange(len(documents))
        records = per_query_metrics(query_vectors, vectors, rows, row_ids, doc_names, queries, ks,
                                    sentence_level=sentence_level, precision=precision, row_copies=row_copies)
        results[mode] = aggregate(records)
        capabilities = sorted({q.capability for q in queries if q.capability})
        if capabilities:
            results[mode]["by_capability"] = {
                cap: aggregate([r for r, q in zip(records, queries) if q.capability == cap]) for cap in capabilities
            }
        for name, (labels, order) in (groupings or {}).items():
            results[mode][name] = breakdown(records, labels, order)
    return results
