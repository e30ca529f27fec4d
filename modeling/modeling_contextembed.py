"""Contextual chunk embeddings by late chunking.

A document is an ordered list of chunks joined by a learned separator token. The whole document
runs through the backbone **once**; each chunk's vector is the mean of its tokens' final hidden
states, followed by an fp32 linear projection, a Matryoshka cut and L2 normalisation. Every chunk
vector has therefore seen the whole document, yet there is still exactly one vector per chunk.

Documents longer than the window (`config.window_length`) are run as overlapping windows whose
edges fall on chunk boundaries; each chunk is pooled from the window that gives it the most
context on both sides, so there is always exactly one vector per chunk. A chunk longer than a
window is split into pieces pooled in their own windows and averaged over all of its tokens.

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

from .configuration_contextembed import ContextEmbedConfig


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


def chunk_sums_and_counts(
    hidden_states: torch.Tensor, chunk_ids: torch.Tensor, num_chunks: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum and count each chunk's token states, in fp32, with shapes fixed by `num_chunks`.

    Tokens with chunk id -1 go to a discarded slot, so the computation has no data-dependent shapes.

    >>> h = torch.tensor([[[1.0], [3.0], [5.0], [7.0]]])       # (B=1, T=4, H=1)
    >>> ids = torch.tensor([[-1, 0, 0, 1]])
    >>> sums, counts = chunk_sums_and_counts(h, ids, num_chunks=3)
    >>> sums.squeeze(-1).tolist(), counts.tolist()
    ([[8.0, 7.0, 0.0]], [[2.0, 1.0, 0.0]])
    """
    batch, seq_len, hidden = hidden_states.shape
    slots = (chunk_ids.long() + 1).clamp(min=0)  # (B, T); slot 0 collects tokens outside chunks
    sums = hidden_states.new_zeros(batch, num_chunks + 1, hidden, dtype=torch.float32)
    sums.scatter_add_(1, slots.unsqueeze(-1).expand(batch, seq_len, hidden), hidden_states.float())
    counts = hidden_states.new_zeros(batch, num_chunks + 1, dtype=torch.float32)
    counts.scatter_add_(1, slots, torch.ones_like(slots, dtype=torch.float32))
    return sums[:, 1:], counts[:, 1:]  # (B, C, H), (B, C)


def late_chunk_mean(hidden_states: torch.Tensor, chunk_ids: torch.Tensor, num_chunks: int) -> torch.Tensor:
    """Mean of each chunk's token states, (B, T, H) -> (B, C, H) in fp32; an empty chunk is a zero row.

    >>> h = torch.tensor([[[1.0], [3.0], [5.0], [7.0]]])
    >>> late_chunk_mean(h, torch.tensor([[-1, 0, 0, 1]]), num_chunks=3).squeeze(-1).tolist()
    [[4.0, 7.0, 0.0]]
    """
    sums, counts = chunk_sums_and_counts(hidden_states, chunk_ids, num_chunks)
    return sums / counts.clamp(min=1.0).unsqueeze(-1)


def plan_windows(
    piece_spans: list[tuple[int, int]], length: int, budget: int, overlap: float
) -> tuple[list[tuple[int, int]], list[int]]:
    """Cover `length` tokens with windows of at most `budget` tokens whose edges fall on piece edges.

    Args:
        piece_spans: `(start, end)` of each piece, sorted, non-overlapping, each at most `budget` long.
        length: total number of tokens to cover.
        budget: tokens per window.
        overlap: fraction of a window shared with the next one.

    Returns:
        The windows as `(start, end)` and, for each piece, the index of the window that gives it the most
        context on both sides (a side that reaches the document's edge counts as complete).

    >>> plan_windows([(0, 2), (2, 4), (4, 6)], length=6, budget=4, overlap=0.5)
    ([(0, 4), (2, 6)], [0, 0, 1])
    """
    starts = sorted({0, *(s for s, _ in piece_spans)})  # windows start at a piece's first token ...
    ends = sorted({length, *(e for _, e in piece_spans)})  # ... and end after a piece's last token
    stride_back = int(budget * overlap)

    def reach(start: int) -> int:
        return max(e for e in ends if e <= start + budget)

    windows: list[tuple[int, int]] = []
    start = 0
    while True:
        end = reach(start)
        windows.append((start, end))
        if end >= length:
            break
        # Step back from the end by the overlap, but always move forward and always cover new tokens.
        start = next(s for s in starts if s > start and s >= end - stride_back and reach(s) > end)

    best: list[int] = []
    for s, e in piece_spans:
        scores = []
        for w, (ws, we) in enumerate(windows):
            if ws <= s and e <= we:
                left = float("inf") if ws == 0 else s - ws
                right = float("inf") if we == length else we - e
                scores.append((min(left, right), left + right, -w))
        best.append(-max(scores)[2])
    return windows, best


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


