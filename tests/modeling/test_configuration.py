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
            ({"head_activation": "relu"}, r"head_activation must be one of \(None, 'tanh'\), got 'relu'"),
            ({"int8_scheme": "bounded"}, r"int8_scheme 'bounded' .* needs head_activation='tanh'"),
            ({"projection_dim": 16, "matryoshka_dims": [8, 12]}, "must include the full width 16"),
            ({"projection_dim": 16, "matryoshka_dims": [8, 32]}, r"matryoshka_dims must be integers in 1..16"),
            ({"projection_dim": 16, "matryoshka_dims": [8, 16], "output_dim": 4},
             r"output_dim must be one of \[8, 16\]"),
            ({"projection_dim": -1}, "projection_dim must be a positive integer"),
            ({"embedding_dim": -1}, "projection_dim must be a positive integer"),  # its former name
            ({"window_overlap": 1.0}, r"window_overlap must be in \[0, 1\)"),
            ({"window_head_tokens": -3}, "window_head_tokens must be a non-negative integer"),
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
        config = ContextEmbedConfig(text_config=tiny_text_config(family, 100), projection_dim=16,
                                    matryoshka_dims=[8, 16], query_prefix="query: ", window_head_tokens=4,
                                    head_activation="tanh", int8_scheme="bounded")
        config.save_pretrained(tmp_path)
        loaded = ContextEmbedConfig.from_pretrained(tmp_path)
        assert loaded.to_dict() == config.to_dict()
        assert loaded.text_config.model_type == family
        assert loaded.text_config.is_causal is False
        assert 'auto_map' not in json.loads((tmp_path / "config.json").read_text())

    def test_a_config_json_written_before_the_removed_keys_went_still_loads(self, tmp_path):
        """A config.json of the previous release carries `pooling` and `document_mix`: it loads as before, and the
        keys are gone once it is saved again. A file that set either to anything else would compute other vectors
        than it asks for, so it is refused with the key named."""
        written = ContextEmbedConfig(text_config=tiny_text_config("bert", 100), projection_dim=16).to_dict()
        written.update(pooling="mean", document_mix=0.0)  # the keys every earlier checkpoint wrote
        (tmp_path / "config.json").write_text(json.dumps(written))
        loaded = ContextEmbedConfig.from_pretrained(tmp_path)
        assert (loaded.embedding_dim, loaded.head_activation) == (16, None)
        assert not hasattr(loaded, "pooling") and not hasattr(loaded, "document_mix")
        loaded.save_pretrained(tmp_path / "again")
        assert not {"pooling", "document_mix"} & set(json.loads((tmp_path / "again" / "config.json").read_text()))
        for key, value in (("document_mix", 0.2), ("pooling", "cls")):
            (tmp_path / "config.json").write_text(json.dumps(written | {key: value}))
            with pytest.raises(ValueError, match=f"{key} was removed .* got {value!r}"):
                ContextEmbedConfig.from_pretrained(tmp_path)

    def test_a_config_json_written_before_the_sizes_were_renamed_still_loads(self, tmp_path):
        """The previous release wrote the projection's size as `embedding_dim` and no Matryoshka list for a model
        without cuts: such a file loads as the same model (the projection's size, the one full width), saves again
        under today's names, with a deprecation warning that says so."""
        written = ContextEmbedConfig(text_config=tiny_text_config("bert", 100), projection_dim=16).to_dict()
        written = {**{k: v for k, v in written.items() if k not in ("projection_dim", "matryoshka_dims")},
                   "embedding_dim": 16, "matryoshka_dims": None}
        (tmp_path / "config.json").write_text(json.dumps(written))
        with pytest.warns(DeprecationWarning, match="names the projection's size embedding_dim, its former name"):
            loaded = ContextEmbedConfig.from_pretrained(tmp_path)
        assert (loaded.projection_dim, loaded.embedding_dim, loaded.matryoshka_dims) == (16, 16, [16])
        loaded.save_pretrained(tmp_path / "again")
        saved = json.loads((tmp_path / "again" / "config.json").read_text())
        assert (saved["projection_dim"], saved["matryoshka_dims"], "embedding_dim" in saved) == (16, [16], False)
        no_projection = {**written, "embedding_dim": None}
        (tmp_path / "config.json").write_text(json.dumps(no_projection))
        with pytest.warns(DeprecationWarning):
            loaded = ContextEmbedConfig.from_pretrained(tmp_path)
        assert (loaded.projection_dim, loaded.embedding_dim, loaded.matryoshka_dims) == (None, 32, [32])

    def test_dict_text_config(self):
        config = ContextEmbedConfig(text_config={"model_type": "qwen3", "hidden_size": 32, "num_attention_heads": 4})
        assert config.text_config.hidden_size == 32 and config.embedding_dim == 32


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
