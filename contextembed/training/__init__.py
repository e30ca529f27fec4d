"""Training contextual chunk embeddings (SPEC §2): `contextembed train`, behind the `train` extra.

    pip install 'contextembed[train]'

`contextembed.training.data` (training documents with gold spans, batches by family), `.losses` (L_doc, L_dist,
int8 QAT, pure functions), `.texts` (real text read from installed packages), `.families` (near-identical
copies of it that differ only in what identifies them), `.teacher` (all-mpnet-base-v2 marking the sentences that
support a natural question, cached), `.sources` (recipes and Python-docs sections), `.config` (`TrainConfig`),
`.batches` (the planned batches and their collator), `.model` (the loss step), `.trainer` (transformers'
`Trainer` with LoRA from peft) and `.recipe` (a model's stages run in order); each is imported on first use.
"""

from __future__ import annotations

__all__ = ["TrainConfig", "train"]


def __getattr__(name: str):
    if name == "TrainConfig":  # needs neither peft nor transformers' Trainer
        from contextembed.training.config import TrainConfig

        return TrainConfig
    if name == "train":
        from contextembed.training.trainer import train

        return train
    raise AttributeError(f"module 'contextembed.training' has no attribute {name!r}")
