"""contextembed.delta: a trained model shipped as LoRA factors, a separator row and a projection over its starting
weights, merged back without peft."""

from __future__ import annotations

import copy

import pytest
import torch

from contextembed.delta import apply_delta, merge_lora, read_delta, save_delta


def test_merge_lora_equals_a_loop_oracle():
    torch.manual_seed(0)
    weight, a, b = torch.randn(5, 7), torch.randn(3, 7), torch.randn(5, 3)
    merged = merge_lora(weight, a, b, scale=0.5)
    for i in range(5):
        for j in range(7):
            expected = float(weight[i, j]) + 0.5 * sum(float(b[i, r]) * float(a[r, j]) for r in range(3))
            assert abs(float(merged[i, j]) - expected) < 1e-5
    assert merge_lora(weight.half(), a, b, 0.5).dtype == torch.float16  # merged in fp32, given back in its dtype


def adapted(model, seed: int = 1) -> tuple[dict, dict]:
    """A delta for `model`: LoRA factors on two linear layers, a separator row, a new projection (if any)."""
    generator = torch.Generator().manual_seed(seed)
    names = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and "query" in n][:2]
    tensors, scales = {}, {}
    for name in names:
        layer = dict(model.named_modules())[name]
        tensors[f"{name}.lora_A"] = torch.randn(2, layer.in_features, generator=generator)
        tensors[f"{name}.lora_B"] = torch.randn(layer.out_features, 2, generator=generator)
        scales[name] = 0.25
    tensors["separator"] = torch.randn(model.config.text_config.hidden_size, generator=generator)
    tensors["projection.weight"] = torch.randn_like(model.projection.weight)
    return tensors, scales


def test_a_saved_delta_merges_into_the_model_as_the_factors_say(built, tmp_path):
    _, model, _ = built["bert"]
    model = copy.deepcopy(model)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    tensors, scales = adapted(model)
    path = save_delta(tmp_path / "delta.safetensors", {**tensors, "__scales__": scales}, model.config,
                      extra={"recipe": "test"})
    metadata = apply_delta(model, path)
    assert metadata["extra"] == {"recipe": "test"}
    params = dict(model.named_parameters())
    for name, scale in scales.items():
        expected = merge_lora(before[f"{name}.weight"], tensors[f"{name}.lora_A"], tensors[f"{name}.lora_B"], scale)
        assert torch.allclose(params[f"{name}.weight"], expected)
    rows = model.get_input_embeddings().weight
    assert torch.equal(rows[model.config.chunk_token_id], tensors["separator"])
    assert torch.equal(model.projection.weight, tensors["projection.weight"])
    untouched = [n for n in before if not any(n.startswith(s) for s in scales) and "embeddings" not in n
                 and not n.startswith("projection")]
    assert untouched and all(torch.equal(params[n], before[n]) for n in untouched)


def test_a_delta_for_another_separator_or_another_model_is_refused(built, tmp_path):
    _, model, _ = built["bert"]
    model = copy.deepcopy(model)
    tensors, scales = adapted(model)
    path = save_delta(tmp_path / "delta.safetensors", {**tensors, "__scales__": scales}, model.config)
    with pytest.raises(ValueError, match=f"was trained with separator id {model.config.chunk_token_id}"):
        read_delta(path, model.config.chunk_token_id + 1)
    foreign = save_delta(tmp_path / "foreign.safetensors", {"__scales__": {"no.such.layer": 1.0}}, model.config)
    with pytest.raises(ValueError, match="adapts 'no.such.layer', which the model does not have"):
        apply_delta(model, foreign)
    from safetensors.torch import save_file

    save_file({"x": torch.zeros(1)}, str(tmp_path / "plain.safetensors"))
    with pytest.raises(ValueError, match="is not a contextembed delta"):
        read_delta(tmp_path / "plain.safetensors", model.config.chunk_token_id)
