"""contextembed: contextual chunk embeddings (late chunking) that load with `trust_remote_code=False`.

Importing the package registers the model, its config and its processor with transformers' Auto classes (idempotent;
deferred until transformers itself is imported, see `contextembed.registration`); that is its only side effect. The
public names below are imported on first use, so `import contextembed` and `contextembed --help` stay light.
"""

from __future__ import annotations

import os
from importlib import import_module
from typing import TYPE_CHECKING

from contextembed.registration import register_when_transformers_loads

register_when_transformers_loads()

__version__ = "0.1.0"

# name -> the module that defines it
_PUBLIC = {
    "PRECISIONS": "contextembed.quantization", "quantize": "contextembed.quantization",
    "Chunk": "contextembed.chunking", "TokenChunks": "contextembed.chunking",
    "chunk_text": "contextembed.chunking",
    "ChunkedEmbeddings": "contextembed.encoder", "ContextEmbedder": "contextembed.encoder",
    "maxsim": "contextembed.retrieval", "top_k": "contextembed.ranking", "SearchResult": "contextembed.retrieval",
    "exact_search": "contextembed.retrieval", "ChunkHit": "contextembed.ranking", "DocumentHit": "contextembed.ranking",
    "ContextEmbedConfig": "contextembed.modeling", "ContextEmbedModel": "contextembed.modeling",
    "ContextEmbedProcessor": "contextembed.modeling",
    "ContextEmbedSentenceTransformer": "contextembed.st", "as_chunked": "contextembed.st",
    "build_checkpoint": "contextembed.build", "save_checkpoint": "contextembed.checkpoint",
}

if TYPE_CHECKING:
    from contextembed.encoder import ContextEmbedder


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'contextembed' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])


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
    from contextembed.encoder import ContextEmbedder

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


__all__ = ["load", *_PUBLIC]
