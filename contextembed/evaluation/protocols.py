"""ConTEB-style and Q2D-Web-style runners: embed, search exhaustively, score.

- ConTEB: query-to-chunk nDCG@10 per task (every query against every chunk of its task) and the unweighted
  mean over tasks; also document-level nDCG@10 with a document scored by its best chunk.
- Q2D-Web: Recall@1000 and nDCG@10 per relevance set, queries and documents truncated to 512 tokens counted
  with the model's own tokenizer, prefixes and special tokens included. Queries with no positive document
  in a relevance set are left out of that set's means (their number is reported).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from contextembed.chunking import Chunk
from contextembed.evaluation.ir_metrics import evaluate_run
from contextembed.evaluation.loaders import BeirDataset, ChunkTask
from contextembed.retrieval import exact_search

CONTEB_MODES = ("contextual", "independent")


def run_conteb(model, tasks: Sequence[ChunkTask], *, k: int = 10, modes: Sequence[str] = CONTEB_MODES,
               batch_size: int = 32, show_progress_bar: bool | None = None) -> dict:
    """`{mode: {"tasks": {task: {"ndcg@k": ..., "doc_ndcg@k": ...}}, "mean": {...}}}`."""
    for mode in modes:
        if mode not in CONTEB_MODES:
            raise ValueError(f"modes must be among {CONTEB_MODES}, got {mode!r}")
    options = {"batch_size": batch_size, "show_progress_bar": show_progress_bar}
    results: dict = {}
    for mode in modes:
        per_task = {}
        for task in tasks:
            if mode == "contextual":
                vectors = model.encode_documents(task.documents, **options)
            else:
                vectors = model.encode_documents([[c] for doc in task.documents for c in doc], **options)
            vectors = np.concatenate(vectors)
            row_doc = np.repeat(np.arange(len(task.documents)), [len(d) for d in task.documents])
            row_ids = [c for doc in task.chunk_ids for c in doc]
            queries = model.encode_queries(task.queries, **options)
            found = exact_search(queries, vectors, row_doc, top_k_documents=len(task.documents),
                                 top_k_chunks=min(1000, len(vectors)), best_chunks=False)
            chunk_run, doc_run, chunk_qrels, doc_qrels = {}, {}, {}, {}
            for q in range(len(task.queries)):
                qid = str(q)
                chunk_run[qid] = {row_ids[r]: float(s) for r, s in zip(found.chunk_rows[q], found.chunk_scores[q])}
                doc_run[qid] = {task.doc_ids[d]: float(s) for d, s in zip(found.doc_ids[q], found.doc_scores[q])}
                chunk_qrels[qid] = {c: 1 for c in task.gold[q]}
                doc_qrels[qid] = {c.rpartition("_")[0]: 1 for c in task.gold[q]}
            chunk_means, _ = evaluate_run(chunk_qrels, chunk_run, ks=[k], metrics=["ndcg"])
            doc_means, _ = evaluate_run(doc_qrels, doc_run, ks=[k], metrics=["ndcg"])
            per_task[task.name] = {f"ndcg@{k}": chunk_means[f"ndcg@{k}"], f"doc_ndcg@{k}": doc_means[f"ndcg@{k}"],
                                   "queries": len(task.queries), "chunks": len(vectors)}
        names = [f"ndcg@{k}", f"doc_ndcg@{k}"]
        results[mode] = {"tasks": per_task,
                         "mean": {n: float(np.mean([t[n] for t in per_task.values()])) for n in names}}
    return results


def truncate_to_tokens(processor, texts: Sequence[str], max_tokens: int = 512, task: str = "document") -> list[str]:
    """Cut each text so that the whole model input — special tokens and the `task` prefix included — has at
    most `max_tokens` tokens (counted with the model's own tokenizer). Cuts fall between tokens."""
    if task not in ("query", "document"):
        raise ValueError(f"task must be 'query' or 'document', got {task!r}")
    lead, tail = processor.special_tokens_around()
    prefix = processor.query_prefix if task == "query" else processor.document_prefix
    prefix_tokens = processor.tokenize_text([prefix])[0] if prefix else []
    budget = max_tokens - len(lead) - len(tail) - len(prefix_tokens)
    if budget <= 0:
        raise ValueError(f"max_tokens={max_tokens} leaves no room after special tokens and the prefix")
    out = []
    for text, (_, offsets) in zip(texts, processor.tokenize_text(list(texts), return_offsets=True)):
        out.append(text if len(offsets) <= budget else text[: offsets[budget - 1][1]])
    return out


def run_q2d(model, dataset: BeirDataset, *, max_tokens: int = 512, chunker=None, ks_recall: Sequence[int] = (1000,),
            ks_ndcg: Sequence[int] = (10,), batch_size: int = 32, show_progress_bar: bool | None = None,
            store=None, ann: bool = False) -> dict:
    """`{relevance set: {"recall@1000": ..., "ndcg@10": ..., "queries": n, "queries_without_positives": m}}`.

    Documents are one chunk each, or, with a `chunker`, their truncated text split into chunks and scored
    by the best chunk. With a `store` (`contextembed.stores`), the same vectors are also written to it and
    retrieved through it (through its ANN index, built after writing, with `ann=True`): `store recall@1000` and
    `store ndcg@10` beside exact search's, so what an index costs is measured on the same vectors.
    """
    options = {"batch_size": batch_size, "show_progress_bar": show_progress_bar}
    doc_ids = list(dataset.corpus)
    texts = truncate_to_tokens(model.processor, [dataset.corpus[d] for d in doc_ids], max_tokens, "document")
    if chunker is None:
        vectors = model.encode_documents([[t] for t in texts], **options)
        chunks = [[Chunk(t, 0, len(t))] for t in texts]
    else:
        encoded = model.encode_documents(texts, chunker=chunker, **options)
        vectors, chunks = [r.embeddings for r in encoded], [r.chunks for r in encoded]
    row_doc = np.repeat(np.arange(len(doc_ids)), [len(v) for v in vectors])
    vectors = np.concatenate(vectors)
    query_ids = list(dataset.queries)
    query_texts = truncate_to_tokens(model.processor, [dataset.queries[q] for q in query_ids], max_tokens, "query")
    queries = model.encode_queries(query_texts, **options)
    depth = min(max([*ks_recall, *ks_ndcg]), len(doc_ids))
    found = exact_search(queries, vectors, row_doc, top_k_documents=depth, top_k_chunks=1, best_chunks=False)
    runs = {"": {qid: {doc_ids[d]: float(s) for d, s in zip(found.doc_ids[i], found.doc_scores[i])}
                 for i, qid in enumerate(query_ids)}}
    if store is not None:
        runs["store "] = _store_run(store, doc_ids, texts, chunks, vectors, row_doc, queries, query_ids, depth,
                                    str(chunker or ""), ann)
    results = {}
    for name, qrels in dataset.qrels.items():
        positive = {q: g for q, g in qrels.items() if any(v >= 1 for v in g.values())}
        results[name] = {"queries": len(positive), "queries_without_positives": len(set(qrels) - set(positive))}
        for label, run in runs.items():
            recall, _ = evaluate_run(positive, run, ks=list(ks_recall), metrics=["recall"])
            ndcg, _ = evaluate_run(positive, run, ks=list(ks_ndcg), metrics=["ndcg"])
            results[name].update({f"{label}{metric}": value for metric, value in {**recall, **ndcg}.items()})
    return results


def _store_run(store, doc_ids, texts, chunks, vectors, row_doc, queries, query_ids, depth, chunker: str,
               ann: bool) -> dict:
    """Write the documents' vectors to `store` (replacing what it held of them) and retrieve through it."""
    from contextembed.stores import DocumentVectors, StoreInfo, content_hash

    store.ensure(StoreInfo("evaluation", vectors.shape[1], "float32", chunker))
    starts = np.searchsorted(row_doc, np.arange(len(doc_ids) + 1))
    documents = [DocumentVectors(doc_id, list(chunks[d]), vectors[starts[d] : starts[d + 1]], {}, content_hash(text))
                 for d, (doc_id, text) in enumerate(zip(doc_ids, texts))]
    for first in range(0, len(documents), 1024):
        store.replace(documents[first : first + 1024])
    if ann:
        if not hasattr(store, "create_ann_index"):
            raise ValueError(f"{type(store).__name__} has no ANN index to build")
        store.create_ann_index()
        store.exact = False
    return {qid: {h.document: h.score for h in store.search_documents(queries[i], k=depth)}
            for i, qid in enumerate(query_ids)}
