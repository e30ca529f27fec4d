"""The closed sets of the model package and the checks that need nothing heavy: what a config, a processor and a
caller may choose. Imports neither torch nor transformers, so `contextembed.modeling` hands these out on a light
import (the command line's `--help`, numpy-only modules)."""

from __future__ import annotations

import numbers
from typing import Literal

PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")
Precision = Literal["float32", "int8", "uint8", "binary", "ubinary"]
INT8_SCHEMES = ("unit", "tanh", "bounded")
Int8Scheme = Literal["unit", "tanh", "bounded"]
HEAD_ACTIVATIONS = (None, "tanh")
DEFAULT_CHUNK_TOKEN = "<|chunk_sep|>"
LONG_DOCUMENT_MODES = ("window", "error")
LongDocuments = Literal["window", "error"]
EMPTY_CHUNK_MODES = ("error", "zero")
EmptyChunks = Literal["error", "zero"]  # a chunk with no tokens: refused, or kept as an all-zero vector
TASKS = ("query", "document")
Task = Literal["query", "document"]
INPUT_LAYOUTS = ("contextembed", "pplx-v2")


def is_integer(value) -> bool:
    """An integer (Python's or numpy's), and not a bool.

    >>> is_integer(3), is_integer(True), is_integer(3.0)
    (True, False, False)
    """
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


__all__ = ["DEFAULT_CHUNK_TOKEN", "EMPTY_CHUNK_MODES", "HEAD_ACTIVATIONS", "INPUT_LAYOUTS", "INT8_SCHEMES",
           "LONG_DOCUMENT_MODES", "PRECISIONS", "TASKS", "EmptyChunks", "Int8Scheme", "LongDocuments", "Precision",
           "Task", "is_integer"]
