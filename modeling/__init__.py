"""The transformers side of contextembed: config, model and processor for late chunking.

These three modules import only torch, transformers and each other, so they can also be placed
next to the weights of a Hub repository. They are installed as ``contextembed.modeling``; this
module is their one public face, and the library imports nothing from the files behind it.
"""

from .configuration_contextembed import (
    DEFAULT_CHUNK_TOKEN,
    INT8_SCHEMES,
    PRECISIONS,
    ContextEmbedConfig,
    Int8Scheme,
    Precision,
    is_integer,
)
from .modeling_contextembed import (
    ContextEmbedModel,
    ContextEmbedOutput,
    ContextEmbedPreTrainedModel,
    check_output_dim,
    chunk_means,
    chunk_sums_and_counts,
    cut_and_normalize,
    document_windows,
    late_chunk_head,
    late_chunk_mean,
    late_chunk_sums,
    loading_problems,
    mix_document_mean,
    pad_token_id,
    plan_windows,
    token_budget_batches,
    window_length,
)
from .processing_contextembed import (
    ContextEmbedProcessor,
    EmptyChunks,
    LongDocuments,
    Task,
    check_count,
    check_text,
    normalize_documents,
)

__all__ = [
    "DEFAULT_CHUNK_TOKEN",
    "INT8_SCHEMES",
    "PRECISIONS",
    "ContextEmbedConfig",
    "ContextEmbedModel",
    "ContextEmbedOutput",
    "ContextEmbedPreTrainedModel",
    "ContextEmbedProcessor",
    "EmptyChunks",
    "Int8Scheme",
    "LongDocuments",
    "Precision",
    "Task",
    "check_count",
    "check_output_dim",
    "check_text",
    "chunk_means",
    "chunk_sums_and_counts",
    "cut_and_normalize",
    "document_windows",
    "is_integer",
    "late_chunk_head",
    "late_chunk_mean",
    "late_chunk_sums",
    "loading_problems",
    "mix_document_mean",
    "normalize_documents",
    "pad_token_id",
    "plan_windows",
    "token_budget_batches",
    "window_length",
]
