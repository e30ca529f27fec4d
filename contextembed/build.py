"""Build a contextembed checkpoint from any local Hugging Face backbone directory."""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from transformers import AutoModel, AutoTokenizer

from contextembed.checkpoint import check_checkpoint_target, save_checkpoint
from contextembed.modeling import DEFAULT_CHUNK_TOKEN, ContextEmbedConfig, ContextEmbedModel, ContextEmbedProcessor

logger = logging.getLogger(__name__)

PRESETS = ("reference",)


def build_checkpoint(
    backbone: str | Path,
    output_dir: str | Path | None = None,
    *,
    projection_dim: int | None = None,
    matryoshka_dims: list[int] | None = None,
    max_seq_length: int | None = None,
    preset: str | None = None,
    query_prefix: str = "",
    document_prefix: str = "",
    window_head_tokens: int = 0,
    chunk_token: str = DEFAULT_CHUNK_TOKEN,
    separator_init: str = "mean",
    card: dict | None = None,
    overwrite: bool = False,
) -> tuple[ContextEmbedModel, ContextEmbedProcessor]:
    """Wrap a backbone for late chunking: add the separator token and the projection, then save.

    Args:
        backbone: a local directory with the backbone's weights and tokenizer.
        output_dir: where to save the checkpoint; `None` only builds it in memory.
        projection_dim: the projection's output size; `None` keeps the hidden size (no projection).
        matryoshka_dims: dimensions the vectors may be cut to.
        max_seq_length: tokens per forward pass; defaults to the backbone's position limit.
        preset: `"reference"` for the reference configuration (2048-d, Matryoshka 1024/2048, 32k, int8).
        query_prefix / document_prefix: text put before queries / documents.
        window_head_tokens: opening tokens carried into every later window of a long document.
        chunk_token: the separator token to add.
        separator_init: where the separator's embedding row starts: `"mean"` (the mean of the trained rows) or a
            token of the vocabulary whose row it copies (e.g. `"."`).
        card: model-card fields (`title`, `summary`, `base_model`, `results`, `limitations`, ...).
        overwrite: replace a checkpoint already in `output_dir` (a folder holding anything else is refused).

    Returns:
        The model (fp32, eval mode) and its processor.
    """
    if preset is not None and preset not in PRESETS:
        raise ValueError(f"preset must be one of {PRESETS} or None, got {preset!r}")
    backbone = Path(backbone)
    if not backbone.is_dir():
        raise ValueError(f"backbone must be a local directory with weights and a tokenizer, got {str(backbone)!r}")
    if output_dir is not None:
        check_checkpoint_target(output_dir, overwrite)  # before the work, not after

    tokenizer = AutoTokenizer.from_pretrained(backbone)
    if chunk_token not in tokenizer.get_vocab():
        tokenizer.add_special_tokens({"extra_special_tokens": [chunk_token]}, replace_extra_special_tokens=False)
        logger.info("added special token %r to the tokenizer", chunk_token)
    backbone_model = AutoModel.from_pretrained(backbone, dtype=torch.float32)

    config = _config(backbone_model.config, tokenizer, chunk_token, preset, projection_dim=projection_dim,
                     matryoshka_dims=matryoshka_dims, max_seq_length=max_seq_length, query_prefix=query_prefix,
                     document_prefix=document_prefix, window_head_tokens=window_head_tokens)
    model = ContextEmbedModel(config)
    model.backbone.load_state_dict(backbone_model.state_dict())
    if config.projection_dim is not None:
        logger.info("added an untrained %d -> %d projection (orthogonal init)", config.text_config.hidden_size,
                    config.projection_dim)
    _add_separator_row(model, tokenizer, config.chunk_token_id, separator_init)
    model.eval()

    tokenizer.model_max_length = config.max_seq_length
    processor = ContextEmbedProcessor(
        tokenizer,
        chunk_token=chunk_token,
        query_prefix=query_prefix,
        document_prefix=document_prefix,
        max_seq_length=config.max_seq_length,
    )
    if output_dir is not None:
        save_checkpoint(model, processor, output_dir, card=card)
    return model, processor


def _config(text_config, tokenizer, chunk_token: str, preset: str | None, *, projection_dim, matryoshka_dims,
            max_seq_length, **options) -> ContextEmbedConfig:
    """The checkpoint's config: the separator and prefixes, then the preset, then explicit sizes over both."""
    chunk_token_id = tokenizer.convert_tokens_to_ids(chunk_token)
    options.update(chunk_token=chunk_token, chunk_token_id=chunk_token_id, ignore_token_ids=[
        i for i in tokenizer.all_special_ids if i not in (chunk_token_id, tokenizer.unk_token_id)])
    # Explicit arguments override the preset; a preset's Matryoshka dims above a smaller projection are dropped.
    overrides = {"projection_dim": projection_dim, "matryoshka_dims": matryoshka_dims, "max_seq_length": max_seq_length}
    options.update({name: value for name, value in overrides.items() if value is not None})
    if preset != "reference":
        return ContextEmbedConfig(text_config=text_config, **options)
    if projection_dim is not None and matryoshka_dims is None:
        options["matryoshka_dims"] = [d for d in (1024, 2048) if d <= projection_dim] or None
    positions = getattr(text_config, "max_position_embeddings", None)
    if max_seq_length is None and isinstance(positions, int) and positions < 32768:
        options["max_seq_length"] = positions  # the reference's 32k, or as far as this backbone reaches
    return ContextEmbedConfig.reference(text_config, **options)


def _add_separator_row(model: ContextEmbedModel, tokenizer, chunk_token_id: int, init: str = "mean") -> None:
    """Give the separator a defined embedding: resize only when the tokenizer outgrew the matrix."""
    embeddings = model.get_input_embeddings()
    rows = embeddings.weight.shape[0]
    if len(tokenizer) > rows:
        model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
        logger.info("resized token embeddings from %d to %d rows", rows, len(tokenizer))
        embeddings = model.get_input_embeddings()
    if init != "mean":
        source = tokenizer.convert_tokens_to_ids(init)
        if source is None or source == tokenizer.unk_token_id or source == chunk_token_id:
            raise ValueError(f"separator_init must be 'mean' or a token of the vocabulary, got {init!r}")
    with torch.no_grad():
        if init == "mean":
            # Spare rows (Qwen3, ModernBERT) are untrained: start the separator at the mean of the trained rows.
            trained = embeddings.weight[: min(rows, len(tokenizer))]
            embeddings.weight[chunk_token_id] = trained[torch.arange(len(trained)) != chunk_token_id].mean(0)
        else:
            embeddings.weight[chunk_token_id] = embeddings.weight[source]
    logger.info("initialised the embedding row of separator id %d from %s", chunk_token_id,
                "the mean embedding" if init == "mean" else repr(init))
