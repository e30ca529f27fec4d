"""Contextual chunk embeddings by late chunking.

A document is an ordered list of chunks joined by a learned separator token. The whole document
runs through the backbone **once**; each chunk's vector is the mean of its tokens' final hidden
states, followed by an fp32 linear projection, a Matryoshka cut and L2 normalisation. Every chunk
vector has therefore seen the whole document, yet there is still exactly one vector per chunk.

Documents longer than the window (`config.max_seq_length`) are run as overlapping windows whose
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

from bisect import bisect_left, bisect_right
from dataclasses import dataclass

import torch
from torch import nn
from transformers import AutoModel, PreTrainedModel
from transformers.utils import ModelOutput

from .configuration_contextembed import ContextEmbedConfig, is_integer


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


def chunk_means(sums: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Sums (B, C, W) over counts (B, C) -> means (B, C, W); a chunk with no tokens is a zero row.

    >>> chunk_means(torch.tensor([[[8.0], [0.0]]]), torch.tensor([[2.0, 0.0]])).squeeze(-1).tolist()
    [[4.0, 0.0]]
    """
    return sums / counts.clamp(min=1.0).unsqueeze(-1)


def mix_document_mean(means: torch.Tensor, sums: torch.Tensor, counts: torch.Tensor, weight: float) -> torch.Tensor:
    """Each non-empty chunk's mean (B, C, W) moved toward its document's mean: `(1 - weight) * chunk + weight * doc`.

    The document's mean is over every token of every chunk (sums and counts added over the chunks), so in a document
    run in windows every chunk also carries what the other windows read, and memory stays that of the sums. A
    one-chunk document (a query) is unchanged; a chunk with no tokens stays a zero row.

    >>> sums, counts = torch.tensor([[[6.0], [4.0], [0.0]]]), torch.tensor([[3.0, 1.0, 0.0]])  # means 2 and 4
    >>> mix_document_mean(chunk_means(sums, counts), sums, counts, 0.5).squeeze(-1).tolist()  # document: 10 / 4
    [[2.25, 3.25, 0.0]]
    >>> mix_document_mean(chunk_means(sums, counts), sums, counts, 0.0).squeeze(-1).tolist()
    [[2.0, 4.0, 0.0]]
    """
    if not weight:
        return means
    document = sums.sum(1, keepdim=True) / counts.sum(1, keepdim=True).clamp(min=1.0).unsqueeze(-1)  # (B, 1, W)
    mixed = (1.0 - weight) * means + weight * document
    return torch.where((counts > 0).unsqueeze(-1), mixed, means)


