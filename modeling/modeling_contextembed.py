"""Contextual chunk embeddings by late chunking.

A document is an ordered list of chunks joined by a learned separator token. The whole document
runs through the backbone **once**; each chunk's vector is the mean of its tokens' final hidden
states, followed by an fp32 linear projection, the head's activation (none, or tanh), a Matryoshka
cut and L2 normalisation. Every chunk vector has therefore seen the whole document, yet there is
still exactly one vector per chunk.

The file reads in the order a batch travels:

1. **Inputs**: the token mask, each token's chunk and the chunk mask, from whichever form the batch came in.
2. **Windows**: documents longer than the window (`config.max_seq_length`) run as overlapping windows whose
   edges fall on chunk boundaries; each chunk is pooled from the window that gives it the most context on both
   sides (with the document's first `window_head_tokens` carried into every later window as context), so there
   is always exactly one vector per chunk. A chunk longer than a window is split into pieces pooled in their
   own windows and averaged over all of its tokens.
3. **Backbone**: any transformers model, run bidirectionally.
4. **Pooling**: each chunk's summed token states and token count, in fp32, with shapes fixed by the number of
   chunk slots (no data-dependent shapes, so the pooling exports to ONNX).
5. **Head**: mean, projection, activation, Matryoshka cut, normalisation, padding mask.

Feature names follow what sentence-transformers' built-in `Transformer` module hands over:
`attention_mask` is the **chunk** mask (B, C), `token_attention_mask` the token mask (B, T) and
`chunk_ids` (B, T) gives each token's chunk index, -1 for tokens that belong to no chunk
(special tokens, separators, prefixes, padding). Without `chunk_ids`, chunks are derived from the
separator ids and `attention_mask` is read as the token mask.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn
from transformers import AutoModel, PreTrainedModel
from transformers.utils import ModelOutput

from .configuration_contextembed import ContextEmbedConfig, is_integer

# A backbone call over windows holds at most this many windows' worth of padded tokens.
WINDOWS_PER_CALL = 8
# A piece joins a call of longer pieces when padding it costs at most this many tokens: half of what one more call
# costs on a CPU (about 64 tokens' time). Simulated on batches of windows and short rows, this pads 1.7% over the
# tokens at 4096-token windows and 8% at 512, against 1.6% and 7.4% for the cheapest possible calls.
CALL_SLACK_TOKENS = 32
# Kernels index with 32-bit integers unless told otherwise; the pooling's scatter never exceeds this many elements.
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


def window_length(config: ContextEmbedConfig, max_seq_length: torch.Tensor | int | None = None) -> int:
    """Tokens per forward pass for one call: `config.max_seq_length`, or less when the caller asks for less."""
    if max_seq_length is None:
        return config.max_seq_length
    return min(config.max_seq_length, int(torch.as_tensor(max_seq_length).max()))


# ------------------------------------------------------------------------------------------------------------------
# Windows
# ------------------------------------------------------------------------------------------------------------------


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


def chunk_pieces(body_cids: torch.Tensor, budget: int) -> list[tuple[int, int]]:
    """`(start, end)` of each run of one chunk's tokens, a run longer than `budget` split evenly.

    >>> chunk_pieces(torch.tensor([0, 0, 0, 0, 0, -1, 1, 1]), budget=3)
    [(0, 2), (2, 5), (6, 8)]
    """
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
    return spans


def document_windows(
    ids: torch.Tensor, cids: torch.Tensor, window: int, *, window_head_tokens: int, overlap: float
) -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    """Cut one unpadded document into windows that pool something.

    Returns `(window ids, local chunk ids, offset)` per window: a pooled token's chunk is `offset + local id`;
    tokens of pieces owned by another window are context only (-1). `window_head_tokens`: the document's opening
    tokens carried into every later window (the window head), never pooled there.
    """
    in_chunk = (cids >= 0).nonzero().flatten()
    if len(in_chunk) == 0:
        return []  # no chunk has a token (all empty): nothing to pool
    first, last = int(in_chunk[0]), int(in_chunk[-1]) + 1
    lead, tail = slice(0, first), slice(last, len(ids))  # CLS, prefix, title / final special tokens
    body_ids, body_cids = ids[first:last], cids[first:last]
    window_head = min(window_head_tokens, len(body_ids))  # as many as the body has
    budget = window - first - (len(ids) - last) - window_head
    if budget <= 0:
        raise ValueError(
            f"{first + len(ids) - last} tokens that belong to no chunk (special tokens, the prefix, the title) "
            f"and window_head_tokens={window_head} leave no room for the document's text in a window of "
            f"{window} tokens: shorten the title or prefix, or raise max_seq_length"
        )

    spans = chunk_pieces(body_cids, budget)
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
        carried = min(window_head, ws)  # window head tokens this window lacks, as unpooled context
        w_ids = torch.cat([ids[lead], body_ids[:carried], body_ids[ws:we], ids[tail]])
        w_cids = torch.cat(
            [cids[lead], torch.full_like(body_cids[:carried], -1), pooled, torch.full_like(cids[tail], -1)]
        )
        result.append((w_ids, w_cids, offset))
    return result


class Piece(NamedTuple):
    """What one row of a backbone call holds: a whole short document or one window of a long one."""

    row: int  # the batch row it came from
    input_ids: torch.Tensor  # (t,)
    chunk_ids: torch.Tensor  # (t,) local chunk ids: a pooled token's chunk is `offset + local id`
    token_type_ids: torch.Tensor | None  # (t,), or None for the backbone's default (windows run with zeros)
    offset: int


def plan_pieces(
    input_ids: torch.LongTensor,
    lengths: torch.Tensor,
    chunk_ids: torch.LongTensor,
    window: int,
    *,
    window_head_tokens: int,
    overlap: float,
    token_type_ids: torch.LongTensor | None = None,
) -> list[Piece]:
    """Every row that fits `window` as one piece, every longer row as its windows (`document_windows`)."""
    pieces = []
    for row in (lengths <= window).nonzero().flatten().tolist():
        length = int(lengths[row])
        types = None if token_type_ids is None else token_type_ids[row, :length]
        pieces.append(Piece(row, input_ids[row, :length], chunk_ids[row, :length], types, 0))
    for row in (lengths > window).nonzero().flatten().tolist():
        length = int(lengths[row])
        for w_ids, w_cids, offset in document_windows(input_ids[row, :length], chunk_ids[row, :length], window,
                                                      window_head_tokens=window_head_tokens, overlap=overlap):
            pieces.append(Piece(row, w_ids, w_cids, None, offset))
    return pieces


def calls_by_length(lengths: list[int], max_tokens: int, slack: int = CALL_SLACK_TOKENS) -> list[list[int]]:
    """Indices of pieces grouped into backbone calls of similar lengths, longest first: a piece joins the current
    call while it is at most `slack` tokens shorter than the call's longest and the call stays within `max_tokens`
    padded tokens (a piece longer than that forms a call of its own).

    >>> calls_by_length([50, 10, 48, 12, 50], max_tokens=120, slack=4)
    [[0, 4], [2], [3, 1]]
    """
    calls: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        if calls:
            longest = lengths[calls[-1][0]]
            if longest - lengths[i] <= slack and longest * (len(calls[-1]) + 1) <= max_tokens:
                calls[-1].append(i)
                continue
        calls.append([i])
    return calls


def pad_pieces(
    pieces: list[Piece], pad_id: int
) -> tuple[torch.LongTensor, torch.Tensor, torch.LongTensor, int, torch.LongTensor | None]:
    """One call's pieces right-padded: ids (n, t), token mask (n, t), local chunk ids (n, t; -1 on padding), the
    number of local chunk slots, and token types (n, t) when any piece has them."""
    length = max(len(p.input_ids) for p in pieces)
    num_local = max([int(p.chunk_ids.max()) + 1 for p in pieces if len(p.chunk_ids)] + [1])
    ids = pieces[0].input_ids.new_full((len(pieces), length), pad_id)  # (n, t)
    cids = pieces[0].chunk_ids.new_full((len(pieces), length), -1)  # (n, t)
    mask = torch.zeros_like(ids)  # (n, t)
    typed = [p.token_type_ids for p in pieces if p.token_type_ids is not None]
    types = typed[0].new_zeros((len(pieces), length)) if typed else None
    for i, piece in enumerate(pieces):
        n = len(piece.input_ids)
        ids[i, :n], cids[i, :n], mask[i, :n] = piece.input_ids, piece.chunk_ids, 1
        if piece.token_type_ids is not None:
            types[i, :n] = piece.token_type_ids
    return ids, mask, cids, num_local, types


def add_piece_sums(
    sums: torch.Tensor, counts: torch.Tensor, pieces: list[Piece], piece_sums: torch.Tensor,
    piece_counts: torch.Tensor,
) -> None:
    """Scatter one call's sums (n, c, W) and counts (n, c) back into the batch's (B, C, W) and (B, C), in place, at
    each piece's row and chunk offset."""
    num_chunks, num_local = sums.shape[1], piece_sums.shape[1]
    for i, piece in enumerate(pieces):
        take = min(num_local, num_chunks - piece.offset)
        sums[piece.row, piece.offset : piece.offset + take] += piece_sums[i, :take].to(sums.device)
        counts[piece.row, piece.offset : piece.offset + take] += piece_counts[i, :take].to(counts.device)


