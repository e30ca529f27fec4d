"""Silencing transformers where contextembed knows better than its messages.

transformers logs at warning level for things that are expected here (a config naming remote code that is not
run, a tokenizer's "sequence length is longer than the specified maximum" for text the windows handle) and shows
progress bars while weights load. `quiet_transformers` lowers that for one block and restores it after.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def quiet_transformers(progress_bars: bool = True) -> Iterator[None]:
    """transformers' logging at error level within the block (and, with `progress_bars=False`, no progress bars)."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    if not progress_bars:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars and not progress_bars:
            hf_logging.enable_progress_bar()
