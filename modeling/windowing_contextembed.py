"""Long documents: windows, and the one scheduler of backbone calls.

A document longer than the window (`config.max_seq_length`) runs as windows whose edges fall on chunk boundaries;
consecutive windows overlap by `config.window_overlap` of a window, and the document's first `window_head_tokens`
tokens (the window head) are carried into every later window as context. Each chunk is pooled from the window that
gives it the most context on both sides, so there is always exactly one vector per chunk; a chunk longer than a
window is split into pieces pooled in their own windows and averaged over all of its tokens.

The backbone's calls, of whole documents and of windows alike, are planned by `token_budget_batches`: rows sorted by
length and cut where padded tokens plus a fixed cost per call are fewest, within a token budget.

Tokens processed per document token: one pass is 1; windows of `W` tokens carrying a head of `h` tokens, whose
bodies overlap by a fraction `o`, process about `W / ((W - h)·(1 - o))` times a long document's tokens
(`window_cost`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import NamedTuple

import torch

# A backbone call over windows holds at most this many windows' worth of padded tokens.
WINDOWS_PER_CALL = 8


def window_cost(window: int, overlap: float, window_head_tokens: int = 0) -> float:
    """Tokens processed per token of a long document run in windows (its length far above the window's).

    >>> window_cost(512, 0.5), round(window_cost(512, 0.5, 48), 2), round(window_cost(512, 0.125, 48), 2)
    (2.0, 2.21, 1.26)
    """
    return window / ((window - window_head_tokens) * (1 - overlap))


def plan_windows(
    piece_spans: list[tuple[int, int]], length: int, budget: int, overlap: float
) -> tuple[list[tuple[int, int]], list[int]]:
    """Cover `length` tokens with windows of at most `budget` tokens whose edges fall on piece edges; consecutive
    windows share about `overlap` of the budget.

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
    run_starts = change.nonzero().flatten()
    kept = body_cids[run_starts] >= 0  # runs of tokens in no chunk (separators) are no piece
    bounds = torch.cat([run_starts, torch.tensor([len(body_cids)])]).tolist()
    spans = []
    for s, e, keep in zip(bounds[:-1], bounds[1:], kept.tolist()):
        if not keep:
            continue
        if e - s <= budget:  # the common case: a chunk is one piece
            spans.append((s, e))
            continue
        n_pieces = -(-(e - s) // budget)
        edges = [s + (e - s) * k // n_pieces for k in range(n_pieces + 1)]
        spans.extend(zip(edges[:-1], edges[1:]))
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
    first_owned: dict[int, int] = {}  # window -> the start of the first piece it pools
    for (s, _), owner in zip(spans, owners):
        first_owned.setdefault(owner, s)
    # Each body token's owner window (-1: in no piece), found by one search instead of a slice assignment per piece.
    starts, ends = torch.tensor(spans).T.contiguous()  # (P,), (P,): some chunk has a token, so a piece exists
    position = torch.arange(len(body_cids))
    piece = torch.searchsorted(ends, position, right=True).clamp(max=len(spans) - 1)  # the first piece ending after
    inside = (starts[piece] <= position) & (position < ends[piece])
    token_owner = torch.where(inside, torch.tensor(owners)[piece], -1)

    result = []
    for w, (ws, we) in enumerate(windows):
        if w not in first_owned:
            continue  # every piece here is pooled from a window with more context around it
        offset = int(body_cids[first_owned[w]])
        pooled = torch.where(token_owner[ws:we] == w, body_cids[ws:we] - offset, -1)
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
) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """Each chunk's summed states (B, C, width) and token count (B, C) for a padded batch, whatever its lengths, and
    whether the batch ran as one call (every row within `window`: the one place the choice is made).

    `core(input_ids, token_mask, chunk_ids, num_chunks, token_type_ids)` runs one padded batch and returns its
    `(sums (b, num_chunks, width), counts (b, num_chunks))`, as `chunk_sums_and_counts` computes them. A batch whose
    rows all fit `window` tokens runs in one call. Otherwise the short rows and every long row's windows
    (`plan_pieces`) run together in the calls `token_budget_batches` plans, the scheduler of whole documents too (at
    most `WINDOWS_PER_CALL` windows' worth of padded tokens a call), so a row's last, short window runs beside other
    short pieces instead of padded to its full neighbours. Each chunk is pooled from one piece, so sums and counts
    only add zeros across pieces, and any linear map of the states (the projection) may be applied inside `core` or
    after the division. The same plan serves the torch model and the exported backends, which differ only in `core`.
    """
    batch = input_ids.shape[0]
    lengths = token_mask.sum(1)  # (B,)
    if bool((lengths <= window).all()):  # the common case: one call, no copies
        seq_len = int(lengths.max()) if batch else 0
        sums, counts = core(input_ids[:, :seq_len], token_mask[:, :seq_len], chunk_ids[:, :seq_len], num_chunks,
                            None if token_type_ids is None else token_type_ids[:, :seq_len])
        return sums, counts, True

    pieces = plan_pieces(input_ids, lengths, chunk_ids, window, window_head_tokens=window_head_tokens,
                         overlap=overlap, token_type_ids=token_type_ids)
    sums = torch.zeros(batch, num_chunks, width, dtype=torch.float32, device=input_ids.device)  # (B, C, W)
    counts = torch.zeros(batch, num_chunks, dtype=torch.float32, device=input_ids.device)  # (B, C)
    lengths = [len(p.input_ids) for p in pieces]
    for call in token_budget_batches(lengths, batch_size=len(pieces), max_tokens=WINDOWS_PER_CALL * window):
        group = [pieces[i] for i in call]
        ids, mask, cids, num_local, types = pad_pieces(group, pad_id)
        piece_sums, piece_counts = core(ids, mask, cids, num_local, types)  # (n, c, W), (n, c)
        add_piece_sums(sums, counts, group, piece_sums, piece_counts)
    return sums, counts, False


def token_budget_batches(lengths: list[int], batch_size: int, max_tokens: int,
                         pass_tokens: int | None = None) -> list[list[int]]:
    """Group indices into forward passes that cost the least: rows sorted by length (longest first) and cut where
    the padded tokens plus a fixed cost per pass are fewest, each pass at most `batch_size` rows and `max_tokens`
    padded tokens (a row longer than `max_tokens` forms a pass of its own). The one scheduler: of whole documents (the
    encoder, the server's batcher, training) and of a long document's windows (`late_chunk_sums`).

    `pass_tokens` is what one more pass costs, in padded tokens (default `max_tokens // 32`: 64 on CPU, where a pass
    costs about 13 ms beyond its tokens and a token about 0.2 ms). Filling each pass greedily instead pads badly when
    there are few rows of scattered lengths (a server's merged requests): 4 recipes documents at a time padded to 1.4
    times their tokens greedily, 1.1 times cut this way. Dynamic programming over the sorted order, checked against
    brute force in the tests.

    >>> token_budget_batches([5, 100, 7, 6], batch_size=8, max_tokens=21, pass_tokens=4)
    [[1], [2, 3, 0]]
    >>> token_budget_batches([20, 100, 58, 60, 18], batch_size=8, max_tokens=200, pass_tokens=10)  # greedy: [1, 3], [2, 0, 4]
    [[1], [3, 2], [0, 4]]
    """
    if pass_tokens is None:
        pass_tokens = max(1, max_tokens // 32)
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    # cost[j]: the cheapest way to run the first j rows of `order`; a pass order[i:j] pads to lengths[order[i]].
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


__all__ = [
    "WINDOWS_PER_CALL",
    "Piece",
    "add_piece_sums",
    "chunk_pieces",
    "document_windows",
    "late_chunk_sums",
    "pad_pieces",
    "plan_pieces",
    "plan_windows",
    "token_budget_batches",
    "window_cost",
]
