"""The branch-free part of the model that backends run: backbone -> chunk sums and counts -> projection.

Everything data-dependent (which rows fit the window, how a long document is cut into windows) stays in Python
around it (`late_chunk_sums`), so the exported graph is the same computation on every batch shape.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from torch import nn

from contextembed.modeling import ContextEmbedModel, chunk_sums_and_counts

INPUT_NAMES = ("input_ids", "attention_mask", "chunk_ids", "chunk_mask")
OUTPUT_NAMES = ("chunk_sums", "chunk_counts")
# Stamped into every exported graph (ONNX metadata, OpenVINO rt_info), checked when a backend loads it.
FINGERPRINT_KEY = "contextembed_weights_sha256"


def weights_fingerprint(checkpoint_dir: str | Path) -> str:
    """SHA-256 of a checkpoint's safetensors weight files (all shards, in name order): which weights a graph was
    exported from, so that a graph copied from another checkpoint (same shapes, other weights) is refused."""
    folder = Path(checkpoint_dir)
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        names = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
    else:
        names = ["model.safetensors"]
    digest = hashlib.sha256()
    for name in names:
        if not (folder / name).is_file():
            raise ValueError(f"{folder} has no {name}: a backend graph is checked against the checkpoint's weights")
        digest.update(name.encode())
        with open(folder / name, "rb") as f:
            for block in iter(lambda: f.read(1 << 24), b""):
                digest.update(block)
    return digest.hexdigest()


class ChunkSumsCore(nn.Module):
    """`(input_ids, token mask, chunk_ids, chunk_mask) -> (projected chunk sums (B, C, D), token counts (B, C))`.

    The projection is linear and has no bias, so projecting the sums and dividing by the counts later (after the
    windows of a long document are added up) equals projecting the means. `chunk_mask` is read only for its
    width, the number of chunk slots: a shape, not a value, so the graph has no data-dependent shape.
    """

    def __init__(self, model: ContextEmbedModel):
        super().__init__()
        self.backbone = model.backbone
        self.projection = model.projection

    def forward(self, input_ids, attention_mask, chunk_ids, chunk_mask):
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask, return_dict=True).last_hidden_state
        sums, counts = chunk_sums_and_counts(hidden, chunk_ids, chunk_mask.shape[1])
        weight = next(self.projection.parameters(), None)
        if weight is not None:
            sums = self.projection(sums.to(weight.dtype)).float()
        return sums, counts


def example_inputs(batch: int, seq_len: int, num_chunks: int, vocab_size: int, seed: int = 0) -> tuple:
    """A padded batch with real-looking layout: rows of different lengths, every chunk non-empty, ids -1 on the
    first token (like CLS) and on padding.

    >>> ids, mask, cids, cmask = example_inputs(2, 9, 3, vocab_size=50)
    >>> mask.tolist()[1], cids.tolist()[1], cmask.shape
    ([1, 1, 1, 1, 1, 1, 0, 0, 0], [-1, 0, 0, 1, 1, 2, -1, -1, -1], torch.Size([2, 3]))
    """
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, vocab_size, (batch, seq_len), generator=generator)
    attention_mask = torch.zeros(batch, seq_len, dtype=torch.long)
    chunk_ids = torch.full((batch, seq_len), -1, dtype=torch.long)
    for row in range(batch):
        length = max(num_chunks + 1, seq_len - 3 * row)  # shorter rows further down: padding is exercised
        attention_mask[row, :length] = 1
        body = torch.arange(length - 1) * num_chunks // (length - 1)  # chunks 0..C-1 in order, none empty
        chunk_ids[row, 1:length] = body
    chunk_mask = torch.ones(batch, num_chunks, dtype=torch.long)
    return input_ids, attention_mask, chunk_ids, chunk_mask
