"""Evaluation: context-bench metrics, IR metrics with trec_eval's conventions, ConTEB and Q2D-Web protocols,
reciprocal rank fusion, RRF subsampling and near-duplicate removal."""

from __future__ import annotations

from contextembed.evaluation.context_bench import (
    ContextDocument,
    ContextQuery,
    aggregate,
    evidence_at_k,
    per_query_metrics,
    run_context_bench,
)
from contextembed.evaluation.fusion import reciprocal_rank_fusion, rrf_subsample
from contextembed.evaluation.ir_metrics import evaluate_run, mrr_at_k, ndcg_at_k, recall_at_k
from contextembed.evaluation.loaders import load_beir, load_context_bench, load_conteb_task
from contextembed.evaluation.protocols import run_conteb, run_q2d, truncate_to_tokens

__all__ = [
    "ContextDocument",
    "ContextQuery",
    "aggregate",
    "evaluate_run",
    "evidence_at_k",
    "load_beir",
    "load_context_bench",
    "load_conteb_task",
    "mrr_at_k",
    "ndcg_at_k",
    "per_query_metrics",
    "recall_at_k",
    "reciprocal_rank_fusion",
    "rrf_subsample",
    "run_context_bench",
    "run_conteb",
    "run_q2d",
    "truncate_to_tokens",
]
