"""`contextembed export`: the branch-free core of a checkpoint as ONNX (torch.onnx, dynamo) or OpenVINO IR.

Files land where sentence-transformers' backends look for them: `onnx/model.onnx`, `onnx/model_qint8.onnx`
(dynamic int8 weights) and `openvino/openvino_model.xml` (+ `.bin`). Every export is run on batches of shapes it
was not traced with and compared with the torch core before it is kept: a graph that specialised a shape, a
branch or a constant would fail here rather than give wrong vectors later.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from contextembed.choices import EXPORT_FORMATS, QUANTIZATIONS
from contextembed.backends.core import (
    FINGERPRINT_KEY,
    INPUT_NAMES,
    OUTPUT_NAMES,
    ChunkSumsCore,
    example_inputs,
    weights_fingerprint,
)
from contextembed.backends.runtime import CoreRunner
from contextembed.checkpoint import make_readable
from contextembed.modeling import ContextEmbedConfig, ContextEmbedModel

logger = logging.getLogger(__name__)

ExportFormat = Literal["onnx", "openvino"]
ONNX_FILE = "onnx/model.onnx"
ONNX_INT8_FILE = "onnx/model_qint8.onnx"
OPENVINO_FILE = "openvino/openvino_model.xml"
# Agreement with the torch core on new shapes, on unit-length chunk vectors (the direction of the projected sums).
FLOAT_TOLERANCE = 1e-4
INT8_MIN_COSINE = 0.95  # dynamic int8 weights change the vectors on purpose; this catches a broken graph
# Backbones whose graph cannot be exported for every shape, and why (the parity check would refuse the graph later,
# after minutes of tracing, with the runtime's own message).
UNEXPORTABLE = {"qwen3_5_text": "its Gated-DeltaNet layers trace to the one sequence length they were traced with"}


def export(checkpoint_dir: str | Path, format: ExportFormat = "onnx", quantize: Literal["int8"] | None = None) -> Path:
    """Export a local checkpoint's core and check it on new shapes; returns the file written.

    `quantize="int8"` (ONNX only) also writes dynamically quantised int8 weights (onnxruntime's
    `quantize_dynamic`) beside the float graph and returns that file.
    """
    checkpoint_dir = Path(checkpoint_dir)
    if format not in EXPORT_FORMATS:
        raise ValueError(f"format must be one of {EXPORT_FORMATS}, got {format!r}")
    if quantize is not None and quantize not in QUANTIZATIONS:
        raise ValueError(f"quantize must be one of {QUANTIZATIONS} or None, got {quantize!r}")
    if quantize is not None and format != "onnx":
        raise ValueError(f"quantize={quantize!r} is available for format='onnx' only (onnxruntime's dynamic int8)")
    if not (checkpoint_dir / "config.json").is_file():
        raise ValueError(f"{checkpoint_dir} is not a checkpoint folder (no config.json); export works on a local "
                         "folder: download a Hub checkpoint first")
    backbone = ContextEmbedConfig.from_pretrained(checkpoint_dir).text_config.model_type
    if backbone in UNEXPORTABLE:
        raise ValueError(f"{checkpoint_dir} has a {backbone} backbone, which export does not support: "
                         f"{UNEXPORTABLE[backbone]}. Run it with the torch backend")
    # Eager attention: torch's sdpa kernels do not carry over, and their decomposition (masking with Where, NaN
    # checks) made onnxruntime 0.58x of torch on bench/backends.py where the eager graph runs 0.76x; same vectors.
    model = ContextEmbedModel.from_pretrained(checkpoint_dir, dtype=torch.float32, attn_implementation="eager").eval()
    core = ChunkSumsCore(model).eval()
    fingerprint = weights_fingerprint(checkpoint_dir)
    with tempfile.TemporaryDirectory() as tmp:
        onnx_file = _stamp_onnx(_export_onnx(core, Path(tmp) / "model.onnx"), fingerprint)
        check_parity(core, CoreRunner("onnx", onnx_file), FLOAT_TOLERANCE)
        if format == "onnx":
            if quantize == "int8":
                backbone = core.backbone.config
                int8_file = _quantize_int8(onnx_file, Path(tmp) / "model_qint8.onnx", backbone.hidden_size,
                                           getattr(backbone, "intermediate_size", None))
                int8_file = _stamp_onnx(int8_file, fingerprint)
                check_parity(core, CoreRunner("onnx", int8_file), None)
                _install(int8_file, checkpoint_dir / ONNX_INT8_FILE)
            written = _install(onnx_file, checkpoint_dir / ONNX_FILE)
            if quantize == "int8":
                written = checkpoint_dir / ONNX_INT8_FILE
        else:
            ov_file = _convert_openvino(onnx_file, Path(tmp) / "openvino" / "openvino_model.xml", fingerprint)
            check_parity(core, CoreRunner("openvino", ov_file), FLOAT_TOLERANCE)
            written = _install(ov_file, checkpoint_dir / OPENVINO_FILE)
    make_readable(checkpoint_dir)
    return written


def check_parity(core: ChunkSumsCore, run, tolerance: float | None) -> float:
    """Compare `run(inputs) -> (sums, counts)` with the torch core on batch shapes unlike the traced one.

    With a `tolerance`, the unit-length chunk vectors must agree to it; without one (a quantised graph), their
    cosine must stay above `INT8_MIN_COSINE`. Counts must be equal. Returns the largest difference (or the
    smallest cosine).
    """
    config = core.backbone.config
    longest = min(getattr(config, "max_position_embeddings", 512) or 512, 512) - 2
    shapes = [(3, min(37, longest), 5), (1, longest, 2), (5, 7, 1), (2, min(61, longest), 9)]
    worst = 0.0 if tolerance is not None else 1.0
    for seed, shape in enumerate(shapes, start=1):
        inputs = example_inputs(*shape, vocab_size=config.vocab_size, seed=seed)
        with torch.inference_mode():
            ref_sums, ref_counts = (t.numpy() for t in core(*inputs))
        sums, counts = run([t.numpy() for t in inputs])
        if not np.array_equal(counts, ref_counts):
            raise RuntimeError(f"the exported graph counts chunk tokens differently on a batch of shape {shape}")
        ref, got = _unit(ref_sums), _unit(sums)
        if tolerance is not None:
            diff = float(np.abs(got - ref).max())
            worst = max(worst, diff)
            if diff > tolerance:
                raise RuntimeError(f"the exported graph differs from torch by {diff:.2e} (> {tolerance:.0e}) on a "
                                   f"batch of shape {shape}: not written")
        else:
            cosine = float((got * ref).sum(-1).min())
            worst = min(worst, cosine)
            if cosine < INT8_MIN_COSINE:
                raise RuntimeError(f"the int8 graph's vectors have cosine {cosine:.3f} (< {INT8_MIN_COSINE}) with "
                                   f"torch's on a batch of shape {shape}: not written")
    return worst


def _unit(sums: np.ndarray) -> np.ndarray:
    return sums / np.maximum(np.linalg.norm(sums, axis=-1, keepdims=True), 1e-12)


def _export_onnx(core: ChunkSumsCore, path: Path) -> Path:
    inputs = example_inputs(2, 16, 3, vocab_size=core.backbone.config.vocab_size)
    batch, seq_len, chunks = (torch.export.Dim(name) for name in ("batch", "seq_len", "num_chunks"))
    dynamic = {"input_ids": {0: batch, 1: seq_len}, "attention_mask": {0: batch, 1: seq_len},
               "chunk_ids": {0: batch, 1: seq_len}, "chunk_mask": {0: batch, 1: chunks}}
    n_bytes = sum(p.numel() * p.element_size() for p in core.parameters())
    torch.onnx.export(core, inputs, str(path), dynamo=True, input_names=list(INPUT_NAMES),
                      output_names=list(OUTPUT_NAMES), dynamic_shapes=dynamic,
                      external_data=n_bytes > 1_500_000_000, verbose=False)
    return path


def _stamp_onnx(path: Path, fingerprint: str) -> Path:
    """Record in the graph's metadata which weights it was exported from (`weights_fingerprint`)."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False)
    kept = [(p.key, p.value) for p in graph.metadata_props if p.key != FINGERPRINT_KEY]
    del graph.metadata_props[:]
    for key, value in [*kept, (FINGERPRINT_KEY, fingerprint)]:
        graph.metadata_props.add(key=key, value=value)
    onnx.save(graph, str(path))
    return path


