"""The processor: layout of ids and chunk ids, prefixes, and a clear error for every bad input."""

from __future__ import annotations

import pytest
import torch

from contextembed.modeling import ContextEmbedProcessor


@pytest.fixture
def processor(built):
    return built["bert"][2]


class TestLayout:
    def test_chunk_ids_follow_the_chunks(self, processor):
        rows = processor.tokenize_documents([["one two", "three"]])
        ids, cids = rows[0]["input_ids"], rows[0]["chunk_ids"]
        tokenizer = processor.tokenizer
        assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
        first = [t for t, c in zip(ids, cids) if c == 0]
        second = [t for t, c in zip(ids, cids) if c == 1]
        assert first == tokenizer("one two", add_special_tokens=False)["input_ids"]
        assert second == tokenizer("three", add_special_tokens=False)["input_ids"]

    def test_right_padding_and_chunk_mask(self, processor):
        batch = processor([["one", "two", "three"], "four"])
        assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
        mask = batch["token_attention_mask"][1]
        assert mask.tolist() == sorted(mask.tolist(), reverse=True)
        assert (batch["chunk_ids"][1][mask == 0] == -1).all()

    def test_pad_copies_each_row_and_pads_the_rest(self, processor):
        rows = [{"input_ids": [5, 6, 7, 8], "chunk_ids": [-1, 0, 1, -1], "num_chunks": 2},
                {"input_ids": [9, 10], "chunk_ids": [0, -1], "num_chunks": 1}]
        pad = processor.tokenizer.pad_token_id
        expected = {"input_ids": [[5, 6, 7, 8], [9, 10, pad, pad]], "token_attention_mask": [[1, 1, 1, 1], [1, 1, 0, 0]],
                    "chunk_ids": [[-1, 0, 1, -1], [0, -1, -1, -1]], "attention_mask": [[1, 1], [1, 0]]}
        assert processor.pad(rows, return_tensors=None) == expected
        tensors = processor.pad(rows)
        assert {k: v.tolist() for k, v in tensors.items()} == expected
        assert all(v.dtype == torch.long for v in tensors.values())

    def test_ids_without_offsets_are_the_ids_with_them(self, processor):
        # Plain ids come from the tokenizer's call that skips offsets; the pplx-v2 layout's call keeps them.
        texts = ["Déjà vu, ﬁne.", "[CLS] [SEP] [PAD] <|chunk_sep|>", "", "  \t", "한국어 😀 ½", "a" * 300]
        with_offsets = processor.tokenize_text(texts, return_offsets=True)
        assert processor.tokenize_text(texts) == [ids for ids, _ in with_offsets]

    def test_query_prefix_belongs_to_no_chunk(self, processor):
        with_prefix = ContextEmbedProcessor(processor.tokenizer, query_prefix="query: ")
        rows = with_prefix.tokenize_documents(["one"], task="query")
        plain = processor.tokenize_documents(["one"])
        assert len(rows[0]["input_ids"]) > len(plain[0]["input_ids"])
        pooled = [t for t, c in zip(rows[0]["input_ids"], rows[0]["chunk_ids"]) if c >= 0]
        assert pooled == processor.tokenizer("one", add_special_tokens=False)["input_ids"]

    def test_prompt_in_first_chunk_is_read_as_the_prefix(self, processor):
        # sentence-transformers puts its prompt in front of the first chunk.
        with_prefix = ContextEmbedProcessor(processor.tokenizer, query_prefix="query: ")
        assert with_prefix.tokenize_documents(["query: one"]) == with_prefix.tokenize_documents(["one"], task="query")

    def test_titles_are_context_not_chunks(self, processor):
        rows = processor.tokenize_documents([["one"]], titles=["lease"])
        pooled = [t for t, c in zip(rows[0]["input_ids"], rows[0]["chunk_ids"]) if c >= 0]
        assert pooled == processor.tokenizer("one", add_special_tokens=False)["input_ids"]
        assert len(rows[0]["input_ids"]) > len(processor.tokenize_documents([["one"]])[0]["input_ids"])

    def test_without_separators(self, processor):
        plain = ContextEmbedProcessor(processor.tokenizer, chunk_separator=False)
        rows = plain.tokenize_documents([["one two", "three"]])
        assert processor.chunk_token_id not in rows[0]["input_ids"]
        assert rows[0]["input_ids"] == processor.tokenizer("one two three")["input_ids"]
        assert sorted(set(rows[0]["chunk_ids"])) == [-1, 0, 1]

    def test_long_document_passes_whole_by_default(self, processor):
        rows = processor.tokenize_documents([["one two three"] * 50])
        assert len(rows[0]["input_ids"]) > 64 and rows[0]["num_chunks"] == 50


class TestBadInput:
    @pytest.mark.parametrize(
        ("docs", "message"),
        [
            ([[]], r"documents\[0\] must be a non-empty list of chunk strings, got an empty list"),
            ([], "documents must be a non-empty list of documents, each a non-empty list of chunk strings, got an "
                 "empty list"),
            ([["one", 2]], r"documents\[0\]\[1\] must be a string, got int"),
            ([["one"], [["nested"]]], r"documents\[1\]\[0\] must be a string, got a list"),
            ([3], r"documents\[0\] must be a non-empty list of chunk strings, got int"),
            (None, "documents must be a non-empty list of documents, each a non-empty list of chunk strings, got "
                   "NoneType"),
        ],
    )
    def test_bad_documents(self, processor, docs, message):
        with pytest.raises(ValueError, match=message):
            processor(docs)

    def test_over_long_document_in_strict_mode(self, processor):
        with pytest.raises(ValueError, match=r"document 1 has \d+ tokens, more than max_seq_length=64"):
            processor(["short", ["one two three"] * 50], long_documents="error")

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"task": "passage"}, r"task must be one of \('query', 'document'\)"),
            ({"long_documents": "truncate"}, "long_documents must be one of"),
            ({"titles": ["a", "b"]}, "titles must have one entry per document"),
            ({"return_tensors": "np"}, "return_tensors must be 'pt' or None"),
        ],
    )
    def test_unknown_options(self, processor, kwargs, message):
        with pytest.raises(ValueError, match=message):
            processor(["one"], **kwargs)

    def test_unknown_long_document_mode_at_init(self, processor):
        with pytest.raises(ValueError, match="long_documents must be one of"):
            ContextEmbedProcessor(processor.tokenizer, long_documents="drop")

    def test_media_inputs_are_rejected(self, processor):
        with pytest.raises(ValueError, match="text only"):
            processor(["one"], images=[object()])
