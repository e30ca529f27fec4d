"""A trained model as a small delta over its starting weights: LoRA factors, the separator's row, a projection.

The default model ships this way: a few MB inside the package instead of a whole model. `apply_delta` merges it
into a plain `ContextEmbedModel` (W ← W + scale · B A for each adapted linear layer) with no dependency on
peft; the delta records the config changes the training made (Matryoshka dims) in its metadata.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

FORMAT = "contextembed-delta-1"


def merge_lora(weight: torch.Tensor, lora_a: torch.Tensor, lora_b: torch.Tensor, scale: float) -> torch.Tensor:
    """W + scale · B A, computed in fp32: (out, in), (r, in), (out, r) -> (out, in).

    >>> w = torch.zeros(2, 3)
    >>> merge_lora(w, torch.tensor([[1.0, 0.0, 2.0]]), torch.tensor([[1.0], [0.5]]), scale=2.0).tolist()
    [[2.0, 0.0, 4.0], [1.0, 0.0, 2.0]]
    """
    return (weight.float() + scale * (lora_b.float() @ lora_a.float())).to(weight.dtype)


def save_delta(path: str | Path, tensors: dict[str, torch.Tensor], config, extra: dict | None = None) -> Path:
    """Write a delta: `tensors` holds `<module>.lora_A`, `<module>.lora_B`, `separator`, `projection.weight`."""
    from safetensors.torch import save_file

    scales = tensors.pop("__scales__", {})
    metadata = {"format": FORMAT, "scales": json.dumps(scales), "chunk_token_id": str(config.chunk_token_id),
                "matryoshka_dims": json.dumps(config.matryoshka_dims), "extra": json.dumps(extra or {})}
    save_file({k: v.detach().float().contiguous() for k, v in tensors.items()}, str(path), metadata=metadata)
    return Path(path)


def read_delta(path: str | Path, chunk_token_id: int) -> tuple[dict[str, torch.Tensor], dict[str, float], dict]:
    """A delta's tensors, its LoRA scales by module name and its metadata, checked against the model's separator
    id."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        metadata = f.metadata() or {}
        tensors = {name: f.get_tensor(name) for name in f.keys()}
    if metadata.get("format") != FORMAT:
        raise ValueError(f"{str(path)!r} is not a contextembed delta (format {metadata.get('format')!r})")
    if int(metadata["chunk_token_id"]) != chunk_token_id:
        raise ValueError(f"{str(path)!r} was trained with separator id {metadata['chunk_token_id']}, the model has "
                         f"{chunk_token_id}")
    return tensors, json.loads(metadata["scales"]), metadata


def apply_delta(model, path: str | Path) -> dict:
    """Merge a delta into `model` (a `ContextEmbedModel`) in place; returns the delta's metadata."""
    tensors, scales, metadata = read_delta(path, model.config.chunk_token_id)
    modules = dict(model.named_modules())
    with torch.no_grad():
        for name, scale in scales.items():
            if name not in modules:
                raise ValueError(f"{str(path)!r} adapts {name!r}, which the model does not have")
            layer = modules[name]
            layer.weight.copy_(merge_lora(layer.weight, tensors[f"{name}.lora_A"], tensors[f"{name}.lora_B"], scale))
        if "separator" in tensors:
            model.get_input_embeddings().weight[model.config.chunk_token_id] = tensors["separator"]
        if "projection.weight" in tensors:
            model.projection.weight.copy_(tensors["projection.weight"])
    dims = json.loads(metadata.get("matryoshka_dims", "null"))
    if dims:
        model.config.matryoshka_dims = dims
    return {**metadata, "extra": json.loads(metadata.get("extra", "{}"))}
