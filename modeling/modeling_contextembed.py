"""Contextual chunk embeddings by late chunking.

A document is an ordered list of chunks joined by a learned separator token. The whole document
runs through the backbone **once**; each chunk's vector is the mean of its tokens' final hidden
states, followed by an fp32 linear projection, the head's activation (none, or tanh), a Matryoshka
cut and L2 normalisation. Every chunk vector has therefore seen the whole document, yet there is
still exactly one vector per chunk.

The file reads in the order a batch travels:

1. **Inputs**: the token mask, each token's chunk and the chunk mask, from whichever form the batch came in.
2. **Pooling**: each chunk's summed token states and token count, in fp32, with shapes fixed by the number of
   chunk slots (no data-dependent shapes, so the pooling exports to ONNX).
3. **Head**: mean, projection, activation, Matryoshka cut, normalisation, padding mask.
4. **The model**: any transformers backbone, run bidirectionally, once per document; a document longer than the
   window (`config.max_seq_length`) runs in windows (`windowing_contextembed`: overlapping windows on chunk
   boundaries, each chunk pooled from the window that gives it the most context, the calls of whole documents and
   windows planned by one scheduler), so there is always exactly one vector per chunk.

Feature names follow what sentence-transformers' built-in `Transformer` module hands over:
`attention_mask` is the **chunk** mask (B, C), `token_attention_mask` the token mask (B, T) and
`chunk_ids` (B, T) gives each token's chunk index, -1 for tokens that belong to no chunk
(special tokens, separators, prefixes, padding). Without `chunk_ids`, chunks are derived from the
separator ids and `attention_mask` is read as the token mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers import AutoModel, PreTrainedModel
from transformers.utils import ModelOutput

from .configuration_contextembed import ContextEmbedConfig, is_integer
from .windowing_contextembed import late_chunk_sums

# Kernels index with 32-bit integers unless told otherwise; the pooling never adds more than this many elements at once.
MAX_INDEX_ELEMENTS = 2**31 - 1


# ------------------------------------------------------------------------------------------------------------------
# Output
# ------------------------------------------------------------------------------------------------------------------


@dataclass
class ContextEmbedOutput(ModelOutput):
    """
    Args:
        chunk_embeddings (`torch.FloatTensor` of shape `(batch_size, num_chunks, dim)`):
            One fp32 vector per chunk; rows of padding chunks are zero.
        chunk_mask (`torch.LongTensor` of shape `(batch_size, num_chunks)`):
            1 for real chunks (empty chunks included), 0 for padding.
        last_hidden_state (`torch.FloatTensor` of shape `(batch_size, seq_len, hidden_size)`, *optional*):
            The backbone's final token states; `None` when a document was run in windows.
        hidden_states (`tuple(torch.FloatTensor)`, *optional*):
            All layers' states, when `output_hidden_states=True` and no document was run in windows.
    """

    chunk_embeddings: torch.FloatTensor | None = None
    chunk_mask: torch.LongTensor | None = None
    last_hidden_state: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None


# ------------------------------------------------------------------------------------------------------------------
# Inputs
# ------------------------------------------------------------------------------------------------------------------


def chunk_layout(
    config: ContextEmbedConfig,
    input_ids: torch.LongTensor,
    attention_mask: torch.Tensor | None,
    token_attention_mask: torch.Tensor | None,
    chunk_ids: torch.LongTensor | None,
) -> tuple[torch.Tensor, torch.LongTensor, torch.LongTensor]:
    """The token mask (B, T), chunk ids (B, T) and chunk mask (B, C) of a batch, from whichever form it came in.

    Two input forms exist because two callers exist. The processor (and sentence-transformers, which must find
    the chunk mask under `attention_mask` to trim and pool rows) sends `chunk_ids`, the token mask as
    `token_attention_mask` and the chunk mask as `attention_mask`. A plain transformers caller sends a tokenizer's
    output: no `chunk_ids`, and `attention_mask` is then the token mask; chunks are read from the separator ids.
    """
    if chunk_ids is None:
        token_mask = token_attention_mask if token_attention_mask is not None else attention_mask
        chunk_ids = chunk_ids_from_separators(config, input_ids, token_mask)
        chunk_mask = None
    else:
        token_mask, chunk_mask = token_attention_mask, attention_mask
    if token_mask is None:
        token_mask = torch.ones_like(input_ids)
    if chunk_mask is None:
        # Chunks 0..max per row: the padding chunks of shorter rows are masked out.
        num_chunks = int(chunk_ids.max().clamp(min=0)) + 1
        chunk_mask = torch.arange(num_chunks, device=input_ids.device) <= chunk_ids.max(1, keepdim=True).values
    return token_mask, chunk_ids, chunk_mask.long()


def chunk_ids_from_separators(
    config: ContextEmbedConfig, input_ids: torch.LongTensor, token_attention_mask: torch.Tensor | None
) -> torch.LongTensor:
    """Chunk index per token (B, T) from separator ids; special tokens, separators and padding get -1.

    >>> config = ContextEmbedConfig(text_config={"model_type": "bert", "pad_token_id": 0}, chunk_token_id=9)
    >>> chunk_ids_from_separators(config, torch.tensor([[5, 6, 9, 7, 0]]), None).tolist()
    [[0, 0, -1, 1, -1]]
    """
    separator = config.chunk_token_id
    if separator is None:
        raise ValueError("config.chunk_token_id is not set: pass chunk_ids or build the checkpoint with a separator")
    is_separator = input_ids == separator
    chunk_ids = is_separator.long().cumsum(1)  # (B, T)
    special = is_separator.clone()
    for token_id in special_token_ids(config):
        special |= input_ids == token_id
    if token_attention_mask is not None:
        special |= token_attention_mask == 0
    return chunk_ids.masked_fill(special, -1)


def special_token_ids(config: ContextEmbedConfig) -> list[int]:
    """The ids that belong to no chunk when chunks are read from separators: `ignore_token_ids` and the special
    tokens named in the config and the backbone's config."""
    ids = set(config.ignore_token_ids)
    for source in (config, config.text_config):
        for name in ("bos_token_id", "eos_token_id", "cls_token_id", "sep_token_id", "pad_token_id"):
            token_id = getattr(source, name, None)
            if isinstance(token_id, int):
                ids.add(token_id)
    return sorted(ids)


