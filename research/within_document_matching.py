"""How often the answer is the best sentence of the asked document, by model: the backbone's own matching, apart from
finding the document.

    python scripts/within_document_matching.py validation/ --model contextembed-all-MiniLM-L6-v2-untrained \\
        --model path/to/another-checkpoint --contextual contextembed-all-MiniLM-L6-v2 --out runs/within.json

For every query of each set, only the sentences of its first target document are ranked (the same tie rule as
`contextembed evaluate`: scores within 1e-5 are equal, the lower index first), and the query counts when an accepted
answer ranks first. `--model` encodes each sentence alone (what a backbone matches by itself); `--contextual` also
encodes each document in one call (late chunking), so its own-words and in-context figures stand side by side. It
asks a narrower question than `WrongSentence@1` (which also needs the document found first) and chooses nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import contextembed  # noqa: E402
from choose_document_mix import EXTRA_SETS, SETS  # noqa: E402
from contextembed.evaluation.context_bench import TIE_TOLERANCE, tie_aware_rank  # noqa: E402
from contextembed.evaluation.loaders import load_context_bench  # noqa: E402


def answer_first_share(queries, vectors: dict[str, np.ndarray], query_vectors: np.ndarray) -> float:
    """Share of queries whose accepted answer ranks first among their first target document's sentences."""
    hits = 0
    for query, q in zip(queries, query_vectors):
        target = query.targets[0]
        scores = vectors[target] @ q
        is_answer = np.zeros(len(scores), dtype=bool)
        for answer in query.answers:
            doc_id, _, index = answer.rpartition("#")
            if doc_id == target:
                is_answer[int(index)] = True
        hits += tie_aware_rank(scores, is_answer, TIE_TOLERANCE)[0] == 1
    return hits / len(queries)


def measure(model, documents, queries, contextual: bool) -> dict[str, float]:
    asked = {q.targets[0] for q in queries}
    asked_documents = [d for d in documents if d.id in asked]
    query_vectors = model.encode_queries([q.query for q in queries], show_progress_bar=False)
    flat = model.encode_documents([[s] for d in asked_documents for s in d.sentences], show_progress_bar=False)
    bounds = np.cumsum([0] + [len(d.sentences) for d in asked_documents])
    alone = {d.id: np.concatenate(flat[a:b]) for d, a, b in zip(asked_documents, bounds[:-1], bounds[1:])}
    figures = {"alone": answer_first_share(queries, alone, query_vectors)}
    if contextual:
        encoded = model.encode_documents([d.sentences for d in asked_documents], show_progress_bar=False)
        in_context = {d.id: v for d, v in zip(asked_documents, encoded)}
        figures["contextual"] = answer_first_share(queries, in_context, query_vectors)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("validation", type=Path, help="folder holding the validation sets")
    parser.add_argument("--model", action="append", default=[], help="a model measured on its sentences alone")
    parser.add_argument("--contextual", action="append", default=[], help="a model measured alone and in context")
    parser.add_argument("--out", type=Path, default=Path("runs/within-document.json"))
    args = parser.parse_args()
    if not args.model and not args.contextual:
        parser.error("name at least one --model or --contextual")
    sets = [s for s in SETS + EXTRA_SETS if (args.validation / s).is_dir()]
    if not sets:
        parser.error(f"{args.validation} holds none of the validation sets {SETS + EXTRA_SETS}")
    runs = [(name, False) for name in args.model] + [(name, True) for name in args.contextual]
    results: dict[str, dict[str, dict[str, float]]] = {}
    for name, contextual in runs:
        model = contextembed.load(name)
        results[name] = {}
        for s in sets:
            documents, queries = load_context_bench(args.validation / s)
            results[name][s] = measure(model, documents, queries, contextual)
            print(name, s, {k: round(v, 3) for k, v in results[name][s].items()}, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
