"""Running an exported core (ONNX Runtime or OpenVINO) with the torch model's pooling and windowing around it.

`BackendModel` answers the same call as `ContextEmbedModel` for the features the processor makes, so
`ContextEmbedder` (and everything built on it) works unchanged: rows that fit the window run in one call of the
graph, longer documents in the same windows as in torch (`late_chunk_sums`), then the model's own head
(`late_chunk_head`: mean, Matryoshka cut, L2 normalisation, padding mask). A backend is a core plus loading.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
import torch

from contextembed.choices import BACKENDS, Backend
from contextembed.backends.core import FINGERPRINT_KEY, INPUT_NAMES, weights_fingerprint
from contextembed.modeling import (
    ContextEmbedConfig,
    ContextEmbedOutput,
    check_count,
    late_chunk_head,
    late_chunk_sums,
    pad_token_id,
    window_length,
)

DEFAULT_FILES = {"onnx": "onnx/model.onnx", "openvino": "openvino/openvino_model.xml"}
EXTRAS = {"onnx": ("onnxruntime", "onnx"), "openvino": ("openvino", "openvino")}


class CoreRunner:
    """An exported core loaded by its runtime: `runner(inputs) -> (chunk_sums, chunk_counts)` on numpy arrays in
    `INPUT_NAMES` order, with the `fingerprint` of the weights it was exported from and its output `width` (either
    `None` when the graph does not say). A file the runtime cannot read is a `ValueError` naming it."""

    def __init__(self, backend: str, path: str | Path, num_threads: int | None = None):
        """`num_threads`: the runtime's threads for one call (None: its own default, every core)."""
        self.backend, self.path, self.num_threads = backend, Path(path), num_threads
        try:
            if backend == "onnx":
                self._load_onnx()
            else:
                self._load_openvino()
        except (ImportError, ValueError):
            raise
        except Exception as error:  # the runtimes' own protobuf / IR errors: name the file and what to do
            raise ValueError(f"cannot load {str(self.path)!r} as an {backend} graph (it is damaged, empty, truncated "
                             f"or not an exported core): {error}. Re-run `contextembed export`") from error

    def _load_onnx(self) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        if self.num_threads is not None:
            options.intra_op_num_threads = self.num_threads
        self.session = session = onnxruntime.InferenceSession(str(self.path), options,
                                                              providers=["CPUExecutionProvider"])
        self.fingerprint = session.get_modelmeta().custom_metadata_map.get(FINGERPRINT_KEY)
        width = session.get_outputs()[0].shape[-1]
        self.width = width if isinstance(width, int) else None
        self._run = lambda inputs: session.run(None, dict(zip(INPUT_NAMES, inputs)))

    def _load_openvino(self) -> None:
        import openvino as ov

        core = ov.Core()
        graph = core.read_model(str(self.path))
        self.fingerprint = (graph.get_rt_info([FINGERPRINT_KEY]).astype(str) if graph.has_rt_info([FINGERPRINT_KEY])
                            else None)
        width = graph.outputs[0].get_partial_shape()[-1]
        self.width = width.get_length() if width.is_static else None
        # float32 inference: on CPUs with bf16 units OpenVINO would otherwise compute in bfloat16 by default.
        properties = {"INFERENCE_PRECISION_HINT": "f32"}
        if self.num_threads is not None:
            properties["INFERENCE_NUM_THREADS"] = self.num_threads
        self.compiled = compiled = core.compile_model(graph, "CPU", properties)
        self._run = lambda inputs: tuple(compiled(dict(zip(INPUT_NAMES, inputs))).values())

    def __call__(self, inputs):
        return self._run(inputs)


