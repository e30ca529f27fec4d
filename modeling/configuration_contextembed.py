"""Configuration of a contextual chunk embedding model (late chunking over a wrapped backbone).

A ``ContextEmbedConfig`` holds the backbone's own config as ``text_config`` (any ``AutoConfig``)
plus everything late chunking adds on top: the chunk separator token, query/document prefixes,
the projection size, the head's activation, Matryoshka dimensions, normalisation, the window
length for long documents and the deterministic int8 scheme.
"""

from __future__ import annotations

import warnings

from transformers import AutoConfig, PreTrainedConfig
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

from .choices_contextembed import (  # noqa: F401 - the config's closed sets, defined where no import is heavy
    DEFAULT_CHUNK_TOKEN,
    HEAD_ACTIVATIONS,
    INT8_SCHEMES,
    PRECISIONS,
    Int8Scheme,
    Precision,
    is_integer,
)

# Keys that older config.json files carry and that are read, checked and dropped: the value each must hold (the only
# behaviour left), and why it went.
REMOVED_KEYS = {
    "pooling": ("mean", "pooling had one option, mean, which is what every checkpoint does"),
    "document_mix": (0.0, "document_mix (each chunk moved toward its document's mean) was never shipped"),
}


class ContextEmbedConfig(PreTrainedConfig):
    r"""
    Configuration for [`ContextEmbedModel`].

    Args:
        text_config (`dict` or `PreTrainedConfig`, *optional*):
            Config of the wrapped backbone (BERT, ModernBERT, Qwen3, ...). A dict must carry `model_type`.
        chunk_token (`str`, *optional*, defaults to `"<|chunk_sep|>"`):
            The special token inserted between chunks.
        chunk_token_id (`int`, *optional*):
            Its id in the tokenizer; set when the token is added.
        ignore_token_ids (`list[int]`, *optional*):
            Special tokens (CLS, SEP, BOS, EOS, PAD, ...) that belong to no chunk when chunks are derived from
            separator ids instead of given as `chunk_ids`.
        query_prefix (`str`, *optional*, defaults to `""`):
            Text put before every query; its tokens belong to no chunk.
        document_prefix (`str`, *optional*, defaults to `""`):
            Text put before every document; its tokens belong to no chunk.
        projection_dim (`int`, *optional*):
            Output size of the linear projection after pooling. `None`: no projection, the vectors have the backbone's
            hidden size. (`embedding_dim`, the name older config files use for it, is read as this.)
        matryoshka_dims (`list[int]`, *optional*):
            Widths the embedding may be cut to (cut first, then normalise); always holds the full width
            (`embedding_dim`). Defaults to the full width only.
        output_dim (`int`, *optional*):
            The Matryoshka size the model returns; `None` is the full size. Must be one of `matryoshka_dims`.
        head_activation (`str`, *optional*):
            Applied elementwise to the projected chunk mean before the Matryoshka cut and normalisation: `None`
            (none) or `"tanh"` (pplx-embed-v2-context's head, whose float vectors are `normalize(tanh(x))`).
        normalize (`bool`, *optional*, defaults to `True`):
            L2-normalise chunk vectors.
        max_seq_length (`int`, *optional*):
            Tokens per forward pass (the window). `None` uses the backbone's `max_position_embeddings`; a larger
            value than the backbone's positions is an error.
        window_overlap (`float`, *optional*, defaults to `0.0`):
            Fraction of a window's text shared with the next one when a document is longer than `max_seq_length`.
            0: consecutive windows abut (with `window_head_tokens` carried into each), so a long document costs about
            `max_seq_length / (max_seq_length - window_head_tokens)` passes over its tokens; 0.5 (the default of
            earlier releases) about twice that. Chosen on long-document validation sets (docs/long-documents.md).
        window_head_tokens (`int`, *optional*, defaults to `0`):
            Opening tokens of a document carried into every later window as context (never pooled).
        bidirectional (`bool`, *optional*, defaults to `True`):
            Run decoder backbones without a causal mask (`text_config.is_causal = False`).
        default_precision (`str`, *optional*, defaults to `"float32"`):
            The output precision the checkpoint recommends; one of `PRECISIONS`.
        int8_clip_sigmas (`float`, *optional*, defaults to `5.0`):
            The fixed int8 scheme: a unit vector of size d is coded as
            `clip(round(x * 127 * sqrt(d) / int8_clip_sigmas), -127, 127)`.
        int8_scheme (`str`, *optional*, defaults to `"unit"`):
            `"unit"` codes unit vectors with `int8_clip_sigmas` as above; `"tanh"` codes the unnormalised chunk
            vector as `round(tanh(x) * 127)` (pplx-embed-context-v1's scheme); `"bounded"` codes the head's
            unnormalised output, already in (-1, 1) (`head_activation="tanh"`), as `round(x * 127)`
            (pplx-embed-v2-context's scheme).

    Older `config.json` files may also carry `pooling` (always `"mean"`) and `document_mix` (always 0): they load,
    and the keys are dropped.
    """

    model_type = "contextembed"
    sub_configs = {"text_config": AutoConfig}

    def __init__(
        self,
        text_config: dict | PreTrainedConfig | None = None,
        chunk_token: str = DEFAULT_CHUNK_TOKEN,
        chunk_token_id: int | None = None,
        ignore_token_ids: list[int] | None = None,
        query_prefix: str = "",
        document_prefix: str = "",
        projection_dim: int | None = None,
        matryoshka_dims: list[int] | None = None,
        output_dim: int | None = None,
        head_activation: str | None = None,
        normalize: bool = True,
        max_seq_length: int | None = None,
        window_overlap: float = 0.0,
        window_head_tokens: int = 0,
        bidirectional: bool = True,
        default_precision: str = "float32",
        int8_clip_sigmas: float = 5.0,
        int8_scheme: str = "unit",
        **kwargs,
    ):
        if "embedding_dim" in kwargs:  # a config.json written before 0.2 named the projection's size so
            warnings.warn("this config.json names the projection's size embedding_dim, its former name: it is read "
                          "as projection_dim (save the checkpoint again to write the current name)", DeprecationWarning,
                          stacklevel=2)
            legacy = kwargs.pop("embedding_dim")
            projection_dim = legacy if projection_dim is None else projection_dim
        if isinstance(text_config, dict):
            text_config = dict(text_config)
            if "model_type" not in text_config:
                raise ValueError("text_config must name its `model_type` (e.g. 'bert', 'qwen3')")
            text_config = CONFIG_MAPPING[text_config.pop("model_type")](**text_config)
        elif text_config is None:
            text_config = CONFIG_MAPPING["bert"]()
        if bidirectional:
            # transformers >= 5.2 reads this flag on decoder configs and builds a bidirectional mask.
            text_config.is_causal = False
        self.text_config = text_config

        self.chunk_token = chunk_token
        self.chunk_token_id = chunk_token_id
        self.ignore_token_ids = sorted(ignore_token_ids) if ignore_token_ids else []
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.projection_dim = projection_dim
        self.matryoshka_dims = sorted(matryoshka_dims) if matryoshka_dims else [self.embedding_dim]
        self.output_dim = output_dim
        self.head_activation = head_activation
        self.normalize = normalize
        self.max_seq_length = max_seq_length if max_seq_length is not None else self._backbone_positions()
        self.window_overlap = window_overlap
        self.window_head_tokens = window_head_tokens
        self.bidirectional = bidirectional
        self.default_precision = default_precision
        self.int8_clip_sigmas = int8_clip_sigmas
        self.int8_scheme = int8_scheme
        drop_removed_keys(kwargs)
        super().__init__(**kwargs)
        self._validate()

    @property
    def embedding_dim(self) -> int:
        """The full width of the model's vectors (before any Matryoshka cut): the projection's, else the hidden size."""
        return self.projection_dim or self.text_config.hidden_size

    def _backbone_positions(self) -> int | None:
        positions = getattr(self.text_config, "max_position_embeddings", None)
        return positions if isinstance(positions, int) and positions > 0 else None

    @classmethod
    def from_dict(cls, config_dict: dict, **kwargs):
        # Loading a plain backbone folder (or a hand-written config) as ours would silently build a default
        # BERT around its weights: refuse it with the instruction that fixes it.
        model_type = config_dict.get("model_type")
        if model_type not in (None, cls.model_type):
            raise ValueError(
                f"this is a {model_type!r} checkpoint, not a contextembed checkpoint (config.json has model_type="
                f"{model_type!r}); wrap the backbone first with `contextembed build BACKBONE_DIR OUTPUT_DIR`"
            )
        if "text_config" not in config_dict:
            raise ValueError(
                "not a contextembed checkpoint: config.json has no `text_config` (the wrapped backbone's config)"
            )
        return super().from_dict(config_dict, **kwargs)

    def _validate(self) -> None:
        if self.head_activation not in HEAD_ACTIVATIONS:
            raise ValueError(f"head_activation must be one of {HEAD_ACTIVATIONS}, got {self.head_activation!r}")
        if self.default_precision not in PRECISIONS:
            raise ValueError(f"default_precision must be one of {PRECISIONS}, got {self.default_precision!r}")
        if not isinstance(self.chunk_token, str) or not self.chunk_token:
            raise ValueError(f"chunk_token must be a non-empty string, got {self.chunk_token!r}")
        for name in ("query_prefix", "document_prefix"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"{name} must be a string, got {getattr(self, name)!r}")
        for name in ("projection_dim", "max_seq_length"):
            value = getattr(self, name)
            if value is not None and (not is_integer(value) or value <= 0):
                raise ValueError(f"{name} must be a positive integer or None, got {value!r}")
        if self.max_seq_length is None:
            raise ValueError("set max_seq_length: the backbone config has no max_position_embeddings")
        positions = self._backbone_positions()
        if positions is not None and self.max_seq_length > positions:
            raise ValueError(
                f"max_seq_length={self.max_seq_length} is more than the backbone's max_position_embeddings={positions}"
            )
        bad = [d for d in self.matryoshka_dims if not is_integer(d) or not 0 < d <= self.embedding_dim]
        if bad:
            raise ValueError(f"matryoshka_dims must be integers in 1..{self.embedding_dim}, got "
                             f"{self.matryoshka_dims!r}")
        if self.embedding_dim not in self.matryoshka_dims:
            raise ValueError(
                f"matryoshka_dims must include the full width {self.embedding_dim}, got {self.matryoshka_dims!r}"
            )
        if self.output_dim is not None and self.output_dim not in self.matryoshka_dims:
            raise ValueError(f"output_dim must be one of {self.matryoshka_dims}, got {self.output_dim!r}")
        if not 0.0 <= self.window_overlap < 1.0:
            raise ValueError(f"window_overlap must be in [0, 1), got {self.window_overlap!r}")
        if not is_integer(self.window_head_tokens) or self.window_head_tokens < 0:
            raise ValueError(f"window_head_tokens must be a non-negative integer, got {self.window_head_tokens!r}")
        if self.int8_scheme == "bounded" and self.head_activation != "tanh":
            raise ValueError("int8_scheme 'bounded' codes a head's output in (-1, 1): it needs head_activation="
                             f"'tanh', got head_activation={self.head_activation!r}")
        if self.int8_scheme not in INT8_SCHEMES:
            raise ValueError(f"int8_scheme must be one of {INT8_SCHEMES}, got {self.int8_scheme!r}")
        if not self.int8_clip_sigmas > 0:
            raise ValueError(f"int8_clip_sigmas must be positive, got {self.int8_clip_sigmas!r}")

    @classmethod
    def reference(cls, text_config: dict | PreTrainedConfig, **kwargs) -> ContextEmbedConfig:
        """The reference configuration of the seed model: 2048-d projection, Matryoshka 1024/2048,
        32,768 tokens in one pass, `<|chunk_sep|>`, int8 output."""
        preset = dict(
            chunk_token=DEFAULT_CHUNK_TOKEN,
            projection_dim=2048,
            matryoshka_dims=[1024, 2048],
            max_seq_length=32768,
            default_precision="int8",
        )
        preset.update(kwargs)
        return cls(text_config=text_config, **preset)


def drop_removed_keys(kwargs: dict) -> None:
    """Take the keys of `REMOVED_KEYS` out of `kwargs` (an old config.json's), each checked to hold the one value
    that today's model computes: a file that asks for anything else would otherwise load and compute other vectors.

    >>> kwargs = {"pooling": "mean", "document_mix": 0.0, "name_or_path": "x"}
    >>> drop_removed_keys(kwargs); kwargs
    {'name_or_path': 'x'}
    """
    for key, (value, why) in REMOVED_KEYS.items():
        received = kwargs.pop(key, value)
        if received != value:
            raise ValueError(f"{key} was removed ({why}): a config that sets it loads only with {key}={value!r}, "
                             f"got {received!r}")


__all__ = ["ContextEmbedConfig", "DEFAULT_CHUNK_TOKEN", "HEAD_ACTIVATIONS", "INT8_SCHEMES", "PRECISIONS",
           "REMOVED_KEYS", "Int8Scheme", "Precision", "drop_removed_keys", "is_integer"]
