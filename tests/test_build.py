"""contextembed.build: any Hugging Face backbone wrapped for late chunking (separator token, projection, presets)."""

from __future__ import annotations

import pytest
import torch

import contextembed


class TestBuild:
    def test_separator_row_is_initialised(self, built, family):
        _, model, processor = built[family]
        row = model.get_input_embeddings().weight[processor.chunk_token_id]
        assert torch.isfinite(row).all() and row.abs().sum() > 0

    def test_bad_build_arguments(self, backbone_dirs, tmp_path):
        with pytest.raises(ValueError, match=r"preset must be one of \('reference',\)"):
            contextembed.build_checkpoint(backbone_dirs["bert"], preset="huge")
        with pytest.raises(ValueError, match="backbone must be a local directory"):
            contextembed.build_checkpoint(tmp_path / "missing")

    def test_the_reference_preset_reaches_as_far_as_the_backbone(self, backbone_dirs):
        """The reference's 2048-d projection and Matryoshka 1024/2048; its 32k window only as far as the backbone's
        positions reach (BERT: 512); an explicit size wins, and Matryoshka dims above it are dropped."""
        model, _ = contextembed.build_checkpoint(backbone_dirs["bert"], preset="reference")
        assert (model.config.embedding_dim, model.config.matryoshka_dims) == (2048, [1024, 2048])
        assert model.config.max_seq_length == 512 and model.config.default_precision == "int8"
        small, _ = contextembed.build_checkpoint(backbone_dirs["bert"], preset="reference", projection_dim=1024)
        assert (small.config.embedding_dim, small.config.matryoshka_dims) == (1024, [1024])

    def test_no_projection_dim_keeps_the_hidden_size(self, backbone_dirs):
        model, processor = contextembed.build_checkpoint(backbone_dirs["bert"], max_seq_length=64)
        assert model.config.projection_dim is None and model.config.embedding_dim == model.config.text_config.hidden_size
        batch = processor([["the lease", "rent is two"]])
        with torch.inference_mode():
            assert model(**batch).chunk_embeddings.shape == (1, 2, model.config.text_config.hidden_size)

    def test_the_separator_row_starts_where_it_is_told(self, backbone_dirs, caplog):
        with caplog.at_level("INFO", logger="contextembed.build"):
            model, processor = contextembed.build_checkpoint(backbone_dirs["bert"], separator_init=".")
        rows = model.get_input_embeddings().weight
        dot = processor.tokenizer.convert_tokens_to_ids(".")
        assert torch.equal(rows[processor.chunk_token_id], rows[dot])
        assert "added special token '<|chunk_sep|>'" in caplog.text and "from '.'" in caplog.text
        mean, processor = contextembed.build_checkpoint(backbone_dirs["bert"])
        weights = mean.get_input_embeddings().weight
        others = torch.arange(len(weights)) != processor.chunk_token_id
        assert torch.allclose(weights[processor.chunk_token_id], weights[others][: len(processor.tokenizer) - 1]
                              .mean(0), atol=1e-6)
        with pytest.raises(ValueError, match="separator_init must be 'mean' or a token of the vocabulary"):
            contextembed.build_checkpoint(backbone_dirs["bert"], separator_init="notaword")

    def test_an_existing_folder_is_refused_before_the_work(self, backbone_dirs, tmp_path):
        (tmp_path / "notes.txt").write_text("mine")
        with pytest.raises(ValueError, match="is a non-empty folder that is not a contextembed checkpoint"):
            contextembed.build_checkpoint(backbone_dirs["bert"], tmp_path)
        assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
