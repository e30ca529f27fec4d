"""The library's closed sets and defaults, defined once, in a module that imports nothing heavy: the command line builds
its parser from them (`--help` and a usage error cost no model stack), and each module that acts on one imports it
from here.

>>> "sentences" in CHUNKERS and "int8" in PRECISIONS
True
"""

from __future__ import annotations

from typing import Literal

from contextembed.modeling import PRECISIONS  # the model package's own (light: contextembed.modeling.choices)

CHUNKERS = ("sentences", "paragraphs", "markdown", "tokens")
ChunkerName = Literal["sentences", "paragraphs", "markdown", "tokens"]
DTYPES = ("float32", "bfloat16", "float16", "auto")  # the weights' dtype by name
DType = Literal["float32", "bfloat16", "float16", "auto"]
BACKENDS = ("torch", "onnx", "openvino")
Backend = Literal["torch", "onnx", "openvino"]
EXPORT_FORMATS = ("onnx", "openvino")
QUANTIZATIONS = ("int8",)
DATASET_LAYOUTS = ("context-bench", "conteb", "beir")
COMMIT_TOKENS = 262_144  # tokens per commit of an encode, by default: with 2048-d float32 vectors, about 40 MB

__all__ = ["BACKENDS", "CHUNKERS", "COMMIT_TOKENS", "DATASET_LAYOUTS", "DTYPES", "EXPORT_FORMATS", "PRECISIONS",
           "QUANTIZATIONS", "Backend", "ChunkerName", "DType"]
