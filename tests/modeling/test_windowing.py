"""Documents longer than the window: overlapping windows on chunk boundaries, one vector per chunk."""

from __future__ import annotations

import copy

import pytest
import torch

from contextembed.modeling import plan_windows

WORDS = "the lease rent tenant street company she table row section rule date year revision".split()


def long_document(n_chunks: int, words_per_chunk: int = 5, seed: int = 0) -> list[str]:
    g = torch.Generator().manual_seed(seed)
    return [" ".join(WORDS[int(i)] for i in torch.randint(len(WORDS), (words_per_chunk,), generator=g))
            for _ in range(n_chunks)]


def run(model, processor, docs, **kwargs):
    batch = processor(docs, **kwargs)
    with torch.inference_mode():
        out = model(**batch)
    return [out.chunk_embeddings[i, : int(n)] for i, n in enumerate(batch["attention_mask"].sum(1))]


def reference_plan(spans, length, budget, overlap):
    """The windowing rule restated plainly (quadratic, from the docs): windows end at the furthest piece edge within
    the budget; the next starts at the first piece start past the previous start, no earlier than the overlap
    allows, that reaches a new edge; each piece goes to the containing window with the most context on its
    thinner side, then in all, then the earliest."""
    starts = sorted({0, *(s for s, _ in spans)})
    ends = sorted({length, *(e for _, e in spans)})

    def reach(start):
        return max(e for e in ends if e <= start + budget)

    windows, start = [], 0
    while True:
        end = reach(start)
        windows.append((start, end))
        if end >= length:
            break
        start = min(s for s in starts if s > start and s >= end - int(budget * overlap) and reach(s) > end)
    owners = []
    for s, e in spans:
        options = []
        for w, (ws, we) in enumerate(windows):
            if ws <= s and e <= we:
                left = float("inf") if ws == 0 else s - ws
                right = float("inf") if we == length else we - e
                options.append((min(left, right), left + right, -w))
        owners.append(-max(options)[2])
    return windows, owners


