"""Perplexity's pplx-embed-context-v1 checkpoints as contextembed checkpoints, without remote code.

A pplx-embed-context-v1 folder (0.6B or 4B) holds a plain Qwen3 state dict (`embed_tokens.*`, `layers.N.*`,
`norm.*`: no prefix, no head, no projection) under `model_type="bidirectional_pplx_qwen3"`, whose `auto_map`
points at the repository's own modeling code. What that code does, and what is kept here:

- attention is bidirectional: stock `Qwen3Model` with `is_causal=False` (`ContextEmbedConfig(bidirectional=True)`);
- chunks are joined by the tokenizer's existing `<|endoftext|>` (id 151643), not a new token, and each chunk's
  vector is the mean of its own tokens' final states (separators excluded); no prefixes, no special tokens;
- int8 is `round(tanh(x) * 127)` of the unnormalised vector (`int8_scheme="tanh"`).

Sources (read, not run): the model card and `modeling.py` of perplexity-ai/pplx-embed-context-v1-0.6b as described
by the ports that reimplement it (text-embeddings-inference's `Pplx1Model`, mean pooling only; an ONNX late-chunking
client splitting at `<|endoftext|>` and averaging each span). Parity with the real weights is not verified here
(no Hub access): only against an independent reimplementation of that pooling on a tiny checkpoint laid out the
same way (tests/test_convert.py).

Differences that remain: a chunk containing the literal text `<|endoftext|>` is tokenised as text here (the
original splits it as a separator); float vectors come back L2-normalised unless `normalize=False` (the original
returns them raw; the direction is the same).
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import SafetensorError
from transformers import AutoTokenizer, Qwen3Config, Qwen3Model

from contextembed.checkpoint import read_json_file, read_source_checkpoint, save_checkpoint
from contextembed.modeling import ContextEmbedConfig, ContextEmbedModel, ContextEmbedProcessor, loading_problems
from contextembed.quiet import quiet_transformers

PPLX_MODEL_TYPES = ("bidirectional_pplx_qwen3",)
PPLX_SEPARATOR = "<|endoftext|>"
# Keys of the pplx config.json that describe its remote code, not the Qwen3 backbone.
REMOTE_CODE_KEYS = ("auto_map", "architectures", "use_bidirectional_attention", "model_type", "transformers_version")
MAX_SEQ_LENGTH = 32768  # the card's context length


def is_pplx_checkpoint(path: str | Path) -> bool:
    """Whether a folder is a pplx-embed-context-v1 checkpoint (by its config.json's `model_type`)."""
    config = Path(path) / "config.json"
    return config.is_file() and read_json_file(config).get("model_type") in PPLX_MODEL_TYPES


def source_converter(path: str | Path):
    """The function that converts the Perplexity folder at `path` (`convert_pplx` for pplx-embed-context-v1,
    `convert_pplx_v2` for pplx-embed-v2-context), or `None` for anything else."""
    from contextembed.pplx_v2 import convert_pplx_v2, is_pplx_v2_checkpoint

    if is_pplx_checkpoint(path):
        return convert_pplx
    return convert_pplx_v2 if is_pplx_v2_checkpoint(path) else None


def convert_pplx(
    source: str | Path, output_dir: str | Path | None = None, *, source_id: str | None = None,
    overwrite: bool = False, dtype: torch.dtype = torch.float32,
) -> tuple[ContextEmbedModel, ContextEmbedProcessor]:
    """Build a contextembed checkpoint from a local pplx-embed-context-v1 folder; save it when `output_dir` is given.

    The weights are loaded strictly (a missing or unexpected tensor is an error), in float32 as published, then
    cast to `dtype` (the model has no projection to keep in float32).
    `source_id` (e.g. the Hub id) goes into the card's `base_model`. `output_dir` must be new or empty, or hold a
    checkpoint to replace with `overwrite=True`.
    """
    source = Path(source)
    raw = read_source_checkpoint(source, PPLX_MODEL_TYPES, "pplx-embed-context-v1", output_dir, overwrite)
    try:
        text_config = Qwen3Config(**{k: v for k, v in raw.items() if k not in REMOTE_CODE_KEYS})
    except Exception as error:  # huggingface_hub's strict-dataclass validation errors are not ValueErrors
        raise ValueError(f"the config.json of {source} is not a valid Qwen3 config: {error}") from error

    # trust_remote_code=False: the folder's config names remote code, and transformers would otherwise ask about it.
    with quiet_transformers():  # "a model of type bidirectional_pplx_qwen3 ... of type ...": expected here
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False)
    separator_id = tokenizer.convert_tokens_to_ids(PPLX_SEPARATOR)
    if separator_id is None or separator_id == tokenizer.unk_token_id:
        raise ValueError(f"the tokenizer in {source} has no {PPLX_SEPARATOR!r} token, the pplx chunk separator")
    positions = text_config.max_position_embeddings
    config = ContextEmbedConfig(
        text_config=text_config,
        chunk_token=PPLX_SEPARATOR,
        chunk_token_id=separator_id,
        ignore_token_ids=[i for i in tokenizer.all_special_ids if i not in (separator_id, tokenizer.unk_token_id)],
        max_seq_length=min(positions, MAX_SEQ_LENGTH) if positions else MAX_SEQ_LENGTH,
        bidirectional=True,
        int8_scheme="tanh",
    )

    with torch.device("meta"):  # the backbone below replaces this one: no second copy of the weights in memory
        model = ContextEmbedModel(config)
    try:
        with quiet_transformers():
            backbone, info = Qwen3Model.from_pretrained(source, config=config.text_config, dtype=torch.float32,
                                                        output_loading_info=True, use_safetensors=True)
    except SafetensorError as error:
        raise ValueError(f"cannot read the weights in {source} (model.safetensors is damaged or truncated): "
                         f"{error}") from error
    problems = loading_problems(info)
    if problems:
        raise ValueError(f"the weights in {source} are not a Qwen3 backbone laid out as pplx-embed-context-v1: "
                         f"{problems}")
    model.backbone = backbone
    model.to(dtype).eval()

    tokenizer.model_max_length = config.max_seq_length
    processor = ContextEmbedProcessor(tokenizer, chunk_token=PPLX_SEPARATOR, max_seq_length=config.max_seq_length)
    if output_dir is not None:
        save_checkpoint(model, processor, output_dir, card=_card(source_id or source.name, source_id))
    return model, processor


def _card(name: str, source_id: str | None) -> dict:
    return {
        "title": f"{name} (converted for contextembed)",
        "summary": f"Perplexity's pplx-embed-context-v1 weights ({name}), converted by `contextembed convert` to "
                   "load with `trust_remote_code=False`: stock Qwen3 backbone with bidirectional attention, chunks "
                   "joined by `<|endoftext|>`, mean pooling per chunk, int8 as round(tanh(x) * 127). Parity with the "
                   "original's remote code was checked on a tiny checkpoint of the same layout, not on these weights.",
        "base_model": source_id,
    }