def late_chunk_sums(
    core,
    input_ids: torch.LongTensor,
    token_mask: torch.Tensor,
    chunk_ids: torch.LongTensor,
    num_chunks: int,
    window: int,
    *,
    width: int,
    window_head_tokens: int,
    overlap: float,
    pad_id: int,
    token_type_ids: torch.LongTensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each chunk's summed states (B, C, width) and token count (B, C) for a padded batch, whatever its lengths.

    `core(input_ids, token_mask, chunk_ids, num_chunks, token_type_ids)` runs one padded batch and returns its
    `(sums (b, num_chunks, width), counts (b, num_chunks))`, as `chunk_sums_and_counts` computes them. A batch whose
    rows all fit `window` tokens runs in one call. Otherwise the short rows and every long row's windows
    (`plan_pieces`) run together in calls of similar lengths (`calls_by_length`, at most `WINDOWS_PER_CALL`
    windows' worth of padded tokens a call), so a row's last, short window runs beside other short pieces instead
    of padded to its full neighbours. Each chunk is pooled from one piece, so sums and counts only add zeros across
    pieces, and any linear map of the states (the projection) may be applied inside `core` or after the division.
    The same plan serves the torch model and the exported backends, which differ only in `core`.
    """
    batch = input_ids.shape[0]
    lengths = token_mask.sum(1)  # (B,)
    if bool((lengths <= window).all()):  # the common case: one call, no copies
        seq_len = int(lengths.max()) if batch else 0
        return core(input_ids[:, :seq_len], token_mask[:, :seq_len], chunk_ids[:, :seq_len], num_chunks,
                    None if token_type_ids is None else token_type_ids[:, :seq_len])

    pieces = plan_pieces(input_ids, lengths, chunk_ids, window, window_head_tokens=window_head_tokens,
                         overlap=overlap, token_type_ids=token_type_ids)
    sums = torch.zeros(batch, num_chunks, width, dtype=torch.float32, device=input_ids.device)  # (B, C, W)
    counts = torch.zeros(batch, num_chunks, dtype=torch.float32, device=input_ids.device)  # (B, C)
    for call in calls_by_length([len(p.input_ids) for p in pieces], WINDOWS_PER_CALL * window):
        group = [pieces[i] for i in call]
        ids, mask, cids, num_local, types = pad_pieces(group, pad_id)
        piece_sums, piece_counts = core(ids, mask, cids, num_local, types)  # (n, c, W), (n, c)
        add_piece_sums(sums, counts, group, piece_sums, piece_counts)
    return sums, counts


# ------------------------------------------------------------------------------------------------------------------
# Backbone
# ------------------------------------------------------------------------------------------------------------------


def pad_token_id(config: ContextEmbedConfig) -> int:
    """The id that pads window batches: the backbone's pad token, else 0 (padding is masked either way)."""
    pad = getattr(config.text_config, "pad_token_id", None)
    return pad if isinstance(pad, int) else 0


# ------------------------------------------------------------------------------------------------------------------
# Pooling
# ------------------------------------------------------------------------------------------------------------------


def index_slices(batch: int, seq_len: int, hidden: int, limit: int = MAX_INDEX_ELEMENTS) -> list[slice]:
    """Slices of the hidden dimension such that a scatter over (batch, seq_len, slice) indexes at most `limit`
    elements. Hidden dimensions are pooled independently, so pooling slice by slice gives the same bits.

    >>> index_slices(2, 1000, 64, limit=50_000)
    [slice(0, 25, None), slice(25, 50, None), slice(50, 64, None)]
    >>> index_slices(1, 262_144, 4096)  # a 262,144-token pass of the 9B: 2^30 elements, one scatter
    [slice(0, 4096, None)]
    """
    per_dim = batch * seq_len  # the counts' scatter indexes this many: it must fit on its own
    if per_dim > limit:
        raise ValueError(
            f"a batch of {batch} x {seq_len} tokens is more than {limit} positions, past what the pooling's "
            "scatter can index: run fewer or shorter rows per call (lower max_tokens_per_batch or max_seq_length)"
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

    Tokens with chunk id -1 go to a discarded slot, so the computation has no data-dependent shapes. The scatter
    never indexes more than `max_index_elements` at once (`index_slices`): at 2^31 elements a 32-bit index would
    wrap, so a large pass is pooled a slice of hidden dimensions at a time, with the same result.

    >>> h = torch.tensor([[[1.0], [3.0], [5.0], [7.0]]])       # (B=1, T=4, H=1)
    >>> ids = torch.tensor([[-1, 0, 0, 1]])
    >>> sums, counts = chunk_sums_and_counts(h, ids, num_chunks=3)
    >>> sums.squeeze(-1).tolist(), counts.tolist()
    ([[8.0, 7.0, 0.0]], [[2.0, 1.0, 0.0]])
    """
    batch, seq_len, hidden = hidden_states.shape
    slots = (chunk_ids.long() + 1).clamp(min=0)  # (B, T); slot 0 collects tokens outside chunks
    sums = hidden_states.new_zeros(batch, num_chunks + 1, hidden, dtype=torch.float32)  # (B, C + 1, H)
    # A graph being exported keeps one scatter: a branch on its symbolic shape would fix the graph to one size, and
    # the runtimes it is exported for (ONNX Runtime, OpenVINO) index with 64-bit integers.
    parts = [slice(0, hidden)] if torch.compiler.is_compiling() else index_slices(batch, seq_len, hidden,
                                                                                   max_index_elements)
    for part in parts:
        width = part.stop - part.start
        index = slots.unsqueeze(-1).expand(batch, seq_len, width)  # (B, T, h)
        sums[..., part].scatter_add_(1, index, hidden_states[..., part].float())
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
        token_mask, chunk_ids, chunk_mask = chunk_layout(self.config, input_ids, attention_mask,
                                                         token_attention_mask, chunk_ids)
        window = window_length(self.config, max_seq_length)
        whole_batch = bool((token_mask.sum(1) <= window).all())
        outputs = []

        def core(ids, mask, cids, num_chunks, type_ids):
            out = self._run_backbone(ids, mask, type_ids, output_hidden_states=output_hidden_states if whole_batch
                                     else None, **kwargs)
            if whole_batch:  # one call, whose states the output returns; windows' outputs are not kept
                outputs.append(out)
            return chunk_sums_and_counts(out.last_hidden_state, cids, num_chunks)  # (b, c, H), (b, c)

        sums, counts = late_chunk_sums(
            core, input_ids, token_mask, chunk_ids, chunk_mask.shape[1], window,
            width=self.config.text_config.hidden_size, window_head_tokens=self.config.window_head_tokens,
            overlap=self.config.window_overlap, pad_id=pad_token_id(self.config), token_type_ids=token_type_ids,
        )  # (B, C, H), (B, C)
        embeddings = late_chunk_head(sums, counts, chunk_mask, self.config, projection=self.projection,
                                     output_dim=output_dim, normalize=normalize)  # (B, C, D)
        whole = outputs[0] if whole_batch and outputs else None
        output = ContextEmbedOutput(
            chunk_embeddings=embeddings,
            chunk_mask=chunk_mask,
            last_hidden_state=whole.last_hidden_state if whole is not None else None,
            hidden_states=getattr(whole, "hidden_states", None),
        )
        return output if return_dict else output.to_tuple()

    def _run_backbone(self, input_ids, token_attention_mask, token_type_ids=None, **kwargs):
        # An all-ones mask is dropped: sdpa then runs maskless instead of materialising (B, 1, T, T).
        mask = None if bool(token_attention_mask.all()) else token_attention_mask
        extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        return self.backbone(input_ids=input_ids, attention_mask=mask, return_dict=True, **extra, **kwargs)


__all__ = [
    "CALL_SLACK_TOKENS",
    "MAX_INDEX_ELEMENTS",
    "WINDOWS_PER_CALL",
    "ContextEmbedModel",
    "ContextEmbedOutput",
    "ContextEmbedPreTrainedModel",
    "Piece",
    "add_piece_sums",
    "calls_by_length",
    "check_output_dim",
    "chunk_ids_from_separators",
    "chunk_layout",
    "chunk_means",
    "chunk_pieces",
    "chunk_sums_and_counts",
    "cut_and_normalize",
    "document_windows",
    "index_slices",
    "late_chunk_head",
    "late_chunk_mean",
    "late_chunk_sums",
    "loading_problems",
    "pad_pieces",
    "pad_token_id",
    "plan_pieces",
    "plan_windows",
    "special_token_ids",
    "window_length",
]
