"""Perplexity's pplx-embed-v2-context checkpoints as contextembed checkpoints, without remote code.

A pplx-embed-v2-context folder (`model_type` `pplx_contextual_qwen3_5`) holds a Qwen3.5 vision-language config with
retrieval fields on top, the text backbone's weights under `language_model.*` and the vision tower's under
`visual.*` in shards with an index, and the projection `contextual_projection.weight` ([embedding_dim, hidden],
fp32) in a separate `contextual_head.safetensors`. Its `auto_map` names the repository's own code; none of it is
imported here. What that code computes, as the public ports that read it describe it (docs/pplx-v2.md),
and how it is kept:

- backbone: stock `Qwen3_5TextModel` built from `text_config` (Gated-DeltaNet and full-attention layers); the
  published `is_causal: false` makes the full-attention layers bidirectional, the GDN layers stay as they are;
  the vision weights are not read (text only);
- queries: the `[Q] ` token's id, then the query's tokens; the mean over all of them, the prefix included;
- documents: `"[D] " + marker.join(chunks)` tokenised once; each chunk the mean of the tokens whose characters
  overlap its own (prefix and markers excluded; an empty chunk a zero vector); `input_layout="pplx-v2"`;
- head: the fp32 projection, then tanh (`head_activation="tanh"`): int8 codes are round(tanh(x) * 127)
  (`int8_scheme="bounded"`), float vectors normalize(tanh(x)), a Matryoshka cut the first values of tanh(x) then
  normalised; Matryoshka dims `embedding_dim / 2` and `embedding_dim`;
- length: the model's `document_length` in one pass; longer documents run in windows (contextembed's extension,
  not the reference's, which raises).

Where the published facts are inferred or unknown, both readings are accepted: the backbone under `language_model.`
or `model.language_model.`; the projection in `contextual_head.safetensors` whether or not the index lists it (or
in a shard the index names); a config without the retrieval fields takes the class defaults the ports report.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from contextembed.checkpoint import read_json_file, read_source_checkpoint, save_checkpoint
from contextembed.modeling import ContextEmbedConfig, ContextEmbedModel, ContextEmbedProcessor, loading_problems
from contextembed.quiet import quiet_transformers

logger = logging.getLogger(__name__)

PPLX_V2_MODEL_TYPES = ("pplx_contextual_qwen3_5",)
HEAD_FILE = "contextual_head.safetensors"
INDEX_FILE = "model.safetensors.index.json"
PROJECTION_KEYS = ("contextual_projection.weight", "model.contextual_projection.weight")
BACKBONE_KEYS = r"^(?:model\.)?language_model\."  # the text backbone's weights, under either published prefix
# Weights that are in the folder and deliberately not read: the vision tower, multi-token prediction, the head.
SKIPPED_KEYS = re.compile(r"^(?:model\.)?(?:visual|mtp|contextual_projection)\.")
# The remote config class's defaults, used when config.json leaves a field out (a log line says so).
FIELD_DEFAULTS = {"query_prefix": "[Q] ", "document_prefix": "[D] ", "boundary_marker": "<|chunk_sep|>",
                  "document_length": 32768}
LAYER_TYPES = {"linear_attention", "full_attention"}
# Opening tokens carried into every window of a document longer than `document_length` (contextembed's extension;
# not tuned: the model never saw windows, and a document's title, parties and dates usually fit in them), at most an
# eighth of a window.
WINDOW_HEAD_TOKENS = 512


def is_pplx_v2_checkpoint(path: str | Path) -> bool:
    """Whether a folder is a pplx-embed-v2-context checkpoint (by its config.json's `model_type`)."""
    config = Path(path) / "config.json"
    return config.is_file() and read_json_file(config).get("model_type") in PPLX_V2_MODEL_TYPES


def convert_pplx_v2(
    source: str | Path, output_dir: str | Path | None = None, *, source_id: str | None = None,
    overwrite: bool = False, dtype: torch.dtype = torch.float32,
) -> tuple[ContextEmbedModel, ContextEmbedProcessor]:
    """Build a contextembed checkpoint from a local pplx-embed-v2-context folder; save it when `output_dir` is given.

    The backbone is read strictly (a missing or unexpected tensor is an error) in `dtype` (float32 as published);
    the projection stays float32 whatever `dtype` is. `source_id` (e.g. the Hub id) goes into the card's
    `base_model`. `output_dir` must be new or empty, or hold a checkpoint to replace with `overwrite=True`.
    """
    source = Path(source)
    raw = read_source_checkpoint(source, PPLX_V2_MODEL_TYPES, "pplx-embed-v2-context", output_dir, overwrite)
    fields = retrieval_fields(raw, source)
    text_config = backbone_config(raw, fields["document_length"], source)
    tokenizer = load_tokenizer(source, fields)
    projection = load_projection(source, text_config.hidden_size, raw.get("embedding_dim"))
    embedding_dim = projection.shape[0]

    config = ContextEmbedConfig(
        text_config=text_config,
        chunk_token=fields["boundary_marker"],
        chunk_token_id=tokenizer.convert_tokens_to_ids(fields["boundary_marker"]),
        query_prefix=fields["query_prefix"],
        document_prefix=fields["document_prefix"],
        projection_dim=embedding_dim,
        matryoshka_dims=sorted({embedding_dim // 2, embedding_dim}) if embedding_dim % 2 == 0 else None,
        head_activation="tanh",
        max_seq_length=fields["document_length"],
        window_head_tokens=min(WINDOW_HEAD_TOKENS, fields["document_length"] // 8),
        bidirectional=not getattr(text_config, "is_causal", False),
        default_precision="int8",
        int8_scheme="bounded",
    )
    with torch.device("meta"):  # the parts below replace these: no second copy of the weights in memory
        model = ContextEmbedModel(config)
    model.backbone = load_backbone(source, config.text_config, dtype)
    model.projection.weight = torch.nn.Parameter(projection)  # (E, H), float32 whatever the backbone's dtype
    model.eval()

    tokenizer.model_max_length = config.max_seq_length
    processor = ContextEmbedProcessor(tokenizer, chunk_token=fields["boundary_marker"],
                                      query_prefix=fields["query_prefix"], document_prefix=fields["document_prefix"],
                                      max_seq_length=config.max_seq_length, empty_chunks="zero",
                                      input_layout="pplx-v2")
    processor.query_prefix_token_id  # noqa: B018 - fail here, naming the token, rather than at the first query
    if output_dir is not None:
        save_checkpoint(model, processor, output_dir, card=_card(source_id or source.name, source_id, config))
    return model, processor


def retrieval_fields(raw: dict, source: Path) -> dict:
    """The prefixes, the marker and `document_length` from config.json, each checked; a missing one takes the
    remote class's default (logged).

    >>> retrieval_fields({"document_length": 262144, "embedding_dim": 2048}, Path("pplx"))
    {'query_prefix': '[Q] ', 'document_prefix': '[D] ', 'boundary_marker': '<|chunk_sep|>', 'document_length': 262144}
    >>> retrieval_fields({"document_length": "long"}, Path("pplx"))
    Traceback (most recent call last):
    ...
    ValueError: the config.json of pplx has document_length='long': expected a positive integer
    """
    fields = {}
    for name, default in FIELD_DEFAULTS.items():
        if name not in raw:
            logger.info("%s: config.json has no %s; using the published default %r", source, name, default)
        fields[name] = raw.get(name, default)
    for name in ("query_prefix", "document_prefix", "boundary_marker"):
        if not isinstance(fields[name], str) or (name == "boundary_marker" and not fields[name]):
            raise ValueError(f"the config.json of {source} has {name}={fields[name]!r}: expected a string")
    length = fields["document_length"]
    if isinstance(length, bool) or not isinstance(length, int) or length <= 0:
        raise ValueError(f"the config.json of {source} has document_length={length!r}: expected a positive integer")
    return fields


def backbone_config(raw: dict, document_length: int, source: Path):
    """The stock `qwen3_5_text` config from `text_config`, as the remote config's init leaves it
    (`max_position_embeddings = document_length`, no cache); what stock transformers cannot run is refused."""
    from transformers import Qwen3_5TextConfig

    text = raw.get("text_config")
    if not isinstance(text, dict):
        raise ValueError(f"the config.json of {source} has no text_config: not a Qwen3.5 checkpoint")
    text = dict(text)
    if text.pop("model_type", "qwen3_5_text") != "qwen3_5_text":
        raise ValueError(f"the text_config of {source} is not a qwen3_5_text config")
    unsupported = sorted(set(text.get("layer_types") or []) - LAYER_TYPES)
    if unsupported or text.get("num_experts") or text.get("attn_output_gate", True) is not True:
        raise ValueError(f"the text_config of {source} asks for what stock Qwen3.5 does not run (layer types "
                         f"{unsupported or 'ok'}, experts {text.get('num_experts')}, attn_output_gate "
                         f"{text.get('attn_output_gate', True)}): only linear_attention and full_attention layers, "
                         "no experts, gated attention output")
    if "is_causal" not in text:
        logger.info("%s: text_config has no is_causal; the full-attention layers run bidirectionally, as "
                    "published", source)
    text.update(max_position_embeddings=max(document_length, text.get("max_position_embeddings") or 0),
                use_cache=False)
    try:
        return Qwen3_5TextConfig(**text)
    except Exception as error:  # huggingface_hub's strict-dataclass validation errors are not ValueErrors
        raise ValueError(f"the text_config of {source} is not a valid Qwen3.5 text config: {error}") from error


def load_tokenizer(source: Path, fields: dict):
    """The folder's fast tokenizer, from its tokenizer.json (a concrete class: no `auto_map` is ever followed);
    the query prefix and the marker must be single tokens of it."""
    from transformers import PreTrainedTokenizerFast

    if not (source / "tokenizer.json").is_file():
        raise ValueError(f"{source} has no tokenizer.json: pplx-embed-v2-context ships a fast tokenizer")
    with quiet_transformers():
        tokenizer = PreTrainedTokenizerFast.from_pretrained(source, trust_remote_code=False)
    for name in ("query_prefix", "boundary_marker"):
        token_id = tokenizer.convert_tokens_to_ids(fields[name])
        if token_id is None or token_id == tokenizer.unk_token_id:
            raise ValueError(f"the tokenizer in {source} has no token {fields[name]!r} (the {name})")
    return tokenizer


def load_backbone(source: Path, text_config, dtype: torch.dtype):
    """Stock `Qwen3_5TextModel` with the folder's `language_model.*` weights (read through the shards' index);
    anything but the vision tower, multi-token prediction and the head left over is an error."""
    from transformers import Qwen3_5TextModel

    try:
        with quiet_transformers():
            backbone, info = Qwen3_5TextModel.from_pretrained(
                source, config=text_config, dtype=dtype, key_mapping={BACKBONE_KEYS: ""}, use_safetensors=True,
                output_loading_info=True)
    except SafetensorError as error:
        raise ValueError(f"cannot read the weights in {source} (a shard is damaged or truncated): {error}") from error
    info["unexpected_keys"] = [k for k in info.get("unexpected_keys") or () if not SKIPPED_KEYS.match(str(k))]
    problems = loading_problems(info)
    if problems:
        raise ValueError(f"the weights in {source} are not a Qwen3.5 text backbone laid out as "
                         f"pplx-embed-v2-context: {problems}")
    return backbone.eval()


def load_projection(source: Path, hidden: int, embedding_dim: int | None) -> torch.Tensor:
    """`contextual_projection.weight` (embedding_dim, hidden) as float32, from `contextual_head.safetensors` or
    from the shard the index names for it."""
    files = [source / HEAD_FILE]
    if (source / INDEX_FILE).is_file():
        weight_map = read_json_file(source / INDEX_FILE).get("weight_map") or {}
        files += [source / weight_map[k] for k in PROJECTION_KEYS if k in weight_map]
    for file in dict.fromkeys(files):
        if not file.is_file():
            continue
        try:
            with safe_open(str(file), "pt") as f:
                key = next((k for k in PROJECTION_KEYS if k in f.keys()), None)
                weight = f.get_tensor(key) if key else None
        except SafetensorError as error:
            raise ValueError(f"cannot read {file} (damaged or truncated): {error}") from error
        if weight is not None:
            break
    else:
        raise ValueError(f"{source} has no contextual_projection.weight (looked in {HEAD_FILE} and the index): the "
                         "projection of pplx-embed-v2-context ships beside the backbone's shards")
    expected = (embedding_dim or weight.shape[0], hidden)
    if tuple(weight.shape) != expected:
        raise ValueError(f"contextual_projection.weight in {source} has shape {tuple(weight.shape)}, expected "
                         f"{expected} (embedding_dim x the backbone's hidden size)")
    if weight.dtype != torch.float32:
        logger.info("%s: the projection is stored as %s; it runs in float32", source, weight.dtype)
    return weight.float().contiguous()


def _card(name: str, source_id: str | None, config: ContextEmbedConfig) -> dict:
    return {
        "title": f"{name} (converted for contextembed)",
        "summary": (
            f"Perplexity's pplx-embed-v2-context weights ({name}), converted by `contextembed convert` to load with "
            "`trust_remote_code=False`. Exactly: a stock Qwen3.5 text backbone (Gated-DeltaNet and bidirectional "
            f"full-attention layers; the vision tower is not loaded, text only). A query is the id of "
            f"`{config.query_prefix!r}` followed by its tokens, pooled as one mean over all of them, the prefix "
            f"included; a document is `{config.document_prefix!r}` and its chunks joined by `{config.chunk_token}`, "
            "tokenised once, each chunk the mean of the tokens that overlap its characters (prefix and markers "
            f"excluded, an empty chunk a zero vector). Then the fp32 projection to {config.embedding_dim} and tanh: "
            "int8 codes are round(tanh(x) * 127), float vectors normalize(tanh(x)), a Matryoshka cut the first "
            "values of tanh(x), normalised. Encode queries as queries (`encode_queries`, ST `encode_query`): a "
            "query encoded as a document is a silent error. Parity with the remote code was checked on a tiny "
            "checkpoint of the published layout, not on these weights."
        ),
        "base_model": source_id,
    }


__all__ = ["PPLX_V2_MODEL_TYPES", "convert_pplx_v2", "is_pplx_v2_checkpoint"]
