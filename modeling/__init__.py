"""The transformers side of contextembed: config, model and processor for late chunking.

Config, model and processor (with the processor's input checks, `inputs_contextembed`) import only
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
    calls_by_length,
    check_output_dim,
    chunk_means,
    chunk_sums_and_counts,
    cut_and_normalize,
    document_windows,
    index_slices,
    late_chunk_head,
    late_chunk_mean,
    late_chunk_sums,
    loading_problems,
    pad_token_id,
    plan_windows,
    window_length,
)
from .inputs_contextembed import check_count, check_text, normalize_documents
from .processing_contextembed import ContextEmbedProcessor, EmptyChunks, LongDocuments, Task

# Names that moved out of the model package, kept importable from here for one release.
_MOVED = {"token_budget_batches": "contextembed.batching"}


def __getattr__(name: str):
    if name in _MOVED:
        import importlib
        import warnings

        warnings.warn(f"contextembed.modeling.{name} moved to {_MOVED[name]}.{name} (the encoder's batch "
                      "scheduler); import it from there", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    "calls_by_length",
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
    "pad_token_id",
    "plan_windows",
    "window_length",
]