def _quantize_int8(source: Path, target: Path, hidden: int, inner: int | None) -> Path:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # Per output channel: one scale per tensor left MiniLM's chunk vectors at cosine 0.89 with float32, per channel
    # at 0.97 (worst chunk); keeping the early feed-forward blocks in float (`float_kept_matmuls`) lifts it to 0.99.
    quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8, per_channel=True,
                     nodes_to_exclude=float_kept_matmuls(source, hidden, inner))
    return target


def float_kept_matmuls(path: Path, hidden: int, inner: int | None) -> list[str]:
    """Names of the MatMuls that int8 export leaves in float: both feed-forward matrices of the first half of the
    layers, and everything after the chunk scatter (the projection of chunk sums, a few rows per document).

    Dynamic quantisation scales a whole activation tensor by its largest value; the feed-forward activations of
    early layers hold a few very large values (on special tokens), so one scale for the whole batch crushes every
    other token's. Measured on validation documents (`heldout-source`, not the reported sets) with MiniLM: worst
    chunk cosine 0.976 with everything in int8, 0.992 with the early feed-forward outputs kept, 0.994 with both
    early feed-forward matrices kept; attention matrices or late layers kept changed it by < 0.01.

    A feed-forward matrix is a weight of shape (hidden, inner) or (inner, hidden), `inner` being the backbone's
    `intermediate_size`; the layer of one is its rank among the down-projections (inner -> hidden), in graph order.
    """
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    shapes = {w.name: tuple(w.dims) for w in graph.initializer}
    ups, downs, after_scatter, scattered = [], [], [], False
    for node in graph.node:  # topological order
        scattered = scattered or node.op_type.startswith("Scatter")
        if node.op_type != "MatMul" or len(shapes.get(node.input[1], ())) != 2:
            continue
        if scattered:
            after_scatter.append(node.name)
        elif shapes[node.input[1]] == (hidden, inner):
            ups.append((len(downs), node.name))  # belongs to the layer whose down-projection comes next
        elif shapes[node.input[1]] == (inner, hidden):
            downs.append(node.name)
    early = (len(downs) + 1) // 2
    return [name for layer, name in ups if layer < early] + downs[:early] + after_scatter


def _convert_openvino(onnx_file: Path, target: Path, fingerprint: str) -> Path:
    import openvino as ov

    target.parent.mkdir(parents=True, exist_ok=True)
    graph = ov.convert_model(str(onnx_file))
    graph.set_rt_info(fingerprint, [FINGERPRINT_KEY])
    # Weights stay float32: save_model would otherwise compress them to float16.
    ov.save_model(graph, str(target), compress_to_fp16=False)
    return target


def _install(source: Path, target: Path) -> Path:
    """Move an export and its sidecar file (ONNX external data, the OpenVINO `.bin`) into the checkpoint, under
    the same names (the graph refers to its sidecar by name)."""
    assert source.name == target.name, (source, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    for name in (source.name, source.name + ".data", source.stem + ".bin"):
        if (source.parent / name).is_file():
            shutil.move(str(source.parent / name), str(target.parent / name))
    return target