def late_chunk_mean(hidden_states: torch.Tensor, chunk_ids: torch.Tensor, num_chunks: int) -> torch.Tensor:
    """Mean of each chunk's token states, (B, T, H) -> (B, C, H) in fp32; an empty chunk is a zero row.

    >>> h = torch.tensor([[[1.0], [3.0], [5.0], [7.0]]])
    >>> late_chunk_mean(h, torch.tensor([[-1, 0, 0, 1]]), num_chunks=3).squeeze(-1).tolist()
    [[4.0, 7.0, 0.0]]
    """
    return chunk_means(*chunk_sums_and_counts(hidden_states, chunk_ids, num_chunks))


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
        context on both sides (a side that reaches the document's edge counts as complete). Time is
        O(pieces log pieces), whatever the number of windows.

    >>> plan_windows([(0, 2), (2, 4), (4, 6)], length=6, budget=4, overlap=0.5)
    ([(0, 4), (2, 6)], [0, 0, 1])
    """
    starts = sorted({0, *(s for s, _ in piece_spans)})  # windows start at a piece's first token ...
    ends = sorted({length, *(e for _, e in piece_spans)})  # ... and end after a piece's last token
    stride_back = int(budget * overlap)

    windows: list[tuple[int, int]] = []
    start = 0
    while True:
        end = ends[bisect_right(ends, start + budget) - 1]  # the furthest piece edge within the budget
        windows.append((start, end))
        if end >= length:
            break
        # The next window steps back from this end by the overlap, but always moves forward and reaches the
        # next piece edge (so it covers new tokens); the piece ending there is at most `budget` long, so its
        # start qualifies and the search always succeeds.
        next_end = ends[bisect_right(ends, end)]
        start = starts[bisect_left(starts, max(start + 1, end - stride_back, next_end - budget))]

    window_starts = [ws for ws, _ in windows]
    window_ends = [we for _, we in windows]
    best: list[int] = []
    for s, e in piece_spans:
        # Windows are sorted by both edges, so those containing the piece are one contiguous run.
        candidates = range(bisect_left(window_ends, e), bisect_right(window_starts, s))
        scores = []
        for w in candidates:
            ws, we = windows[w]
            left = float("inf") if ws == 0 else s - ws
            right = float("inf") if we == length else we - e
            scores.append((min(left, right), left + right, -w))
        best.append(-max(scores)[2])
    return windows, best


def token_budget_batches(lengths: list[int], batch_size: int, max_tokens: int,
                         pass_tokens: int | None = None) -> list[list[int]]:
    """Group indices into forward passes that cost the least: documents sorted by length (longest first) and cut
    where the padded tokens plus a fixed cost per pass are fewest, each pass at most `batch_size` documents and
    `max_tokens` padded tokens (a document longer than `max_tokens` forms a pass of its own).

    `pass_tokens` is what one more pass costs, in padded tokens (default `max_tokens // 32`: 64 on CPU, where a pass
    costs about 13 ms beyond its tokens and a token about 0.2 ms). Filling each pass greedily instead pads badly when
    there are few documents of scattered lengths (a server's merged requests): 4 recipes documents at a time padded
    to 1.4 times their tokens greedily, 1.1 times cut this way.

    >>> token_budget_batches([5, 100, 7, 6], batch_size=8, max_tokens=21, pass_tokens=4)
    [[1], [2, 3, 0]]
    >>> token_budget_batches([20, 100, 58, 60, 18], batch_size=8, max_tokens=200, pass_tokens=10)  # greedy: [1, 3], [2, 0, 4]
    [[1], [3, 2], [0, 4]]
    """
    if pass_tokens is None:
        pass_tokens = max(1, max_tokens // 32)
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    # cost[j]: the cheapest way to run the first j documents of `order`; a pass order[i:j] pads to lengths[order[i]].
    cost, cut = [0] + [0] * len(order), [0] * (len(order) + 1)
    for j in range(1, len(order) + 1):
        best = None
        for i in range(j - 1, max(j - batch_size, 0) - 1, -1):  # the pass order[i:j], shortest first
            size = j - i
            if size > 1 and lengths[order[i]] * size > max_tokens:
                break  # a longer pass only pads more
            total = cost[i] + lengths[order[i]] * size + pass_tokens
            if best is None or total <= best:
                best, cut[j] = total, i
        cost[j] = best
    batches, j = [], len(order)
    while j:
        batches.append(order[cut[j] : j])
        j = cut[j]
    return batches[::-1]


def late_chunk_sums(
    core,
    input_ids: torch.LongTensor,
    token_mask: torch.Tensor,
    chunk_ids: torch.LongTensor,
    num_chunks: int,
    window: int,
    *,
    width: int,
    head_tokens: int,
    overlap: float,
    pad_id: int,
    token_type_ids: torch.LongTensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each chunk's summed states and token count for a padded batch, whatever the documents' lengths.

    `core(input_ids, token_mask, chunk_ids, num_chunks, token_type_ids)` runs one padded batch and returns its
    `(sums (b, num_chunks, width), counts (b, num_chunks))`, as `chunk_sums_and_counts` computes them. A batch whose
    rows all fit `window` tokens runs in one call. Otherwise each longer row is cut into windows on chunk
    boundaries, each chunk pooled from the window that gives it the most context, with the row's first
    `head_tokens` chunk tokens carried as context; the short rows and all the windows then run together in calls of
    similar lengths (`token_budget_batches`, at most 8 windows' worth of padded tokens a call), so a row's last,
    short window runs beside other short pieces instead of padded to its full neighbours. Each chunk is pooled from one piece, so sums and counts only add zeros
    across pieces, and any linear map of the states (the projection) may be applied inside `core` or after the
    division. The same plan serves the torch model and the exported backends, which differ only in `core`.
    """
    batch = input_ids.shape[0]
    lengths = token_mask.sum(1)  # (B,)
    short = (lengths <= window).nonzero().flatten()
    if len(short) == batch:  # the common case: one call, no copies
        seq_len = int(lengths.max()) if batch else 0
        return core(input_ids[:, :seq_len], token_mask[:, :seq_len], chunk_ids[:, :seq_len], num_chunks,
                    None if token_type_ids is None else token_type_ids[:, :seq_len])

    # Pieces (row, ids, local chunk ids, token types, offset): a pooled token's chunk is offset + local id.
    pieces = []
    for row in short.tolist():
        length = int(lengths[row])
        types = None if token_type_ids is None else token_type_ids[row, :length]
        pieces.append((row, input_ids[row, :length], chunk_ids[row, :length], types, 0))
    for row in (lengths > window).nonzero().flatten().tolist():
        length = int(lengths[row])
        ids, cids = input_ids[row, :length], chunk_ids[row, :length]
        for w_ids, w_cids, offset in document_windows(ids, cids, window, head_tokens=head_tokens, overlap=overlap):
            pieces.append((row, w_ids, w_cids, None, offset))  # windows run with the default (zero) token types
    sums = torch.zeros(batch, num_chunks, width, dtype=torch.float32, device=input_ids.device)
    counts = torch.zeros(batch, num_chunks, dtype=torch.float32, device=input_ids.device)
    # Calls of similar lengths, at most 8 windows' worth of padded tokens each (a call costs about 64 tokens more).
    for call in token_budget_batches([len(p_ids) for _, p_ids, _, _, _ in pieces], batch_size=len(pieces),
                                     max_tokens=8 * window, pass_tokens=64):
        group = [pieces[i] for i in call]
        group_len = len(group[0][1])  # longest first
        num_local = max([int(p_cids.max()) + 1 for _, _, p_cids, _, _ in group if len(p_cids)] + [1])
        batch_ids = input_ids.new_full((len(group), group_len), pad_id)
        batch_cids = chunk_ids.new_full((len(group), group_len), -1)
        mask = torch.zeros_like(batch_ids)
        types = None
        if any(p_types is not None for _, _, _, p_types, _ in group):
            types = token_type_ids.new_zeros((len(group), group_len))
        for i, (_, p_ids, p_cids, p_types, _) in enumerate(group):
            batch_ids[i, : len(p_ids)], batch_cids[i, : len(p_ids)], mask[i, : len(p_ids)] = p_ids, p_cids, 1
            if p_types is not None:
                types[i, : len(p_ids)] = p_types
        p_sums, p_counts = core(batch_ids, mask, batch_cids, num_local, types)  # (<=8, c, width), (<=8, c)
        for i, (row, _, _, _, offset) in enumerate(group):
            take = min(num_local, num_chunks - offset)
            sums[row, offset : offset + take] += p_sums[i, :take].to(sums.device)
            counts[row, offset : offset + take] += p_counts[i, :take].to(counts.device)
    return sums, counts


def document_windows(
    ids: torch.Tensor, cids: torch.Tensor, window: int, *, head_tokens: int, overlap: float
) -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    """Cut one unpadded document into windows that pool something.

    Returns `(window ids, local chunk ids, offset)` per window: a pooled token's chunk is `offset + local id`;
    tokens of pieces owned by another window are context only (-1).
    """
    in_chunk = (cids >= 0).nonzero().flatten()
    if len(in_chunk) == 0:
        return []  # no chunk has a token (all empty): nothing to pool
    first, last = int(in_chunk[0]), int(in_chunk[-1]) + 1
    lead, tail = slice(0, first), slice(last, len(ids))  # CLS, prefix, title / final special tokens
    body_ids, body_cids = ids[first:last], cids[first:last]
    head = min(head_tokens, len(body_ids))
    budget = window - first - (len(ids) - last) - head
    if budget <= 0:
        raise ValueError(
            f"{first + len(ids) - last} tokens that belong to no chunk (special tokens, the prefix, the title) "
            f"and window_head_tokens={head} leave no room for the document's text in a window of {window} "
            "tokens: shorten the title or prefix, or raise max_seq_length"
        )

    # Pieces: runs of one chunk's tokens, split evenly when longer than a window.
    change = torch.ones(len(body_cids), dtype=torch.bool)
    change[1:] = body_cids[1:] != body_cids[:-1]
    run_starts = change.nonzero().flatten().tolist() + [len(body_cids)]
    spans = []
    for s, e in zip(run_starts[:-1], run_starts[1:]):
        if int(body_cids[s]) < 0:
            continue
        n_pieces = -(-(e - s) // budget)
        bounds = [s + (e - s) * k // n_pieces for k in range(n_pieces + 1)]
        spans.extend(zip(bounds[:-1], bounds[1:]))
    windows, owners = plan_windows(spans, len(body_ids), budget, overlap)
    owned: list[list[tuple[int, int]]] = [[] for _ in windows]
    for span, owner in zip(spans, owners):
        owned[owner].append(span)

    result = []
    for (ws, we), pieces in zip(windows, owned):
        if not pieces:
            continue  # every piece here is pooled from a window with more context around it
        offset = int(body_cids[pieces[0][0]])
        pooled = torch.full_like(body_cids[ws:we], -1)
        for s, e in pieces:
            pooled[s - ws : e - ws] = body_cids[s:e] - offset
        carry = min(head, ws)  # opening tokens this window lacks, as unpooled context
        w_ids = torch.cat([ids[lead], body_ids[:carry], body_ids[ws:we], ids[tail]])
        w_cids = torch.cat(
            [cids[lead], torch.full_like(body_cids[:carry], -1), pooled, torch.full_like(cids[tail], -1)]
        )
        result.append((w_ids, w_cids, offset))
    return result


def check_output_dim(config: ContextEmbedConfig, output_dim) -> None:
    """`output_dim` must be `None` or one of the checkpoint's Matryoshka sizes."""
    if output_dim is not None and not (is_integer(output_dim) and output_dim in config.allowed_dims):
        raise ValueError(f"output_dim must be one of {config.allowed_dims}, got {output_dim!r}")


def cut_and_normalize(embeddings: torch.Tensor, output_dim: int | None, normalize: bool = True) -> torch.Tensor:
    """Matryoshka cut to the first `output_dim` coordinates (`None`: all), then L2 normalisation; zero rows stay zero.

    >>> cut_and_normalize(torch.tensor([[3.0, 4.0, 12.0]]), 2).tolist()
    [[0.6000000238418579, 0.800000011920929]]
    """
    if output_dim is not None:
        embeddings = embeddings[..., :output_dim]
    return nn.functional.normalize(embeddings, p=2, dim=-1) if normalize else embeddings


def window_length(config: ContextEmbedConfig, max_seq_length: torch.Tensor | int | None = None) -> int:
    """Tokens per forward pass for one call: `config.max_seq_length`, or less when the caller asks for less."""
    if max_seq_length is None:
        return config.max_seq_length
    return min(config.max_seq_length, int(torch.as_tensor(max_seq_length).max()))


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

    The mean of each chunk's states (moved toward its document's mean by `config.document_mix`), the projection
    when it was not applied to the sums already (`projection`; a linear map without bias commutes with the mean and
    the mix), the Matryoshka cut (default `config.output_dim`), L2
    normalisation (default `config.normalize`) and zero rows for padding chunks. The torch model and the exported
    backends both end here, so a backend is only a core that produces the sums and counts.

    >>> config = ContextEmbedConfig(text_config={"model_type": "bert", "hidden_size": 2})
    >>> sums, counts = torch.tensor([[[6.0, 8.0], [0.0, 0.0]]]), torch.tensor([[2.0, 0.0]])
    >>> late_chunk_head(sums, counts, torch.tensor([[1, 0]]), config).tolist()
    [[[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]]
    """
    check_output_dim(config, output_dim)
    pooled = mix_document_mean(chunk_means(sums, counts), sums, counts, config.document_mix)  # (B, C, W)
    if projection is not None:
        weight = next(projection.parameters(), pooled)
        pooled = projection(pooled.to(weight.dtype)).float()  # (B, C, D)
    embeddings = cut_and_normalize(pooled, config.output_dim if output_dim is None else output_dim,
                                   config.normalize if normalize is None else normalize)
    return embeddings * chunk_mask.unsqueeze(-1).to(embeddings.dtype)


def pad_token_id(config: ContextEmbedConfig) -> int:
    """The id that pads window batches: the backbone's pad token, else 0 (padding is masked either way)."""
    pad = getattr(config.text_config, "pad_token_id", None)
    return pad if isinstance(pad, int) else 0


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
        max_seq_length: torch.Tensor | int | None = None,
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
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        token_mask, chunk_ids, chunk_mask = self.chunk_layout(input_ids, attention_mask, token_attention_mask,
                                                              chunk_ids)
        window = window_length(self.config, max_seq_length)
        whole_batch = bool((token_mask.sum(1) <= window).all())
        outputs = []

        def core(ids, mask, cids, num_chunks, type_ids):
            out = self._run_backbone(ids, mask, type_ids, output_hidden_states=output_hidden_states if whole_batch
                                     else None, **kwargs)
            if whole_batch:  # one call, whose states the output returns; windows' outputs are not kept
                outputs.append(out)
            return chunk_sums_and_counts(out.last_hidden_state, cids, num_chunks)

        sums, counts = late_chunk_sums(
            core, input_ids, token_mask, chunk_ids, chunk_mask.shape[1], window,
            width=self.config.text_config.hidden_size, head_tokens=self.config.window_head_tokens,
            overlap=self.config.window_overlap, pad_id=pad_token_id(self.config), token_type_ids=token_type_ids,
        )
        hidden = outputs[0].last_hidden_state if whole_batch and outputs else None
        all_hidden = getattr(outputs[0], "hidden_states", None) if whole_batch and outputs else None
        embeddings = late_chunk_head(sums, counts, chunk_mask, self.config, projection=self.projection,
                                     output_dim=output_dim, normalize=normalize)  # (B, C, D)

        output = ContextEmbedOutput(
            chunk_embeddings=embeddings,
            chunk_mask=chunk_mask,
            last_hidden_state=hidden,
            hidden_states=all_hidden,
        )
        return output if return_dict else output.to_tuple()

    def chunk_layout(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None,
        token_attention_mask: torch.Tensor | None,
        chunk_ids: torch.LongTensor | None,
    ) -> tuple[torch.Tensor, torch.LongTensor, torch.LongTensor]:
        """The token mask (B, T), chunk ids (B, T) and chunk mask (B, C) of a batch, from whichever form it came in.

        Two input forms exist because two callers exist. The processor (and sentence-transformers, which must
        find the chunk mask under `attention_mask` to trim and pool rows) sends `chunk_ids`, the token mask as
        `token_attention_mask` and the chunk mask as `attention_mask`. A plain transformers caller sends a
        tokenizer's output: no `chunk_ids`, and `attention_mask` is then the token mask; chunks are read from
        the separator ids.
        """
        if chunk_ids is None:
            token_mask = token_attention_mask if token_attention_mask is not None else attention_mask
            chunk_ids = self.chunk_ids_from_separators(input_ids, token_mask)
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



__all__ = [
    "ContextEmbedModel",
    "ContextEmbedOutput",
    "ContextEmbedPreTrainedModel",
    "check_output_dim",
    "chunk_means",
    "chunk_sums_and_counts",
    "cut_and_normalize",
    "document_windows",
    "late_chunk_head",
    "late_chunk_mean",
    "late_chunk_sums",
    "loading_problems",
    "mix_document_mean",
    "pad_token_id",
    "plan_windows",
    "token_budget_batches",
    "window_length",
]
