"""Deployment backends: the model's branch-free core exported to ONNX or OpenVINO, run with our own windowing.

    contextembed export CHECKPOINT --format onnx [--quantize int8]    ->  CHECKPOINT/onnx/model.onnx
    contextembed.load(CHECKPOINT, backend="onnx")

Needs `pip install 'contextembed[onnx]'` (export and ONNX Runtime) or `'contextembed[openvino]'`.
"""

from __future__ import annotations

from contextembed.backends.export import EXPORT_FORMATS, QUANTIZATIONS, export
from contextembed.backends.runtime import BACKENDS, BackendModel

__all__ = ["BACKENDS", "EXPORT_FORMATS", "QUANTIZATIONS", "BackendModel", "export"]
