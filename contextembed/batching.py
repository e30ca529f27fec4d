"""Which rows share a forward pass: the one scheduler of the encoder, the server's batcher, training and the
benchmarks, and of the model's own calls over a long document's windows.

It is defined beside the windows in the model package (`contextembed.modeling`, which must stay self-contained, and
whose `forward` plans windows for sentence-transformers too) and is the library's from here:

>>> token_budget_batches([300, 20, 290, 25], batch_size=8, max_tokens=600)  # long with long, short with short
[[0, 2], [3, 1]]
"""

from __future__ import annotations

from contextembed.modeling import token_budget_batches

__all__ = ["token_budget_batches"]