class ContextEmbedModel(ContextEmbedPreTrainedModel):
    """A backbone run once per document, followed by late-chunking mean pooling and an fp32 projection."""

    def __init__(self, config: ContextEmbedConfig):
        super().__init__(config)
        self.backbone = AutoModel.from_config(config.text_config)
        hidden_size = config.text_config.hidden_size
        if config.embedding_dim is None:
            self.projection = nn.Identity()
        else:
            self.projection = nn.Linear(hidden_size, config.embedding_dim, bias=False)
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
        window_length: torch.Tensor | int | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> ContextEmbedOutput | tuple:
        r"""
        attention_mask (`torch.Tensor` of shape `(batch_size, num_chunks)`, *optional*):
            The chunk mask. Read as a token mask `(batch_size, seq_len)` when `chunk_ids` is not given.
        token_attention_mask (`torch.Tensor` of shape `(batch_size, seq_len)`, *optional*):
            1 for real tokens, 0 for padding.
        chunk_ids (`torch.LongTensor` of shape `(batch_size, seq_len)`, *optional*):
            Chunk index of each token, -1 for tokens of no chunk. Derived from separators when absent.
        output_dim (`int`, *optional*):
            Matryoshka size for this call; defaults to `config.output_dim` (or the full size).
        normalize (`bool`, *optional*):
            L2-normalise the chunk vectors; defaults to `config.normalize`.
        window_length (`int` or `torch.Tensor` of shape `(batch_size,)`, *optional*):
            Tokens per forward pass for this call (the processor's `max_length`), capped by `config.window_length`.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        chunk_mask = attention_mask
        if chunk_ids is None:
            token_attention_mask = attention_mask if token_attention_mask is None else token_attention_mask
            chunk_ids = self.chunk_ids_from_separators(input_ids, token_attention_mask)
            chunk_mask = None
        if chunk_mask is None:
            # Chunks 0..max per row: the padding chunks of shorter rows are masked out.
            num_chunks = int(chunk_ids.max().clamp(min=0)) + 1
            chunk_mask = torch.arange(num_chunks, device=input_ids.device) <= chunk_ids.max(1, keepdim=True).values
        num_chunks = chunk_mask.shape[1]
        if token_attention_mask is None:
            token_attention_mask = torch.ones_like(input_ids)
        chunk_mask = chunk_mask.long()

        lengths = token_attention_mask.sum(1)  # (B,)
        window = self.config.window_length
        if window_length is not None:
            window = min(window, int(torch.as_tensor(window_length).max()))
        hidden = None
        all_hidden = None
        if bool((lengths <= window).all()):
            seq_len = int(lengths.max())
            backbone_out = self._run_backbone(
                input_ids[:, :seq_len],
                token_attention_mask[:, :seq_len],
                None if token_type_ids is None else token_type_ids[:, :seq_len],
                output_hidden_states=output_hidden_states,
                **kwargs,
            )
            hidden = backbone_out.last_hidden_state  # (B, T, H)
            all_hidden = getattr(backbone_out, "hidden_states", None)
            sums, counts = chunk_sums_and_counts(hidden, chunk_ids[:, :seq_len], num_chunks)
        else:
            sums, counts = self._windowed_sums_and_counts(
                input_ids, token_attention_mask, token_type_ids, chunk_ids, num_chunks, window, **kwargs
            )
        pooled = sums / counts.clamp(min=1.0).unsqueeze(-1)  # (B, C, H), fp32
        embeddings = self.project(pooled, output_dim=output_dim, normalize=normalize)  # (B, C, D)
        embeddings = embeddings * chunk_mask.unsqueeze(-1).to(embeddings.dtype)

        output = ContextEmbedOutput(
            chunk_embeddings=embeddings,
            chunk_mask=chunk_mask,
            last_hidden_state=hidden,
            hidden_states=all_hidden,
        )
        return output if return_dict else output.to_tuple()

    def project(
        self, pooled: torch.Tensor, output_dim: int | None = None, normalize: bool | None = None
    ) -> torch.Tensor:
        """fp32 projection, Matryoshka cut, then L2 normalisation: (..., H) -> (..., D)."""
        output_dim = output_dim if output_dim is not None else self.config.output_dim
        if output_dim is not None and output_dim not in self.config.allowed_dims:
            raise ValueError(f"output_dim must be one of {self.config.allowed_dims}, got {output_dim!r}")
        normalize = self.config.normalize if normalize is None else normalize
        projection_dtype = next(self.projection.parameters(), pooled).dtype
        embeddings = self.projection(pooled.to(projection_dtype)).float()
        if output_dim is not None:
            embeddings = embeddings[..., :output_dim]
        if normalize:
            embeddings = nn.functional.normalize(embeddings, p=2, dim=-1)
        return embeddings

    def chunk_ids_from_separators(
        self, input_ids: torch.LongTensor, token_attention_mask: torch.Tensor | None
    ) -> torch.LongTensor:
        """Chunk index per token from separator ids; special tokens, separators and padding get -1."""
        separator = self.config.chunk_token_id
        if separator is None:
            raise ValueError("config.chunk_token_id is not set: pass chunk_ids or build the checkpoint with a separator")
        is_separator = input_ids == separator
        chunk_ids = is_separator.long().cumsum(1)  # (B, T)
        special = is_separator.clone()
        for token_id in self._special_token_ids():
            special |= input_ids == token_id
        if token_attention_mask is not None:
            special |= token_attention_mask == 0
        return chunk_ids.masked_fill(special, -1)

    def _special_token_ids(self) -> list[int]:
        ids = set(self.config.ignore_token_ids)
        for config in (self.config, self.config.text_config):
            for name in ("bos_token_id", "eos_token_id", "cls_token_id", "sep_token_id", "pad_token_id"):
                token_id = getattr(config, name, None)
                if isinstance(token_id, int):
                    ids.add(token_id)
        return sorted(ids)

    def _run_backbone(self, input_ids, token_attention_mask, token_type_ids=None, **kwargs):
        # An all-ones mask is dropped: sdpa then runs maskless instead of materialising (B, 1, T, T).
        mask = None if bool(token_attention_mask.all()) else token_attention_mask
        extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        return self.backbone(input_ids=input_ids, attention_mask=mask, return_dict=True, **extra, **kwargs)

    def _windowed_sums_and_counts(
        self, input_ids, token_attention_mask, token_type_ids, chunk_ids, num_chunks, window, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor]:
        batch, _ = input_ids.shape
        hidden_size = self.config.text_config.hidden_size
        sums = torch.zeros(batch, num_chunks, hidden_size, dtype=torch.float32, device=input_ids.device)
        counts = torch.zeros(batch, num_chunks, dtype=torch.float32, device=input_ids.device)
        lengths = token_attention_mask.sum(1)

        short_rows = (lengths <= window).nonzero().flatten()
        if len(short_rows):
            seq_len = int(lengths[short_rows].max())
            out = self._run_backbone(
                input_ids[short_rows, :seq_len],
                token_attention_mask[short_rows, :seq_len],
                None if token_type_ids is None else token_type_ids[short_rows, :seq_len],
                **kwargs,
            )
            row_sums, row_counts = chunk_sums_and_counts(
                out.last_hidden_state, chunk_ids[short_rows, :seq_len], num_chunks
            )
            sums[short_rows], counts[short_rows] = row_sums, row_counts

        for row in (lengths > window).nonzero().flatten().tolist():
            length = int(lengths[row])
            windows = self._document_windows(input_ids[row, :length], chunk_ids[row, :length], window)
            for first in range(0, len(windows), 8):  # at most 8 windows per backbone call bounds memory
                group = windows[first : first + 8]
                group_len = max(len(ids) for ids, _ in group)
                ids = input_ids.new_full((len(group), group_len), self._pad_id())
                cids = chunk_ids.new_full((len(group), group_len), -1)
                mask = token_attention_mask.new_zeros((len(group), group_len))
                for i, (w_ids, w_cids) in enumerate(group):
                    ids[i, : len(w_ids)], cids[i, : len(w_ids)], mask[i, : len(w_ids)] = w_ids, w_cids, 1
                out = self._run_backbone(ids, mask, **kwargs)
                w_sums, w_counts = chunk_sums_and_counts(out.last_hidden_state, cids, num_chunks)
                sums[row] += w_sums.sum(0)
                counts[row] += w_counts.sum(0)
        return sums, counts

    def _document_windows(
        self, ids: torch.Tensor, cids: torch.Tensor, window: int
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Cut one unpadded document into windows; pooled tokens are those of pieces assigned to the window."""
        in_chunk = (cids >= 0).nonzero().flatten()
        first, last = int(in_chunk[0]), int(in_chunk[-1]) + 1
        lead, tail = slice(0, first), slice(last, len(ids))  # CLS, prefix, title / final special tokens
        body_ids, body_cids = ids[first:last], cids[first:last]
        head = min(self.config.window_head_tokens, len(body_ids))
        budget = window - first - (len(ids) - last) - head
        if budget <= 0:
            raise ValueError(
                f"the prefix, title and special tokens ({window - budget - head} tokens with window_head_tokens="
                f"{head}) leave no room in a window of {window} tokens"
            )

        # Pieces: runs of one chunk's tokens, split evenly when longer than a window.
        change = torch.ones(len(body_cids), dtype=torch.bool)
        change[1:] = body_cids[1:] != body_cids[:-1]
        starts = change.nonzero().flatten().tolist() + [len(body_cids)]
        spans = []
        for s, e in zip(starts[:-1], starts[1:]):
            if int(body_cids[s]) < 0:
                continue
            n_pieces = -(-(e - s) // budget)
            bounds = [s + (e - s) * k // n_pieces for k in range(n_pieces + 1)]
            spans.extend(zip(bounds[:-1], bounds[1:]))
        windows, assigned = plan_windows(spans, len(body_ids), budget, self.config.window_overlap)

        result = []
        for w, (ws, we) in enumerate(windows):
            pooled = torch.full_like(body_cids[ws:we], -1)
            for (s, e), owner in zip(spans, assigned):
                if owner == w:
                    pooled[s - ws : e - ws] = body_cids[s:e]
            carry = min(head, ws)  # opening tokens this window lacks, as unpooled context
            w_ids = torch.cat([ids[lead], body_ids[:carry], body_ids[ws:we], ids[tail]])
            w_cids = torch.cat(
                [cids[lead], torch.full_like(body_cids[:carry], -1), pooled, torch.full_like(cids[tail], -1)]
            )
            result.append((w_ids, w_cids))
        return result

    def _pad_id(self) -> int:
        pad = getattr(self.config.text_config, "pad_token_id", None)
        return pad if isinstance(pad, int) else 0


__all__ = [
    "ContextEmbedModel",
    "ContextEmbedOutput",
    "ContextEmbedPreTrainedModel",
    "chunk_sums_and_counts",
    "late_chunk_mean",
    "plan_windows",
]