class BackendModel:
    """A checkpoint's exported core, run on the CPU by `backend` ("onnx" or "openvino")."""

    device = torch.device("cpu")
    dtype = torch.float32

    def __init__(self, config: ContextEmbedConfig, backend: str, file: Path, fingerprint: str | None = None,
                 num_threads: int | None = None):
        """`fingerprint`: the checkpoint's `weights_fingerprint`; the graph must have been exported from it.
        `num_threads`: the runtime's threads (None: its default)."""
        self.config = config
        self.backend = backend
        self.file = file
        self._run = CoreRunner(backend, file, num_threads)
        if self._run.width is not None and self._run.width != config.embedding_dim:
            raise ValueError(f"{file} computes {self._run.width}-d vectors but the checkpoint's are "
                             f"{config.embedding_dim}-d: the graph was exported from another checkpoint. Re-run "
                             "`contextembed export` on this one")
        if fingerprint is not None and self._run.fingerprint != fingerprint:
            what = ("does not say which weights it was exported from (an older export)" if self._run.fingerprint
                    is None else "was exported from other weights than this checkpoint's")
            raise ValueError(f"{file} {what}: it would return another model's vectors. Re-run `contextembed "
                             "export` on this checkpoint")

    @classmethod
    def from_pretrained(cls, path: str | Path, backend: Literal["onnx", "openvino"],
                        file_name: str | None = None, num_threads: int | None = None) -> BackendModel:
        if backend not in BACKENDS[1:]:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        module, extra = EXTRAS[backend]
        try:
            __import__(module)
        except ImportError as error:
            raise ImportError(f"backend={backend!r} needs {module}: pip install 'contextembed[{extra}]'") from error
        path = Path(path)
        file = path / (file_name or DEFAULT_FILES[backend])
        if not file.is_file():
            raise ValueError(f"{path} has no {file.relative_to(path)}: run `contextembed export {path} --format "
                             f"{backend}` first")
        if num_threads is not None:
            check_count(num_threads, "num_threads")
        return cls(ContextEmbedConfig.from_pretrained(path), backend, file, weights_fingerprint(path), num_threads)

    def eval(self) -> BackendModel:
        return self

    def to(self, device) -> BackendModel:
        if torch.device(device).type != "cpu":
            raise ValueError(f"the {self.backend} backend runs on the CPU, got device={device!r}")
        return self

    def __call__(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor,
        token_attention_mask: torch.Tensor,
        chunk_ids: torch.LongTensor,
        output_dim: int | None = None,
        normalize: bool | None = None,
        max_seq_length: torch.Tensor | int | None = None,
        **unused,
    ) -> ContextEmbedOutput:
        """The features `ContextEmbedProcessor.pad` makes (chunk mask as `attention_mask`) -> chunk vectors."""
        if unused.get("token_type_ids") is not None:
            raise ValueError("the exported core takes no token_type_ids (the processor makes none)")
        sums, counts, _ = late_chunk_sums(
            self._core, input_ids, token_attention_mask, chunk_ids, attention_mask.shape[1],
            window_length(self.config, max_seq_length), width=self.config.embedding_dim,
            window_head_tokens=self.config.window_head_tokens, overlap=self.config.window_overlap,
            pad_id=pad_token_id(self.config),
        )
        # The core projected the sums already, so the head only takes the mean, cuts and normalises.
        embeddings = late_chunk_head(sums, counts, attention_mask, self.config, output_dim=output_dim,
                                     normalize=normalize)
        return ContextEmbedOutput(chunk_embeddings=embeddings, chunk_mask=attention_mask.long())

    def _core(self, ids, mask, cids, num_chunks, token_type_ids):
        chunk_mask = np.ones((ids.shape[0], num_chunks), dtype=np.int64)
        sums, counts = self._run([_int64(ids), _int64(mask), _int64(cids), chunk_mask])
        return torch.from_numpy(np.asarray(sums, dtype=np.float32)), torch.from_numpy(np.asarray(counts, np.float32))

    def __repr__(self) -> str:
        return f"BackendModel(backend={self.backend!r}, file={str(self.file)!r})"


def _int64(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().cpu().to(torch.int64).numpy()
