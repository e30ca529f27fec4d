"""ContextEmbedConfig: validation of closed sets, round trips and the reference preset."""

from __future__ import annotations

import json

import pytest
import torch

from contextembed.modeling import ContextEmbedConfig, ContextEmbedModel

from ..conftest import tiny_text_config


class TestValidation:
    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"default_precision": "int4"}, r"default_precision must be one of .*'int8'.*got 'int4'"),
            ({"pooling": "cls"}, r"pooling must be one of \('mean',\), got 'cls'"),
            ({"embedding_dim": 16, "matryoshka_dims": [8, 12]}, "must include the full size 16"),
            ({"embedding_dim": 16, "matryoshka_dims": [8, 32]}, r"matryoshka_dims must be integers in 1..16"),
            ({"embedding_dim": 16, "matryoshka_dims": [8, 16], "output_dim": 4}, r"output_dim must be one of \[8, 16\]"),
            ({"embedding_dim": -1}, "embedding_dim must be a positive integer"),
            ({"window_overlap": 1.0}, r"window_overlap must be in \[0, 1\)"),
            ({"window_head_tokens": -3}, "window_head_tokens must be a non-negative integer"),
            ({"document_mix": 1.0}, r"document_mix must be a number in \[0, 1\)"),
            ({"document_mix": -0.1}, r"document_mix must be a number in \[0, 1\)"),
            ({"document_mix": "0.2"}, r"document_mix must be a number in \[0, 1\)"),
            ({"int8_clip_sigmas": 0}, "int8_clip_sigmas must be positive"),
            ({"chunk_token": ""}, "chunk_token must be a non-empty string"),
            ({"text_config": {"hidden_size": 8}}, "text_config must name its `model_type`"),
        ],
    )
    def test_bad_values_name_field_and_value(self, kwargs, message):
        kwargs.setdefault("text_config", tiny_text_config("bert", 100))
        with pytest.raises(ValueError, match=message):
            ContextEmbedConfig(**kwargs)


class TestRoundTrip:
    @pytest.mark.parametrize("family", ["bert", "modernbert", "qwen3"])
    def test_save_and_load(self, tmp_path, family):
        config = ContextEmbedConfig(text_config=tiny_text_config(family, 100), embedding_dim=16,
                                    matryoshka_dims=[8, 16], query_prefix="query: ", window_head_tokens=4,
                                    document_mix=0.25)
        config.save_pretrained(tmp_path)
        loaded = ContextEmbedConfig.from_pretrained(tmp_path)
        assert loaded.to_dict() == config.to_dict()
        assert loaded.text_config.model_type == family
        assert loaded.text_config.is_causal is False
        assert 'auto_map' not in json.loads((tmp_path / "config.json").read_text())

    def test_dict_text_config(self):
        config = ContextEmbedConfig(text_config={"model_type": "qwen3", "hidden_size": 32, "num_attention_heads": 4})
        assert config.text_config.hidden_size == 32 and config.full_dim == 32


class TestReferencePreset:
    def test_reference_configuration_on_a_tiny_backbone(self):
        config = ContextEmbedConfig.reference(tiny_text_config("qwen3", 100))
        assert (config.embedding_dim, config.matryoshka_dims, config.max_seq_length) == (2048, [1024, 2048], 32768)
        assert config.chunk_token == "<|chunk_sep|>" and config.default_precision == "int8"
        model = ContextEmbedModel(config).eval()
        ids = torch.randint(5, 100, (1, 12))
        with torch.inference_mode():
            out = model(input_ids=ids, chunk_ids=torch.tensor([[-1] + [0] * 5 + [-1] + [1] * 4 + [-1]]))
            cut = model(input_ids=ids, chunk_ids=torch.tensor([[-1] + [0] * 5 + [-1] + [1] * 4 + [-1]]),
                        output_dim=1024)
        assert out.chunk_embeddings.shape == (1, 2, 2048)
        assert cut.chunk_embeddings.shape == (1, 2, 1024)
        assert model.projection.weight.dtype == torch.float32
