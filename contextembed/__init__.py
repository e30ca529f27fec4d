"""contextembed: contextual chunk embeddings (late chunking) that load with `trust_remote_code=False`.

Importing the package registers the model, its config and its processor with transformers' Auto
classes (idempotent); that is its only side effect.
"""

from __future__ import annotations

import os

from transformers import AutoConfig, AutoModel, AutoProcessor

from contextembed.modeling import ContextEmbedConfig, ContextEmbedModel, ContextEmbedProcessor

AutoConfig.register(ContextEmbedConfig.model_type, ContextEmbedConfig, exist_ok=True)
AutoModel.register(ContextEmbedConfig, ContextEmbedModel, exist_ok=True)
AutoProcessor.register(ContextEmbedConfig, ContextEmbedProcessor, exist_ok=True)

from contextembed.build import build_checkpoint  # noqa: E402
from contextembed.checkpoint import save_checkpoint  # noqa: E402
from contextembed.chunking import Chunk, TokenWindows, chunk_text  # noqa: E402
from contextembed.encoder import ChunkedEmbeddings, ContextEmbedder  # noqa: E402
from contextembed.quantization import PRECISIONS, quantize  # noqa: E402
from contextembed.retrieval import ChunkHit, DocumentHit, SearchResult, exact_search, maxsim, top_k  # noqa: E402

__version__ = "0.1.0"

# Imported on first use: sentence-transformers (and the sklearn and scipy it pulls in) costs seconds at import.
_LAZY = {"ContextEmbedSentenceTransformer": "contextembed.st", "as_chunked": "contextembed.st"}


def __getattr__(name: str):
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'contextembed' has no attribute {name!r}")


def load(model: str | ContextEmbedder | None = None, **kwargs) -> ContextEmbedder:
    """Load a checkpoint (local directory or Hub id); with no argument (or `""`), the default model (MiniLM trained
    for contextual chunk embeddings). A `ContextEmbedder` that is already loaded is returned as it is, so every
    integration and command takes "a model" the same way: loaded, or by name.

    `"contextembed-all-MiniLM-L6-v2-untrained"` names its untrained baseline (see its card); a folder of
    Perplexity's pplx-embed-context-v1 is converted on load. Keyword arguments go to
    `ContextEmbedder.from_pretrained` (`device`, `dtype`, `revision`, `token`, `cache_dir`, `local_files_only`,
    `attn_implementation`, and `backend="onnx"|"openvino"` with `file_name` for a graph `contextembed export`
    wrote and `num_threads` for its runtime).
    """
    if isinstance(model, ContextEmbedder):
        if kwargs:
            raise ValueError(f"a loaded model takes no loading options, got {sorted(kwargs)}")
        return model
    if model is not None and not isinstance(model, (str, os.PathLike)):
        raise ValueError(f"model must be a checkpoint path, a Hub id or a loaded ContextEmbedder, got "
                         f"{type(model).__name__}")
    from contextembed.default_model import DEFAULT_MODEL_NAME, named_model_path

    model = os.fspath(model) if model else DEFAULT_MODEL_NAME
    return ContextEmbedder.from_pretrained(named_model_path(model) or model, **kwargs)


__all__ = [
    "PRECISIONS",
    "Chunk",
    "ChunkHit",
    "ChunkedEmbeddings",
    "ContextEmbedder",
    "DocumentHit",
    "SearchResult",
    "TokenWindows",
    "chunk_text",
    "exact_search",
    "load",
    "maxsim",
    "quantize",
    "top_k",
    "ContextEmbedConfig",
    "ContextEmbedModel",
    "ContextEmbedProcessor",
    "ContextEmbedSentenceTransformer",
    "as_chunked",
    "build_checkpoint",
    "save_checkpoint",
]
