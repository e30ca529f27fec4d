"""The transformers side of contextembed: config, model and processor for late chunking.

Config, model (with its windows and scheduler, `windowing_contextembed`) and processor (with its input checks,
`inputs_contextembed`) import only
torch, transformers and each other, so they can also be placed next to the weights of a Hub repository. They are
installed as ``contextembed.modeling``; this module is their one public face, and the library imports nothing
from the files behind it.
"""

from .configuration_contextembed import (
    DEFAULT_CHUNK_TOKEN,
    HEAD_ACTIVATIONS,
    INT8_SCHEMES,
    PRECISIONS,
    ContextEmbedConfig,
    Int8Scheme,
    Precision,
    is_integer,
)
from .modeling_contextembed import (
    MAX_INDEX_ELEMENTS,
    ContextEmbedModel,
    ContextEmbedOutput,
    ContextEmbedPreTrainedModel,
    check_output_dim,
    chunk_means,
    chunk_sums_and_counts,
    cut_and_normalize,
    index_slices,
    late_chunk_head,
    late_chunk_mean,
    loading_problems,
    pad_token_id,
    window_length,
)
from .windowing_contextembed import (
    WINDOWS_PER_CALL,
    document_windows,
    late_chunk_sums,
    plan_windows,
    token_budget_batches,
    window_cost,
)
from .inputs_contextembed import check_count, check_text, normalize_documents, normalize_titles
from .processing_contextembed import ContextEmbedProcessor, EmptyChunks, LongDocuments, Task

__all__ = [
    "DEFAULT_CHUNK_TOKEN",
    "HEAD_ACTIVATIONS",
    "INT8_SCHEMES",
    "MAX_INDEX_ELEMENTS",
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
    "index_slices",
    "is_integer",
    "late_chunk_head",
    "late_chunk_mean",
    "late_chunk_sums",
    "loading_problems",
    "normalize_documents",
    "normalize_titles",
    "pad_token_id",
    "plan_windows",
    "token_budget_batches",
    "window_cost",
    "window_length",
    "WINDOWS_PER_CALL",
]
