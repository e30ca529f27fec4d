"""The transformers side of contextembed: config, model and processor for late chunking.

Config, model (with its windows and scheduler, `windowing_contextembed`) and processor (with its input checks,
`inputs_contextembed`, and the package's closed sets, `choices_contextembed`) import only torch, transformers and
each other, so they can also be placed next to the weights of a Hub repository. They are installed as
``contextembed.modeling``; this module is their one public face, and the library imports nothing from the files
behind it.

Importing it is light: the closed sets and the input checks come at once, and torch and transformers are imported
only when a name that needs them (the config, the model, the processor, the pooling) is first used.
"""

from importlib import import_module

from .choices_contextembed import (
    DEFAULT_CHUNK_TOKEN,
    EMPTY_CHUNK_MODES,
    HEAD_ACTIVATIONS,
    INPUT_LAYOUTS,
    INT8_SCHEMES,
    LONG_DOCUMENT_MODES,
    PRECISIONS,
    TASKS,
    EmptyChunks,
    Int8Scheme,
    LongDocuments,
    Precision,
    Task,
    is_integer,
)
from .inputs_contextembed import check_count, check_text, normalize_documents, normalize_titles

# name -> the file that defines it, imported on first use (each imports torch or transformers)
_LAZY = {
    **dict.fromkeys(["ContextEmbedConfig"], ".configuration_contextembed"),
    **dict.fromkeys(["MAX_INDEX_ELEMENTS", "ContextEmbedModel", "ContextEmbedOutput", "ContextEmbedPreTrainedModel",
                     "check_output_dim", "chunk_means", "chunk_sums_and_counts", "cut_and_normalize", "index_slices",
                     "late_chunk_head", "late_chunk_mean", "loading_problems", "packed_call", "pad_token_id",
                     "window_length"],
                    ".modeling_contextembed"),
    **dict.fromkeys(["WINDOWS_PER_CALL", "document_windows", "late_chunk_sums", "plan_windows", "token_budget_batches",
                     "window_cost"], ".windowing_contextembed"),
    **dict.fromkeys(["ContextEmbedProcessor"], ".processing_contextembed"),
}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name], __name__), name)
        globals()[name] = value  # once: later lookups do not come here
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "DEFAULT_CHUNK_TOKEN",
    "EMPTY_CHUNK_MODES",
    "HEAD_ACTIVATIONS",
    "INPUT_LAYOUTS",
    "INT8_SCHEMES",
    "LONG_DOCUMENT_MODES",
    "PRECISIONS",
    "TASKS",
    "EmptyChunks",
    "Int8Scheme",
    "LongDocuments",
    "Precision",
    "Task",
    "check_count",
    "check_text",
    "is_integer",
    "normalize_documents",
    "normalize_titles",
    *_LAZY,
]
