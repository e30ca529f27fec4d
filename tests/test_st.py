"""contextembed.st: list-of-chunks documents through sentence-transformers' built-in modules, and a re-saved folder
that both sentence-transformers 5.7 and 6.x load."""

from __future__ import annotations

import numpy as np

import copy
import json

import torch
from sentence_transformers import SentenceTransformer

from contextembed import ContextEmbedSentenceTransformer, as_chunked
from contextembed.checkpoint import ST_MODULES, st_requirements
from tests.test_checkpoint import DOCS, direct_chunks


class TestSentenceTransformers:
    def test_encode_document_matches_transformers(self, built, family):
        path, model, processor = built[family]
        st = ContextEmbedSentenceTransformer(str(path), device="cpu")
        got = st.encode_document([["the lease is for one year", "rent is two", "she is the tenant"], ["one"],
                                  ("a b", "c d"), "plain"], output_value="token_embeddings")
        assert [tuple(g.shape) for g in got] == [(3, 16), (1, 16), (2, 16), (1, 16)]
        for a, b in zip(got, direct_chunks(model, processor, DOCS)):
            assert (a.cpu() - b).abs().max() <= 1e-5

    def test_batch_size_does_not_change_vectors(self, built):
        path = built["bert"][0]
        st = ContextEmbedSentenceTransformer(str(path), device="cpu")
        docs = [[f"chunk {i} of {j}" for i in range(1 + j % 4)] for j in range(9)]
        one = st.encode_document(docs, output_value="token_embeddings", batch_size=1)
        many = st.encode_document(docs, output_value="token_embeddings", batch_size=32)
        assert all((a - b).abs().max() <= 1e-5 for a, b in zip(one, many))

    def test_max_seq_length_is_a_window_not_a_cut(self, built):
        path, model, processor = built["bert"]
        st = ContextEmbedSentenceTransformer(str(path), device="cpu")
        st.max_seq_length = 32
        docs = [[f"chunk {i} of the lease" for i in range(12)]]  # well over 32 tokens
        (got,) = st.encode_document(docs, output_value="token_embeddings")
        assert got.shape == (12, 16)  # every chunk kept
        narrow = copy.deepcopy(model)
        narrow.config.max_seq_length = 32
        with torch.inference_mode():
            expected = narrow(**processor(docs)).chunk_embeddings[0]
            wide = model(**processor(docs)).chunk_embeddings[0]
        assert (got.cpu() - expected).abs().max() <= 1e-5
        assert (got.cpu() - wide).abs().max() > 1e-4  # the 32-token window was used, not the checkpoint's 64

    def test_query_is_one_vector(self, built):
        """One vector a query, with the query prefix: the encoder's own query vector."""
        import contextembed

        st = ContextEmbedSentenceTransformer(str(built["bert"][0]), device="cpu")
        got = st.encode_query(["who is the tenant"])
        assert got.shape == (1, 16)
        expected = contextembed.load(str(built["bert"][0])).encode_queries(["who is the tenant"])
        np.testing.assert_allclose(np.asarray(got), expected, atol=1e-5)

    def test_as_chunked(self):
        assert as_chunked([["a", "b", "c"], "d"]) == [{"text": ["a", "b", "c"]}, "d"]

    def test_resave_keeps_the_files_both_versions_load(self, built, tmp_path):
        """A folder re-saved through ContextEmbedSentenceTransformer keeps the module paths that 5.7 imports and the
        `requirements` block (plain sentence-transformers 6 writes a 6-only Normalize path and drops it)."""
        path, model, processor = built["bert"]
        ContextEmbedSentenceTransformer(str(path), device="cpu").save(str(tmp_path / "resaved"))
        modules = json.loads((tmp_path / "resaved" / "modules.json").read_text())
        assert [m["type"] for m in modules] == [m["type"] for m in ST_MODULES]
        config = json.loads((tmp_path / "resaved" / "config_sentence_transformers.json").read_text())
        assert config["requirements"] == st_requirements()
        again = ContextEmbedSentenceTransformer(str(tmp_path / "resaved"), device="cpu")
        got = again.encode_document(DOCS, output_value="token_embeddings")
        for a, b in zip(got, direct_chunks(model, processor, DOCS)):
            assert (a.cpu() - b).abs().max() <= 1e-5

    def test_plain_resave_loads_in_the_same_version(self, built, tmp_path):
        path, model, processor = built["qwen3"]
        SentenceTransformer(str(path), device="cpu").save(str(tmp_path / "plain"))
        got = SentenceTransformer(str(tmp_path / "plain"), device="cpu", trust_remote_code=False).encode_document(
            as_chunked(DOCS), output_value="token_embeddings")
        for a, b in zip(got, direct_chunks(model, processor, DOCS)):
            assert (a.cpu() - b).abs().max() <= 1e-5
