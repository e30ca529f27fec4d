"""Loaders for the three evaluation layouts; every bad record is reported with its file and line.

**context-bench style** (our format; a folder with two JSON-lines files):

- `documents.jsonl`: `{"id": str, "sentences": [str, ...]}` — a document as its ordered sentences (its chunks);
- `queries.jsonl`: `{"id": str, "query": str, "targets": [doc id, ...], "answers": [sentence id, ...],
  "evidence": [[[sentence id, ...], ...], ...], "capability": str (optional)}`. A sentence id is
  `"<doc id>#<index>"`. `evidence` is a list of groups; a group is a list of alternatives; an alternative is
  a list of sentence ids that must all be retrieved. `answers` and `evidence` may be empty.

**ConTEB** (the `illuin-conteb` layout; a folder per task with `documents` and `queries`, as `.jsonl` or
`.parquet`): documents rows `{"chunk_id": "<docid>_<chunkindex>", "chunk": str}`; queries rows
`{"query": str, "chunk_id": str}` or `{"query": str, "chunk_ids": [str, ...]}`. Chunks are ordered by their
integer index within each document.

**BEIR** (a folder): `corpus.jsonl` (`_id`, `text`, optional `title`), `queries.jsonl` (`_id`, `text`) and
one or more qrels files `qrels/<name>.tsv` (`query-id  corpus-id  score`, with a header line). Each qrels file
is one relevance set.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from contextembed import jsonl
from contextembed.evaluation.context_bench import ContextDocument, ContextQuery


def _records(path: Path):
    """(line number, dict) for each non-empty line of a JSON-lines file, or each row of a parquet file."""
    if not path.is_file():
        raise ValueError(f"missing file {str(path)!r}")
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as error:
            raise ImportError(f"reading {path.name} needs pyarrow: pip install pyarrow") from error
        for i, row in enumerate(pq.read_table(path).to_pylist(), 1):
            yield i, row
        return
    yield from jsonl.read_records(path)


def load_context_bench(folder: str | Path) -> tuple[list[ContextDocument], list[ContextQuery]]:
    """Read and cross-check a context-bench style folder (`documents.jsonl`, `queries.jsonl`)."""
    folder = Path(folder)
    documents, sentence_counts = [], {}
    for line, record in _records(folder / "documents.jsonl"):
        where = f"{folder / 'documents.jsonl'}:{line}"
        doc_id = jsonl.field(record, "id", str, where)
        sentences = jsonl.field(record, "sentences", list, where)
        if not sentences or not all(isinstance(s, str) for s in sentences):
            raise ValueError(f"{where}: 'sentences' must be a non-empty list of strings")
        if doc_id in sentence_counts:
            raise ValueError(f"{where}: duplicate document id {doc_id!r}")
        sentence_counts[doc_id] = len(sentences)
        documents.append(ContextDocument(doc_id, sentences))
    if not documents:
        raise ValueError(f"{folder / 'documents.jsonl'}: no documents")

    def check_sentence(sentence: str, where: str) -> None:
        doc_id, sep, index = sentence.rpartition("#")
        if not sep or not index.isdigit() or doc_id not in sentence_counts:
            raise ValueError(f"{where}: {sentence!r} is not a sentence id '<doc id>#<index>' of a known document")
        if int(index) >= sentence_counts[doc_id]:
            raise ValueError(f"{where}: {sentence!r}: document {doc_id!r} has {sentence_counts[doc_id]} sentences")

    queries, seen = [], set()
    for line, record in _records(folder / "queries.jsonl"):
        where = f"{folder / 'queries.jsonl'}:{line}"
        query_id = jsonl.field(record, "id", str, where)
        if query_id in seen:
            raise ValueError(f"{where}: duplicate query id {query_id!r}")
        seen.add(query_id)
        text = jsonl.field(record, "query", str, where)
        targets = jsonl.field(record, "targets", list, where)
        if not targets or any(t not in sentence_counts for t in targets):
            raise ValueError(f"{where}: 'targets' must list known document ids, got {targets!r}")
        answers = record.get("answers", [])
        evidence = record.get("evidence", [])
        if not isinstance(answers, list) or not isinstance(evidence, list):
            raise ValueError(f"{where}: 'answers' and 'evidence' must be lists")
        for answer in answers:
            check_sentence(answer, where)
        for group in evidence:
            if not isinstance(group, list) or not group:
                raise ValueError(f"{where}: each evidence group must be a non-empty list of alternatives")
            for alternative in group:
                if not isinstance(alternative, list) or not alternative:
                    raise ValueError(f"{where}: each alternative must be a non-empty list of sentence ids")
                for sentence in alternative:
                    check_sentence(sentence, where)
        capability = record.get("capability")
        queries.append(ContextQuery(query_id, text, targets, answers, evidence, capability))
    if not queries:
        raise ValueError(f"{folder / 'queries.jsonl'}: no queries")
    return documents, queries


@dataclass
class ChunkTask:
    """A ConTEB-style task: documents as ordered chunk lists, queries with gold chunk ids."""

    name: str
    doc_ids: list[str]
    documents: list[list[str]]
    chunk_ids: list[list[str]]
    queries: list[str]
    gold: list[list[str]]


def _find(folder: Path, stem: str) -> Path:
    for suffix in (".jsonl", ".parquet"):
        if (folder / f"{stem}{suffix}").is_file():
            return folder / f"{stem}{suffix}"
    raise ValueError(f"{str(folder)!r} has no {stem}.jsonl or {stem}.parquet")


def load_conteb_task(folder: str | Path) -> ChunkTask:
    """One ConTEB task folder (`documents` and `queries`, JSON lines or parquet)."""
    folder = Path(folder)
    path = _find(folder, "documents")
    chunks: dict[str, list[tuple[int, str, str]]] = {}
    known = set()
    for line, record in _records(path):
        where = f"{path}:{line}"
        chunk_id = jsonl.field(record, "chunk_id", str, where)
        text = jsonl.field(record, "chunk", str, where)
        doc_id, sep, index = chunk_id.rpartition("_")
        if not sep or not doc_id or not index.isdigit():
            raise ValueError(f"{where}: chunk_id must be '<docid>_<chunkindex>', got {chunk_id!r}")
        if chunk_id in known:
            raise ValueError(f"{where}: duplicate chunk_id {chunk_id!r}")
        known.add(chunk_id)
        chunks.setdefault(doc_id, []).append((int(index), chunk_id, text))
    doc_ids = sorted(chunks)
    ordered = [sorted(chunks[d]) for d in doc_ids]

    path = _find(folder, "queries")
    queries, gold = [], []
    for line, record in _records(path):
        where = f"{path}:{line}"
        queries.append(jsonl.field(record, "query", str, where))
        if "chunk_ids" in record:
            ids = jsonl.field(record, "chunk_ids", list, where)
        else:
            ids = [jsonl.field(record, "chunk_id", str, where)]
        unknown = [c for c in ids if c not in known]
        if not ids or unknown:
            raise ValueError(f"{where}: gold chunk ids {unknown or ids!r} are not in the documents")
        gold.append(list(ids))
    return ChunkTask(folder.name, doc_ids, [[t for _, _, t in doc] for doc in ordered],
                     [[c for _, c, _ in doc] for doc in ordered], queries, gold)


@dataclass
class BeirDataset:
    corpus: dict[str, str]  # doc id -> text ("title. text" when a title is given)
    queries: dict[str, str]
    qrels: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)  # relevance set -> qrels


def load_beir(folder: str | Path) -> BeirDataset:
    """A BEIR folder; every `qrels/*.tsv` file is one relevance set named after the file."""
    folder = Path(folder)
    corpus = {}
    for line, record in _records(folder / "corpus.jsonl"):
        where = f"{folder / 'corpus.jsonl'}:{line}"
        doc_id = str(jsonl.field(record, "_id", (str, int), where))
        text = jsonl.field(record, "text", str, where)
        title = record.get("title") or ""
        corpus[doc_id] = f"{title}. {text}" if title else text
    queries = {}
    for line, record in _records(folder / "queries.jsonl"):
        where = f"{folder / 'queries.jsonl'}:{line}"
        queries[str(jsonl.field(record, "_id", (str, int), where))] = jsonl.field(record, "text", str, where)
    qrels_files = sorted((folder / "qrels").glob("*.tsv"))
    if not qrels_files:
        raise ValueError(f"{str(folder / 'qrels')!r} has no .tsv relevance files")
    dataset = BeirDataset(corpus, queries)
    for path in qrels_files:
        qrels: dict[str, dict[str, int]] = {}
        with open(path, encoding="utf-8", newline="") as f:
            for line_number, row in enumerate(csv.reader(f, delimiter="\t"), 1):
                if line_number == 1 and row and not row[-1].lstrip("-").isdigit():
                    continue  # header
                if len(row) != 3 or not row[2].lstrip("-").isdigit():
                    raise ValueError(f"{path}:{line_number}: expected 'query-id<TAB>corpus-id<TAB>score'")
                if row[0] not in queries or row[1] not in corpus:
                    raise ValueError(f"{path}:{line_number}: unknown query {row[0]!r} or document {row[1]!r}")
                qrels.setdefault(row[0], {})[row[1]] = int(row[2])
        dataset.qrels[path.stem] = qrels
    return dataset
