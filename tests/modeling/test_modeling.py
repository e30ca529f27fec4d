"""Invariants of late chunking on tiny random BERT, ModernBERT and bidirectional Qwen3 backbones."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F
from transformers import AutoModel

from contextembed.modeling import ContextEmbedModel
from contextembed.modeling import chunk_sums_and_counts, late_chunk_mean

DOCS = [
    ["the lease is for one year", "rent is two", "she is the tenant", "the company pays"],
    "a single chunk",
    ["the table row", "the section rule"],
    ["one", "two", "three", "four", "five", "six"],
]


def encode(model, processor, docs, **kwargs):
    with torch.inference_mode():
        return model(**processor(docs, **kwargs))


def loop_mean(hidden, chunk_ids, num_chunks):
    """Oracle: a plain loop over tokens."""
    batch, _, size = hidden.shape
    out = torch.zeros(batch, num_chunks, size)
    for b in range(batch):
        for c in range(num_chunks):
            rows = [hidden[b, t] for t in range(hidden.shape[1]) if chunk_ids[b, t] == c]
            if rows:
                out[b, c] = torch.stack(rows).float().mean(0)
    return out


class TestShapesAndCounts:
    def test_one_row_per_chunk_mixed_batch(self, model_and_processor):
        model, processor = model_and_processor
        out = encode(model, processor, DOCS)
        assert out.chunk_embeddings.shape == (4, 6, 16)
        assert out.chunk_mask.sum(1).tolist() == [4, 1, 2, 6]
        norms = out.chunk_embeddings.norm(dim=-1)
        assert torch.allclose(norms[out.chunk_mask.bool()], torch.ones(13), atol=1e-5)
        assert torch.all(norms[~out.chunk_mask.bool()] == 0)

    @pytest.mark.parametrize("n_chunks", [1, 2, 3, 7])
    def test_chunk_count(self, model_and_processor, n_chunks):
        model, processor = model_and_processor
        out = encode(model, processor, [[f"chunk {i}" for i in range(n_chunks)]])
        assert out.chunk_embeddings.shape == (1, n_chunks, 16)

    def test_chunks_derived_from_separators_match(self, model_and_processor):
        model, processor = model_and_processor
        batch = processor(DOCS)
        with torch.inference_mode():
            full = model(**batch)
            derived = model(input_ids=batch["input_ids"], attention_mask=batch["token_attention_mask"])
        assert torch.allclose(full.chunk_embeddings, derived.chunk_embeddings, atol=1e-6)
        assert torch.equal(full.chunk_mask, derived.chunk_mask)


class TestLateChunkPoolInvariants:
    def test_pooling_matches_loop_oracle(self):
        hidden = torch.randn(3, 11, 5)
        chunk_ids = torch.randint(-1, 4, (3, 11))
        assert torch.allclose(late_chunk_mean(hidden, chunk_ids, 4), loop_mean(hidden, chunk_ids, 4), atol=1e-6)

    def test_pooling_in_fp32_for_bf16_states(self):
        hidden = torch.randn(2, 9, 4).bfloat16()
        chunk_ids = torch.randint(-1, 3, (2, 9))
        sums, counts = chunk_sums_and_counts(hidden, chunk_ids, 3)
        assert sums.dtype == torch.float32 and counts.dtype == torch.float32
        assert torch.allclose(late_chunk_mean(hidden, chunk_ids, 3), loop_mean(hidden.float(), chunk_ids, 3))

    def test_model_vectors_are_projected_chunk_means(self, model_and_processor):
        model, processor = model_and_processor
        batch = processor(DOCS)
        out = encode(model, processor, DOCS)
        num_chunks = batch["attention_mask"].shape[1]
        means = loop_mean(out.last_hidden_state, batch["chunk_ids"], num_chunks)
        expected = F.normalize(means @ model.projection.weight.T, dim=-1) * batch["attention_mask"].unsqueeze(-1)
        assert torch.allclose(out.chunk_embeddings, expected, atol=1e-5)

    def test_special_and_separator_tokens_belong_to_no_chunk(self, model_and_processor):
        _, processor = model_and_processor
        batch = processor([["one two", "three"]])
        ids, cids = batch["input_ids"][0], batch["chunk_ids"][0]
        separator = processor.chunk_token_id
        assert (ids == separator).sum() == 1
        assert torch.all(cids[ids == separator] == -1)
        assert cids[0] == -1 and cids[-1] == -1  # CLS ... SEP


class TestIndexGuard:
    """The pooling never adds over 2^31 elements at once (a 32-bit index would wrap): checked on shapes, with
    meta tensors that hold no memory, and on small tensors with a lowered limit against the unsliced result."""

    def test_a_262144_token_pass_of_the_9b_is_pooled_at_once_and_two_are_sliced(self):
        from contextembed.modeling import MAX_INDEX_ELEMENTS, index_slices

        assert index_slices(1, 262_144, 4096) == [slice(0, 4096)]  # 2^30 elements
        parts = index_slices(2, 262_144, 4096)  # 2^31 elements: over the limit by one
        assert len(parts) == 2 and parts[0].start == 0 and parts[-1].stop == 4096
        assert all(2 * 262_144 * (p.stop - p.start) <= MAX_INDEX_ELEMENTS for p in parts)
        assert [i for p in parts for i in range(p.start, p.stop)] == list(range(4096))

    def test_sliced_pooling_runs_on_shapes_alone(self):
        hidden = torch.empty(2, 262_144, 4096, device="meta")
        chunk_ids = torch.empty(2, 262_144, dtype=torch.long, device="meta")
        sums, counts = chunk_sums_and_counts(hidden, chunk_ids, 512)
        assert sums.shape == (2, 512, 4096) and counts.shape == (2, 512) and sums.dtype == torch.float32

    def test_more_positions_than_an_index_can_hold_is_an_error(self):
        from contextembed.modeling import index_slices

        with pytest.raises(ValueError, match="more than 2147483647 positions"):
            index_slices(8193, 262_144, 1)

    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    def test_rows_added_at_once_give_the_scatter_exactly(self, dtype):
        """Eager pooling adds whole rows (`index_add_`); an exported graph scatters element by element."""
        from contextembed.modeling.modeling_contextembed import _scatter_sums_and_counts

        for batch, seq_len, hidden, chunks in [(3, 17, 10, 4), (1, 300, 64, 40), (5, 64, 7, 1)]:
            states = torch.randn(batch, seq_len, hidden).to(dtype)
            chunk_ids = torch.randint(-1, chunks, (batch, seq_len))
            added = chunk_sums_and_counts(states, chunk_ids, chunks)
            scattered = _scatter_sums_and_counts(states, (chunk_ids + 1).clamp(min=0), chunks)
            assert torch.equal(added[0], scattered[0]) and torch.equal(added[1], scattered[1])
            assert added[0].dtype == added[1].dtype == torch.float32

    def test_slices_give_the_unsliced_result_exactly(self):
        hidden = torch.randn(3, 17, 10)
        chunk_ids = torch.randint(-1, 4, (3, 17))
        whole = chunk_sums_and_counts(hidden, chunk_ids, 4)
        sliced = chunk_sums_and_counts(hidden, chunk_ids, 4, max_index_elements=3 * 17 * 3)  # 4 slices of 3, 3, 3, 1
        assert torch.equal(whole[0], sliced[0]) and torch.equal(whole[1], sliced[1])
        assert torch.allclose(whole[0] / whole[1].clamp(min=1).unsqueeze(-1), loop_mean(hidden, chunk_ids, 4),
                              atol=1e-6)


class TestContextuality:
    def test_editing_a_later_chunk_changes_an_earlier_one(self, model_and_processor):
        model, processor = model_and_processor
        a = encode(model, processor, [["the lease", "rent is two", "she is the tenant"]])
        b = encode(model, processor, [["the lease", "rent is two", "he is the company"]])
        assert (a.chunk_embeddings[0, 0] - b.chunk_embeddings[0, 0]).abs().max() > 1e-4

    def test_late_chunking_differs_from_chunks_alone(self, model_and_processor):
        model, processor = model_and_processor
        chunks = ["the lease", "rent is two", "she is the tenant"]
        together = encode(model, processor, [chunks]).chunk_embeddings[0]
        alone = encode(model, processor, chunks).chunk_embeddings[:, 0]
        assert (together - alone).abs().max() > 1e-3


class TestBatchInvariance:
    def test_document_alone_equals_document_in_padded_batch(self, model_and_processor):
        model, processor = model_and_processor
        doc = ["rent is two", "she is the tenant"]
        alone = encode(model, processor, [doc]).chunk_embeddings[0]
        batched = encode(model, processor, [DOCS[0], doc, DOCS[3]]).chunk_embeddings[1, :2]
        assert (alone - batched).abs().max() <= 1e-5

    def test_padding_is_invisible(self, model_and_processor):
        model, processor = model_and_processor
        batch = processor(DOCS)
        padded = {k: torch.nn.functional.pad(v, (0, 5), value=0 if k != "chunk_ids" else -1) for k, v in batch.items()
                  if k != "attention_mask"}
        with torch.inference_mode():
            a = model(**batch).chunk_embeddings
            b = model(**padded, attention_mask=batch["attention_mask"]).chunk_embeddings
        assert (a - b).abs().max() <= 1e-5


class TestSpecialTextIsPlainText:
    @pytest.mark.parametrize("literal", ["<|chunk_sep|>", "[SEP]", "<|endoftext|>", "[CLS]"])
    def test_literal_special_tokens_in_user_text(self, model_and_processor, literal):
        model, processor = model_and_processor
        batch = processor([[f"one {literal} two"]])
        special_ids = set(processor.tokenizer.all_special_ids)
        chunk_tokens = batch["input_ids"][0][batch["chunk_ids"][0] >= 0].tolist()
        assert not special_ids & set(chunk_tokens)
        assert encode(model, processor, [[f"one {literal} two"]]).chunk_mask.sum() == 1


class TestEmptyChunk:
    def test_empty_chunk_is_an_error_naming_it(self, model_and_processor):
        model, processor = model_and_processor
        with pytest.raises(ValueError, match="document 1, chunk 1 is empty"):
            processor([["one"], ["one", "", "two", "   "]], empty_chunks="error")

    def test_opt_in_keeps_its_row_as_zero(self, model_and_processor):
        model, processor = model_and_processor
        out = encode(model, processor, [["one", "", "two", "   "]], empty_chunks="zero")
        assert out.chunk_mask.tolist() == [[1, 1, 1, 1]]
        norms = out.chunk_embeddings[0].norm(dim=-1)
        assert norms[0] > 0.99 and norms[2] > 0.99
        assert norms[1] == 0 and norms[3] == 0


class TestMatryoshkaAndDtype:
    def test_cut_then_normalise(self, model_and_processor):
        model, processor = model_and_processor
        batch = processor(DOCS)
        with torch.inference_mode():
            raw = model(**batch, normalize=False).chunk_embeddings
            cut = model(**batch, output_dim=8).chunk_embeddings
        assert cut.shape[-1] == 8
        assert torch.allclose(cut, F.normalize(raw[..., :8], dim=-1), atol=1e-6)

    def test_unknown_output_dim_is_rejected(self, model_and_processor):
        model, processor = model_and_processor
        with pytest.raises(ValueError, match=r"output_dim must be one of \[8, 16\], got 12"):
            model(**processor(["one"]), output_dim=12)

    def test_projection_stays_fp32_when_backbone_runs_in_bf16(self, checkpoint_dir, model_and_processor):
        _, processor = model_and_processor
        model = AutoModel.from_pretrained(checkpoint_dir, dtype=torch.bfloat16)
        assert isinstance(model, ContextEmbedModel)
        assert model.projection.weight.dtype == torch.float32
        assert model.backbone.get_input_embeddings().weight.dtype == torch.bfloat16
        out = encode(model, processor, DOCS)
        assert out.chunk_embeddings.dtype == torch.float32
        assert torch.isfinite(out.chunk_embeddings).all()


class TestAttentionImplementations:
    @pytest.mark.parametrize("implementation", ["eager", "sdpa"])
    def test_implementation_reaches_the_backbone(self, checkpoint_dir, model_and_processor, implementation):
        reference, processor = model_and_processor
        model = AutoModel.from_pretrained(checkpoint_dir, attn_implementation=implementation)
        assert model.backbone.config._attn_implementation == implementation
        a, b = encode(model, processor, DOCS), encode(reference, processor, DOCS)
        assert (a.chunk_embeddings - b.chunk_embeddings).abs().max() <= 1e-5


class TestPacking:
    @pytest.mark.parametrize("family", ["bert", "qwen3", "modernbert"])
    def test_a_packed_ragged_batch_equals_the_padded_one(self, built, family):
        """One packed row of the batch's real tokens, each document restarting its positions and attending only to
        itself: the vectors of the padded batch, within float noise; and without the block mask, documents would
        see each other (the mask is what keeps them apart on sdpa)."""
        from contextembed.modeling import packed_call
        from contextembed.modeling.modeling_contextembed import chunk_layout

        _, model, processor = built[family]
        docs = [["the lease of the street", "the rent is monthly"], ["she is the tenant"],
                ["a", "b c d e f g", "the company pays the deposit and the rent on the first day"]]
        batch = processor(docs)
        with torch.inference_mode():
            padded = model(**batch, pack=False).chunk_embeddings
            packed = model(**batch, pack=True).chunk_embeddings
            mask, cids, chunks = chunk_layout(model.config, batch["input_ids"], batch["attention_mask"],
                                              batch["token_attention_mask"], batch["chunk_ids"])
            apart = packed_call(model.backbone, batch["input_ids"], mask, cids, chunks.shape[1])[0]
            together = packed_call(model.backbone, batch["input_ids"], mask, cids, chunks.shape[1],
                                   block_mask=False)[0]
        assert (padded - packed).abs().max() <= 1e-5
        if family != "bert":  # BERT reads the restarting positions as separate documents itself
            assert (apart - together).abs().max() > 1e-3
