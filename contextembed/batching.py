"""Which rows share a forward pass: the one scheduler of the encoder, the server's batcher, training and the
benchmarks, and of the model's own calls over a long document's windows.

It is defined beside the windows in the model package (`contextembed.modeling`, which must stay self-contained, and
whose `forward` plans windows for sentence-transformers too) and is the library's from here.
"""

from __future__ import annotations

from contextembed.modeling import token_budget_batches

__all__ = ["token_budget_batches"]
