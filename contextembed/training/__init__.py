"""Training contextual chunk embeddings (SPEC §2): `contextembed train`, behind the `train` extra.

    pip install 'contextembed[train]'

`contextembed.training.data` (training documents with gold spans, batches by family), `.losses` (L_doc, L_dist,
int8 QAT, pure functions), `.sources` (training data built from installed packages) and `.trainer`
(transformers' `Trainer` with LoRA from peft, imported on first use).
"""

from __future__ import annotations

__all__ = ["TrainConfig", "train"]


def __getattr__(name: str):
    if name in __all__:
        from contextembed.training import trainer

        return getattr(trainer, name)
    raise AttributeError(f"module 'contextembed.training' has no attribute {name!r}")