def oracle(model, processor, chunks, titles=None):
    """Each chunk's vector computed token by token: every planned window run alone through the backbone (its
    lead, carried opening and tail around it), each token pooled from the window that owns its piece."""
    row = processor.tokenize_documents([chunks], titles=titles)[0]
    ids, cids = torch.tensor(row["input_ids"]), torch.tensor(row["chunk_ids"])
    pooled = (cids >= 0).nonzero().flatten()
    first, last = int(pooled[0]), int(pooled[-1]) + 1
    lead, tail, body, body_cids = ids[:first], ids[last:], ids[first:last], cids[first:last]
    head = min(model.config.window_head_tokens, len(body))
    budget = model.config.max_seq_length - len(lead) - len(tail) - head
    spans, t = [], 0
    while t < len(body):
        end = t
        while end < len(body) and body_cids[end] == body_cids[t]:
            end += 1
        if body_cids[t] >= 0:
            n = -(-(end - t) // budget)
            spans += [(t + (end - t) * k // n, t + (end - t) * (k + 1) // n) for k in range(n)]
        t = end
    windows, owners = reference_plan(spans, len(body), budget, model.config.window_overlap)
    sums = torch.zeros(len(chunks), model.config.text_config.hidden_size)
    counts = torch.zeros(len(chunks))
    for w, (ws, we) in enumerate(windows):
        carry = min(head, ws)
        window_ids = torch.cat([lead, body[:carry], body[ws:we], tail])
        with torch.inference_mode():
            hidden = model.backbone(input_ids=window_ids[None]).last_hidden_state[0]
        for (s, e), owner in zip(spans, owners):
            if owner == w:
                for token in range(s, e):
                    sums[body_cids[token]] += hidden[len(lead) + carry + token - ws]
                    counts[body_cids[token]] += 1
    with torch.inference_mode():
        vectors = model.projection(sums / counts[:, None])
    dim = model.config.output_dim or vectors.shape[-1]
    return torch.nn.functional.normalize(vectors[:, :dim], dim=-1), len(windows)


class TestWindows:
    @pytest.mark.parametrize("overlap", [0.0, 0.5])  # the default, and the default of earlier releases
    def test_long_document_matches_window_oracle(self, model_and_processor, overlap):
        model, processor = model_and_processor
        model.config.window_overlap = overlap
        chunks = long_document(30)
        got = run(model, processor, [chunks])[0]
        expected, n_windows = oracle(model, processor, chunks)
        assert n_windows > 2
        assert got.shape == (30, 16)
        assert (got - expected).abs().max() <= 1e-5

    def test_document_that_fits_is_one_pass(self, model_and_processor):
        model, processor = model_and_processor
        chunks = long_document(4)
        batch = processor([chunks])
        assert batch["input_ids"].shape[1] <= model.config.max_seq_length
        with torch.inference_mode():
            assert model(**batch).last_hidden_state is not None

    def test_long_and_short_documents_in_one_batch(self, model_and_processor):
        model, processor = model_and_processor
        docs = [long_document(3, seed=1), long_document(40, seed=2), long_document(1, seed=3)]
        together = run(model, processor, docs)
        alone = [run(model, processor, [doc])[0] for doc in docs]
        assert [len(t) for t in together] == [3, 40, 1]
        for a, b in zip(together, alone):
            assert (a - b).abs().max() <= 1e-5

    def test_short_rows_and_windows_share_the_one_scheduler(self, model_and_processor):
        """A batch with long rows runs its short rows and every row's windows in the calls `token_budget_batches`
        plans (the scheduler of whole documents too): each row keeps its own vectors, no call exceeds 8 windows'
        worth of padded tokens, and the calls pad less than running each long row's windows apart and the short
        rows together."""
        from contextembed.modeling import document_windows, token_budget_batches

        model, processor = model_and_processor
        window = model.config.max_seq_length
        docs = [long_document(11, seed=1), long_document(8, seed=4), long_document(11, seed=2),
                long_document(2, seed=5), long_document(11, seed=3)]
        batch = processor(docs)
        lengths = batch["token_attention_mask"].sum(1).tolist()
        short = [n for n in lengths if n <= window]
        per_row = len(short) * max(short)  # the short rows in one call, each long row's windows in calls of 8
        for row, n in enumerate(lengths):
            if n > window:
                windows = document_windows(batch["input_ids"][row, :n], batch["chunk_ids"][row, :n], window,
                                           window_head_tokens=model.config.window_head_tokens,
                                           overlap=model.config.window_overlap)
                assert len(windows) >= 2
                per_row += sum(len(group) * max(len(ids) for ids, _, _ in group)
                               for group in (windows[i : i + 8] for i in range(0, len(windows), 8)))

        calls, run_backbone = [], model._run_backbone

        def recording(ids, *args, **kwargs):
            calls.append(ids.shape)
            return run_backbone(ids, *args, **kwargs)

        model._run_backbone = recording
        together = run(model, processor, docs)
        del model._run_backbone
        padded = sum(rows * length for rows, length in calls)
        assert all(rows * length <= 8 * window for rows, length in calls)
        pieces = [n for n in lengths if n <= window] + [
            len(ids) for row, n in enumerate(lengths) if n > window
            for ids, _, _ in document_windows(batch["input_ids"][row, :n], batch["chunk_ids"][row, :n], window,
                                              window_head_tokens=model.config.window_head_tokens,
                                              overlap=model.config.window_overlap)]
        planned = token_budget_batches(pieces, len(pieces), 8 * window)
        assert sorted(calls) == sorted((len(call), max(pieces[i] for i in call)) for call in planned)
        assert padded < per_row, (padded, per_row, calls)
        for vectors, doc in zip(together, docs):
            assert (vectors - run(model, processor, [doc])[0]).abs().max() <= 1e-5

    def test_windows_do_not_keep_the_backbone_outputs_of_earlier_calls(self, model_and_processor):
        """Memory is bounded by the window: by the time a windowed document's next call runs, the previous calls'
        backbone outputs are freed (keeping them all cost 4 MiB a call, 400 MiB at 100,000 chunks in the bench)."""
        import weakref

        model, processor = model_and_processor
        batch = processor([long_document(160, seed=6), long_document(150, seed=7)])
        earlier, alive_at_each_call, run_backbone = [], [], model._run_backbone

        def recording(*args, **kwargs):
            alive_at_each_call.append(sum(ref() is not None for ref in earlier))
            out = run_backbone(*args, **kwargs)
            earlier.append(weakref.ref(out.last_hidden_state))
            return out

        model._run_backbone = recording
        with torch.inference_mode():
            out = model(**batch)
        del model._run_backbone
        assert len(alive_at_each_call) > 2 and out.last_hidden_state is None
        assert alive_at_each_call == [0] * len(alive_at_each_call)

    def test_chunk_longer_than_a_window_is_split_and_averaged(self, model_and_processor):
        model, processor = model_and_processor
        chunks = ["short start", " ".join(long_document(1, words_per_chunk=150)[0].split()), "short end"]
        out = run(model, processor, [chunks])[0]
        expected, n_windows = oracle(model, processor, chunks)
        assert out.shape == (3, 16) and n_windows >= 3
        assert (out - expected).abs().max() <= 1e-5

    def test_windowed_chunks_keep_document_context(self, model_and_processor):
        model, processor = model_and_processor
        chunks = long_document(30)
        edited = chunks[:27] + ["she is the company"] + chunks[28:]
        a, b = run(model, processor, [chunks])[0], run(model, processor, [edited])[0]
        assert (a[26] - b[26]).abs().max() > 1e-4  # a neighbour in the same window sees the edit
        assert (a[0] - b[0]).abs().max() == 0  # a chunk whose window ends before the edit does not

    def test_head_tokens_carry_the_opening_into_later_windows(self, model_and_processor):
        model, processor = model_and_processor
        chunks = long_document(30)
        edited = ["she is the company"] + chunks[1:]
        without = [run(model, processor, [d])[0] for d in (chunks, edited)]
        assert (without[0][-1] - without[1][-1]).abs().max() == 0  # the last window never sees the opening

        carrying = copy.deepcopy(model)
        carrying.config.window_head_tokens = 6
        with_head = [run(carrying, processor, [d])[0] for d in (chunks, edited)]
        assert (with_head[0][-1] - with_head[1][-1]).abs().max() > 1e-4
        assert (with_head[0] - oracle(carrying, processor, chunks)[0]).abs().max() <= 1e-5

    def test_titles_are_in_every_window(self, model_and_processor):
        model, processor = model_and_processor
        chunks = long_document(30)
        a = run(model, processor, [chunks], titles=["lease of one street"])[0]
        b = run(model, processor, [chunks], titles=["table of a company"])[0]
        assert (a[-1] - b[-1]).abs().max() > 1e-4
        assert (a - oracle(model, processor, chunks, titles=["lease of one street"])[0]).abs().max() <= 1e-5


class TestPlan:
    @pytest.mark.parametrize("seed", range(20))
    def test_equals_the_plain_reference(self, seed):
        g = torch.Generator().manual_seed(seed)
        spans, position = [], 0
        for _ in range(int(torch.randint(1, 80, (1,), generator=g))):
            length = int(torch.randint(1, 20, (1,), generator=g))
            spans.append((position, position + length))
            position += length + int(torch.randint(0, 3, (1,), generator=g))
        budget = int(torch.randint(20, 64, (1,), generator=g))
        overlap = [0.0, 0.25, 0.5, 0.75][seed % 4]
        length = spans[-1][1]
        assert plan_windows(spans, length, budget, overlap) == reference_plan(spans, length, budget, overlap)

    def test_a_hundred_thousand_pieces_plan_quickly(self):
        spans = [(3 * i, 3 * i + 2) for i in range(100_000)]
        windows, owners = plan_windows(spans, spans[-1][1], 510, 0.5)  # quadratic would take minutes
        assert len(owners) == 100_000 and windows[-1][1] == spans[-1][1]

    @pytest.mark.parametrize("overlap", [0.0, 0.25, 0.5, 0.75])
    def test_every_piece_in_exactly_one_owner_window_that_contains_it(self, overlap):
        g = torch.Generator().manual_seed(1)
        spans, position = [], 0
        for _ in range(50):
            length = int(torch.randint(1, 12, (1,), generator=g))
            spans.append((position, position + length))
            position += length + 1
        windows, owner = plan_windows(spans, position - 1, 32, overlap)
        assert len(owner) == len(spans)
        for (s, e), w in zip(spans, owner):
            assert windows[w][0] <= s and e <= windows[w][1]
        assert all(we - ws <= 32 for ws, we in windows)
        assert windows[0][0] == 0 and windows[-1][1] == position - 1
        assert all(b[0] > a[0] and b[1] > a[1] for a, b in zip(windows, windows[1:]))


class TestSinglePassAt32k:
    def test_32768_tokens_in_one_pass_on_a_rope_backbone(self):
        from transformers import Qwen3Config

        from contextembed.modeling import ContextEmbedConfig, ContextEmbedModel

        text_config = Qwen3Config(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  num_key_value_heads=2, head_dim=8, intermediate_size=64,
                                  max_position_embeddings=32768)
        model = ContextEmbedModel(ContextEmbedConfig.reference(text_config, chunk_token_id=3)).eval()
        length = 32768
        ids = torch.randint(5, 100, (1, length))
        chunk_ids = torch.arange(length).div(256, rounding_mode="floor").unsqueeze(0)
        chunk_ids[:, 0] = chunk_ids[:, -1] = -1
        with torch.inference_mode():
            out = model(input_ids=ids, chunk_ids=chunk_ids)
        assert out.last_hidden_state is not None and out.last_hidden_state.shape[1] == length  # not windowed
        assert out.chunk_embeddings.shape == (1, 128, 2048)
        assert torch.isfinite(out.chunk_embeddings).all()
