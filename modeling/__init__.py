"""The transformers side of contextembed: config, model and processor for late chunking.

These three modules import only torch, transformers and each other, so they can also be placed
next to the weights of a Hub repository. They are installed as ``contextembed.modeling``.
"""

from .configuration_contextembed import ContextEmbedConfig
from .modeling_contextembed import ContextEmbedModel, ContextEmbedOutput, ContextEmbedPreTrainedModel
from .processing_contextembed import ContextEmbedProcessor

__all__ = [
    "ContextEmbedConfig",
    "ContextEmbedModel",
    "ContextEmbedOutput",
    "ContextEmbedPreTrainedModel",
    "ContextEmbedProcessor",
]