def pad_token_id(config: ContextEmbedConfig) -> int:
    """The id that pads window batches: the backbone's pad token, else 0 (padding is masked either way)."""
    pad = getattr(config.text_config, "pad_token_id", None)
    return pad if isinstance(pad, int) else 0


def window_length(config: ContextEmbedConfig, max_seq_length: torch.Tensor | int | None = None) -> int:
    """Tokens per forward pass for one call: `config.max_seq_length`, or less when the caller asks for less."""
    if max_seq_length is None:
        return config.max_seq_length
    return min(config.max_seq_length, int(torch.as_tensor(max_seq_length).max()))


# ------------------------------------------------------------------------------------------------------------------
# Pooling
# ------------------------------------------------------------------------------------------------------------------


def index_slices(batch: int, seq_len: int, hidden: int, limit: int = MAX_INDEX_ELEMENTS) -> list[slice]:
    """Slices of the hidden dimension such that pooling (batch, seq_len, slice) at once adds at most `limit`
    elements. Hidden dimensions are pooled independently, so pooling slice by slice gives the same bits.

    >>> index_slices(2, 1000, 64, limit=50_000)
    [slice(0, 25, None), slice(25, 50, None), slice(50, 64, None)]
    >>> index_slices(1, 262_144, 4096)  # a 262,144-token pass of the 9B: 2^30 elements, pooled at once
    [slice(0, 4096, None)]
    """
    per_dim = batch * seq_len  # the counts' addition indexes this many: it must fit on its own
    if per_dim > limit:
        raise ValueError(
            f"a batch of {batch} x {seq_len} tokens is more than {limit} positions, past what the pooling's "
            "index can hold: run fewer or shorter rows per call (lower max_tokens_per_batch or max_seq_length)"
        )
    step = min(hidden, limit // per_dim) if per_dim else hidden
    return [slice(start, min(start + step, hidden)) for start in range(0, max(hidden, 1), step)]


def chunk_sums_and_counts(
    hidden_states: torch.Tensor,
    chunk_ids: torch.Tensor,
    num_chunks: int,
    *,
    max_index_elements: int = MAX_INDEX_ELEMENTS,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum and count each chunk's token states, in fp32, with shapes fixed by `num_chunks`.

    Tokens with chunk id -1 go to a discarded slot, so the computation has no data-dependent shapes. Each token's
    row of states is added to its chunk's row in one `index_add_` over the batch's (B * T, H) rows, which adds whole
    rows where a scatter reads an index per element (the same bits; on CPU 1.2 to 2 times as fast at hidden 32, 4 to
    8 times at 384 to 1024). The addition never covers more than `max_index_elements` at once (`index_slices`): at
    2^31 elements a 32-bit index would wrap, so a large pass is pooled a slice of hidden dimensions at a time, with
    the same result.

    >>> h = torch.tensor([[[1.0], [3.0], [5.0], [7.0]]])       # (B=1, T=4, H=1)
    >>> ids = torch.tensor([[-1, 0, 0, 1]])
    >>> sums, counts = chunk_sums_and_counts(h, ids, num_chunks=3)
    >>> sums.squeeze(-1).tolist(), counts.tolist()
    ([[8.0, 7.0, 0.0]], [[2.0, 1.0, 0.0]])
    """
    batch, seq_len, hidden = hidden_states.shape
    slots = (chunk_ids.long() + 1).clamp(min=0)  # (B, T); slot 0 collects tokens outside chunks
    if torch.compiler.is_compiling() or torch.jit.is_tracing():
        # A graph being exported (or traced) keeps one scatter: a branch on its symbolic shape would fix the graph to
        # one size, the runtimes it is exported for (ONNX Runtime, OpenVINO) index with 64-bit integers, and ONNX has
        # no exporter for an `index_add_` whose index repeats.
        return _scatter_sums_and_counts(hidden_states, slots, num_chunks)
    rows = (slots + torch.arange(batch, device=slots.device).unsqueeze(1) * (num_chunks + 1)).view(-1)  # (B * T,)
    states = hidden_states.reshape(batch * seq_len, hidden)
    sums = hidden_states.new_zeros(batch * (num_chunks + 1), hidden, dtype=torch.float32)  # (B * (C + 1), H)
    for part in index_slices(batch, seq_len, hidden, max_index_elements):
        sums[:, part].index_add_(0, rows, states[:, part].float())
    counts = hidden_states.new_zeros(batch * (num_chunks + 1), dtype=torch.float32)
    counts.index_add_(0, rows, torch.ones_like(rows, dtype=torch.float32))
    return sums.view(batch, num_chunks + 1, hidden)[:, 1:], counts.view(batch, num_chunks + 1)[:, 1:]


def _scatter_sums_and_counts(hidden_states: torch.Tensor, slots: torch.Tensor, num_chunks: int):
    """`chunk_sums_and_counts` as one scatter per output, for graphs being exported or traced."""
    batch, seq_len, hidden = hidden_states.shape
    sums = hidden_states.new_zeros(batch, num_chunks + 1, hidden, dtype=torch.float32)  # (B, C + 1, H)
    sums.scatter_add_(1, slots.unsqueeze(-1).expand(batch, seq_len, hidden), hidden_states.float())
    counts = hidden_states.new_zeros(batch, num_chunks + 1, dtype=torch.float32)  # (B, C + 1)
    counts.scatter_add_(1, slots, torch.ones_like(slots, dtype=torch.float32))
    return sums[:, 1:], counts[:, 1:]  # (B, C, H), (B, C)


def chunk_means(sums: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Sums (B, C, W) over counts (B, C) -> means (B, C, W); a chunk with no tokens is a zero row.

    >>> chunk_means(torch.tensor([[[8.0], [0.0]]]), torch.tensor([[2.0, 0.0]])).squeeze(-1).tolist()
    [[4.0, 0.0]]
    """
    return sums / counts.clamp(min=1.0).unsqueeze(-1)


def late_chunk_mean(hidden_states: torch.Tensor, chunk_ids: torch.Tensor, num_chunks: int) -> torch.Tensor:
    """Mean of each chunk's token states, (B, T, H) -> (B, C, H) in fp32; an empty chunk is a zero row.

    >>> h = torch.tensor([[[1.0], [3.0], [5.0], [7.0]]])
    >>> late_chunk_mean(h, torch.tensor([[-1, 0, 0, 1]]), num_chunks=3).squeeze(-1).tolist()
    [[4.0, 7.0, 0.0]]
    """
    return chunk_means(*chunk_sums_and_counts(hidden_states, chunk_ids, num_chunks))


# ------------------------------------------------------------------------------------------------------------------
# Head
# ------------------------------------------------------------------------------------------------------------------


def check_output_dim(config: ContextEmbedConfig, output_dim) -> None:
    """`output_dim` must be `None` or one of the checkpoint's Matryoshka sizes."""
    if output_dim is not None and not (is_integer(output_dim) and output_dim in config.matryoshka_dims):
        raise ValueError(f"output_dim must be one of {config.matryoshka_dims}, got {output_dim!r}")


def cut_and_normalize(embeddings: torch.Tensor, output_dim: int | None, normalize: bool = True) -> torch.Tensor:
    """Matryoshka cut to the first `output_dim` coordinates (`None`: all), then L2 normalisation; zero rows stay zero.

    >>> cut_and_normalize(torch.tensor([[3.0, 4.0, 12.0]]), 2).tolist()
    [[0.6000000238418579, 0.800000011920929]]
    """
    if output_dim is not None:
        embeddings = embeddings[..., :output_dim]
    return nn.functional.normalize(embeddings, p=2, dim=-1) if normalize else embeddings


def late_chunk_head(
    sums: torch.Tensor,
    counts: torch.Tensor,
    chunk_mask: torch.Tensor,
    config: ContextEmbedConfig,
    *,
    projection: nn.Module | None = None,
    output_dim: int | None = None,
    normalize: bool | None = None,
) -> torch.Tensor:
    """Per-chunk sums (B, C, W) and token counts (B, C) -> chunk vectors (B, C, D), in fp32.

    The mean of each chunk's states, the projection when it was not applied to the sums already (`projection`; a
    linear map without bias commutes with the mean), the head's activation (`config.head_activation`: none, or
    tanh), the Matryoshka cut (default `config.output_dim`), L2 normalisation (default `config.normalize`) and zero
    rows for padding chunks. The torch model and the exported backends both end here, so a backend is only a core
    that produces the sums and counts.

    >>> config = ContextEmbedConfig(text_config={"model_type": "bert", "hidden_size": 2})
    >>> sums, counts = torch.tensor([[[6.0, 8.0], [0.0, 0.0]]]), torch.tensor([[2.0, 0.0]])
    >>> late_chunk_head(sums, counts, torch.tensor([[1, 0]]), config).tolist()
    [[[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]]
    """
    check_output_dim(config, output_dim)
    pooled = chunk_means(sums, counts)  # (B, C, W)
    if projection is not None:
        weight = next(projection.parameters(), pooled)
        pooled = projection(pooled.to(weight.dtype)).float()  # (B, C, D)
    if config.head_activation == "tanh":
        pooled = torch.tanh(pooled)  # elementwise, so a Matryoshka cut of it is the cut of the full vector's
    embeddings = cut_and_normalize(pooled, config.output_dim if output_dim is None else output_dim,
                                   config.normalize if normalize is None else normalize)
    return embeddings * chunk_mask.unsqueeze(-1).to(embeddings.dtype)


def packed_call(
    backbone: nn.Module,
    input_ids: torch.LongTensor,
    token_mask: torch.Tensor,
    chunk_ids: torch.LongTensor,
    num_chunks: int,
    token_type_ids: torch.LongTensor | None = None,
    *,
    block_mask: bool = True,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A padded batch (b, t) run as one packed row of its real tokens (1, n), no padding: each document's positions
    restart at 0, and it attends only to itself (with `block_mask`, through a block-diagonal mask; without, the
    attention must find the documents from the positions, as flash attention's variable-length kernel does).
    Returns the chunk sums (b, num_chunks, H) and counts (b, num_chunks), as a padded call would.

    Pooling stays one call: document `i`'s chunk `c` is slot `i * num_chunks + c` of the packed row.
    """
    batch = input_ids.shape[0]
    keep = token_mask.bool()  # (b, t)
    lengths = keep.sum(1)  # (b,)
    rows = torch.repeat_interleave(torch.arange(batch, device=input_ids.device), lengths)  # (n,) each token's document
    starts = torch.cumsum(lengths, 0) - lengths  # (b,)
    positions = torch.arange(len(rows), device=input_ids.device) - starts[rows]  # (n,) restart per document
    cids = chunk_ids[keep]  # (n,)
    slots = torch.where(cids >= 0, cids + rows * num_chunks, -1)[None]  # (1, n)
    extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids[keep][None]}
    mask = None
    if block_mask:
        dtype = backbone.get_input_embeddings().weight.dtype
        same = rows[:, None] == rows[None, :]  # (n, n) block diagonal: a document sees only itself
        mask = torch.zeros(same.shape, dtype=dtype, device=input_ids.device).masked_fill(
            ~same, torch.finfo(dtype).min)[None, None]  # (1, 1, n, n) additive, for sdpa and eager alike
    out = backbone(input_ids=input_ids[keep][None], attention_mask=mask, position_ids=positions[None], return_dict=True,
                   **extra, **kwargs)
    sums, counts = chunk_sums_and_counts(out.last_hidden_state, slots, batch * num_chunks)  # (1, b*C, H), (1, b*C)
    return sums.view(batch, num_chunks, -1), counts.view(batch, num_chunks)


# ------------------------------------------------------------------------------------------------------------------
# PreTrainedModel
# ------------------------------------------------------------------------------------------------------------------


def loading_problems(info: dict) -> str | None:
    """What `from_pretrained(..., output_loading_info=True)` found wrong with the weights, in one line, or `None`.

    >>> loading_problems({"missing_keys": ["b", "a"], "unexpected_keys": []})
    '2 missing keys (a, b)'
    """
    problems = {
        name: sorted(str(key) for key in info.get(name) or ())
        for name in ("missing_keys", "unexpected_keys", "mismatched_keys")
    }
    listed = [f"{len(keys)} {name.replace('_', ' ')} ({', '.join(keys[:3])}{', ...' if len(keys) > 3 else ''})"
              for name, keys in problems.items() if keys]
    return "; ".join(listed) or None


class ContextEmbedPreTrainedModel(PreTrainedModel):
    config_class = ContextEmbedConfig
    base_model_prefix = "backbone"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    # Strict: kept in fp32 for bf16 as well as fp16 backbones.
    _keep_in_fp32_modules_strict = ["projection"]
    _supports_sdpa = True
    _supports_flash_attn = True
    _supports_flex_attn = True
    _supports_attention_backend = True

    def _init_weights(self, module):
        from transformers import initialization as init

        if isinstance(module, nn.Linear) and module is getattr(self, "projection", None):
            init.orthogonal_(module.weight)
        else:
            super()._init_weights(module)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """`PreTrainedModel.from_pretrained`, strict: missing, unexpected or mismatched weights are an error, and
        weights are read from safetensors only.

        A checkpoint whose config disagrees with its weights (say 3 layers in `config.json`, 6 in the file)
        would otherwise load as a different, partly random model with only a log line to show for it.
        """
        from safetensors import SafetensorError

        return_info = kwargs.pop("output_loading_info", False)
        kwargs.setdefault("use_safetensors", True)  # never unpickle weights: a pickle can run code
        try:
            model, info = super().from_pretrained(pretrained_model_name_or_path, *args, output_loading_info=True,
                                                  **kwargs)
        except SafetensorError as error:
            raise ValueError(
                f"cannot read the weights of {str(pretrained_model_name_or_path)!r} (model.safetensors is damaged "
                f"or truncated): {error}"
            ) from error
        problems = loading_problems(info)
        if problems:
            raise ValueError(
                f"the weights of {str(pretrained_model_name_or_path)!r} do not match its config.json: {problems}"
            )
        return (model, info) if return_info else model


# ------------------------------------------------------------------------------------------------------------------
# Model
# ------------------------------------------------------------------------------------------------------------------


class ContextEmbedModel(ContextEmbedPreTrainedModel):
    """A backbone run once per document, followed by late-chunking mean pooling and an fp32 projection."""

    def __init__(self, config: ContextEmbedConfig):
        super().__init__(config)
        self.backbone = AutoModel.from_config(config.text_config)
        hidden_size = config.text_config.hidden_size
        if config.projection_dim is None:
            self.projection = nn.Identity()
        else:
            self.projection = nn.Linear(hidden_size, config.projection_dim, bias=False)
        self.post_init()

    def get_input_embeddings(self):
        return self.backbone.get_input_embeddings()

    def set_input_embeddings(self, value):
        self.backbone.set_input_embeddings(value)

    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        token_attention_mask: torch.Tensor | None = None,
        chunk_ids: torch.LongTensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        output_dim: int | None = None,
        normalize: bool | None = None,
        max_seq_length: torch.Tensor | int | None = None,
        pack: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> ContextEmbedOutput | tuple:
        r"""
        attention_mask (`torch.Tensor` of shape `(batch_size, num_chunks)`, *optional*):
            The chunk mask. Read as a token mask `(batch_size, seq_len)` when `chunk_ids` is not given (see
            `chunk_layout`).
        token_attention_mask (`torch.Tensor` of shape `(batch_size, seq_len)`, *optional*):
            1 for real tokens, 0 for padding.
        chunk_ids (`torch.LongTensor` of shape `(batch_size, seq_len)`, *optional*):
            Chunk index of each token, -1 for tokens of no chunk. Derived from separators when absent.
        output_dim (`int`, *optional*):
            Matryoshka size for this call; defaults to `config.output_dim` (or the full size).
        normalize (`bool`, *optional*):
            L2-normalise the chunk vectors; defaults to `config.normalize`.
        max_seq_length (`int` or `torch.Tensor` of shape `(batch_size,)`, *optional*):
            Tokens per forward pass for this call (the processor passes it on), at most `config.max_seq_length`.
            Longer documents run in windows of this many tokens; nothing is ever cut.
        pack (`bool`, *optional*):
            Run a ragged batch as one packed row, no padding: each document keeps its own positions and attends only
            to itself (`packed_call`). `None` (the default) packs when the backbone runs flash attention, whose
            variable-length kernel takes packed rows as they are; `True` packs on any attention (sdpa and eager get
            a block-diagonal mask); `False` pads.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        token_mask, chunk_ids, chunk_mask = chunk_layout(self.config, input_ids, attention_mask,
                                                         token_attention_mask, chunk_ids)
        window = window_length(self.config, max_seq_length)
        first = {}  # the first call's outputs: the output's states when that call is the whole batch

        packing = self._packs() if pack is None else pack
        if self._packs() and self.config.bidirectional:
            # Flash attention reads causality from the layer (decoders set it), not from a mask: say it per call.
            kwargs.setdefault("is_causal", False)

        def core(ids, mask, cids, num_chunks, type_ids):
            if first:  # a second call: the batch runs in windows, whose states are not kept (memory stays bounded)
                first["out"] = None
            if packing and ids.shape[0] > 1 and not bool(mask.all()):
                first.setdefault("out", None)  # a packed call's states are one row, not the batch's
                return packed_call(self.backbone, ids, mask, cids, num_chunks, type_ids,
                                   block_mask=not self._packs(), **kwargs)
            out = self._run_backbone(ids, mask, type_ids, output_hidden_states=output_hidden_states, **kwargs)
            first.setdefault("out", out)
            return chunk_sums_and_counts(out.last_hidden_state, cids, num_chunks)  # (b, c, H), (b, c)

        sums, counts, whole_batch = late_chunk_sums(
            core, input_ids, token_mask, chunk_ids, chunk_mask.shape[1], window,
            width=self.config.text_config.hidden_size, window_head_tokens=self.config.window_head_tokens,
            overlap=self.config.window_overlap, pad_id=pad_token_id(self.config), token_type_ids=token_type_ids,
        )  # (B, C, H), (B, C)
        embeddings = late_chunk_head(sums, counts, chunk_mask, self.config, projection=self.projection,
                                     output_dim=output_dim, normalize=normalize)  # (B, C, D)
        whole = first.get("out") if whole_batch else None
        output = ContextEmbedOutput(
            chunk_embeddings=embeddings,
            chunk_mask=chunk_mask,
            last_hidden_state=whole.last_hidden_state if whole is not None else None,
            hidden_states=getattr(whole, "hidden_states", None),
        )
        return output if return_dict else output.to_tuple()

    def _packs(self) -> bool:
        """Whether the backbone's attention takes packed rows natively (flash attention's variable-length kernel,
        which reads each document's extent from where its positions restart)."""
        return str(getattr(self.config.text_config, "_attn_implementation", "")).startswith("flash_attention")

    def _run_backbone(self, input_ids, token_attention_mask, token_type_ids=None, **kwargs):
        # An all-ones mask is dropped: sdpa then runs maskless instead of materialising (B, 1, T, T).
        mask = None if bool(token_attention_mask.all()) else token_attention_mask
        extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        return self.backbone(input_ids=input_ids, attention_mask=mask, return_dict=True, **extra, **kwargs)


__all__ = [
    "MAX_INDEX_ELEMENTS",
    "ContextEmbedModel",
    "ContextEmbedOutput",
    "ContextEmbedPreTrainedModel",
    "check_output_dim",
    "chunk_ids_from_separators",
    "chunk_layout",
    "chunk_means",
    "chunk_sums_and_counts",
    "cut_and_normalize",
    "index_slices",
    "late_chunk_head",
    "late_chunk_mean",
    "loading_problems",
    "packed_call",
    "pad_token_id",
    "special_token_ids",
    "window_length",
]
