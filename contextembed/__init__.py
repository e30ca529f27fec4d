"""contextembed: contextual chunk embeddings (late chunking) that load with `trust_remote_code=False`.

Importing the package registers the model, its config and its processor with transformers' Auto
classes (idempotent); that is its only side effect.
"""

from __future__ import annotations

from transformers import AutoConfig, AutoModel, AutoProcessor

from contextembed.modeling import ContextEmbedConfig, ContextEmbedModel, ContextEmbedProcessor

AutoConfig.register(ContextEmbedConfig.model_type, ContextEmbedConfig, exist_ok=True)
AutoModel.register(ContextEmbedConfig, ContextEmbedModel, exist_ok=True)
AutoProcessor.register(ContextEmbedConfig, ContextEmbedProcessor, exist_ok=True)

from contextembed.build import build_checkpoint  # noqa: E402
from contextembed.checkpoint import save_checkpoint  # noqa: E402
from contextembed.st import ContextEmbedSentenceTransformer, as_chunked  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "ContextEmbedConfig",
    "ContextEmbedModel",
    "ContextEmbedProcessor",
    "ContextEmbedSentenceTransformer",
    "as_chunked",
    "build_checkpoint",
    "save_checkpoint",
]
