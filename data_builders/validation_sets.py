"""Turn documents in the training file's format into `contextembed evaluate` sets, one per source, for tuning.

`training_data.py` writes its validation sets with `write_set` (one folder per set under `--validation`); any other
file of training documents becomes sets by source with

    python data_builders/validation_sets.py documents.jsonl sets/
    contextembed evaluate sets/pydocs --model runs/default/one-pass-mix/checkpoint

The shipped evaluation sets are for reporting; choices of a run (weights, data, steps) are to be made on these.
Each validation document becomes a context-bench document of its sentences; each of its queries is a query
whose answers are the sentences overlapping its answer spans and whose evidence groups are its evidence spans
(any sentence overlapping a span recovers that group). Documents of one source share a set, so a query's
negatives are the other validation documents of its source (for families: the look-alike copies).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from contextembed.training.data import read_documents


def overlapping(sentences: list[tuple[int, int]], span: tuple[int, int]) -> list[int]:
    """Indices of the sentences that overlap a character span.

    >>> overlapping([(0, 5), (6, 12), (13, 20)], (4, 7))
    [0, 1]
    """
    return [i for i, (s, e) in enumerate(sentences) if s < span[1] and span[0] < e]


def context_bench_rows(documents) -> tuple[list[dict], list[dict]]:
    """Training documents as one context-bench set: (document rows, query rows). A query's capability is its
    `kind` (e.g. `named/far`), else its document's source."""
    rows, queries = [], []
    for document in documents:
        rows.append({"id": document.id, "sentences": [document.text[s:e] for s, e in document.sentences]})
        ref = lambda i: f"{document.id}#{i}"  # noqa: E731
        for number, query in enumerate(document.queries):
            answers = sorted({i for span in query.answer for i in overlapping(document.sentences, span)})
            if not answers:
                continue
            evidence = [[[ref(i)] for i in overlapping(document.sentences, span)] for span in query.evidence]
            queries.append({"id": f"{document.id}/q{number}", "query": query.text, "targets": [document.id],
                            "answers": [ref(i) for i in answers], "evidence": [g for g in evidence if g],
                            "capability": query.kind or document.source})
    return rows, queries


def write_set(folder: Path, documents) -> Path:
    """One context-bench folder (documents.jsonl, queries.jsonl) holding `documents` and their queries."""
    rows, queries = context_bench_rows(documents)
    folder.mkdir(parents=True, exist_ok=True)
    for name, records in (("documents.jsonl", rows), ("queries.jsonl", queries)):
        with open(folder / name, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in records)
    print(f"{folder}: {len(rows)} documents, {len(queries)} queries")
    return folder


def write_sets(validation: Path, output: Path) -> dict[str, Path]:
    """Write one context-bench folder per source under `output`; returns the folders by source."""
    by_source = defaultdict(list)
    for document in read_documents(validation):
        by_source[document.source].append(document)
    return {source: write_set(output / source, documents) for source, documents in by_source.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("validation", type=Path, help="training documents (JSON lines, the training file's format)")
    parser.add_argument("output", type=Path, help="folder to write one context-bench set per source into")
    args = parser.parse_args()
    write_sets(args.validation, args.output)


if __name__ == "__main__":
    main()
