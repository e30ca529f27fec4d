"""Running an exported core (ONNX Runtime or OpenVINO) with the torch model's pooling and windowing around it.

`BackendModel` answers the same call as `ContextEmbedModel` for the features the processor makes, so
`ContextEmbedder` (and everything built on it) works unchanged: rows that fit the window run in one call of the
graph, longer documents in the same windows as in torch (`late_chunk_sums`), then mean, Matryoshka cut and L2
normalisation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from contextembed.backends.core import INPUT_NAMES
from contextembed.modeling import ContextEmbedConfig
from contextembed.modeling.modeling_contextembed import (
    ContextEmbedOutput,
    cut_and_normalize,
    late_chunk_sums,
    pad_token_id,
)

BACKENDS = ("torch", "onnx", "openvino")
DEFAULT_FILES = {"onnx": "onnx/model.onnx", "openvino": "openvino/openvino_model.xml"}
EXTRAS = {"onnx": ("onnxruntime", "onnx"), "openvino": ("openvino", "openvino")}


def core_runner(backend: str, path: str | Path):
    """`run(inputs) -> (chunk_sums, chunk_counts)` for an exported core: numpy arrays in `INPUT_NAMES` order."""
    if backend == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return lambda inputs: session.run(None, dict(zip(INPUT_NAMES, inputs)))
    import openvino as ov

    # float32 inference: on CPUs with bf16 units OpenVINO would otherwise compute in bfloat16 by default.
    compiled = ov.Core().compile_model(str(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return lambda inputs: tuple(compiled(dict(zip(INPUT_NAMES, inputs))).values())


class BackendModel:
    """A checkpoint's exported core, run on the CPU by `backend` ("onnx" or "openvino")."""

    device = torch.device("cpu")
    dtype = torch.float32

    def __init__(self, config: ContextEmbedConfig, backend: str, file: Path):
        self.config = config
        self.backend = backend
        self.file = file
        self._run = core_runner(backend, file)

    @classmethod
    def from_pretrained(cls, path: str | Path, backend: str, file_name: str | None = None) -> BackendModel:
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
        return cls(ContextEmbedConfig.from_pretrained(path), backend, file)

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
        window = self.config.max_seq_length
        if max_seq_length is not None:
            window = min(window, int(torch.as_tensor(max_seq_length).max()))
        sums, counts = late_chunk_sums(
            self._core, input_ids, token_attention_mask, chunk_ids, attention_mask.shape[1], window,
            width=self.config.full_dim, head_tokens=self.config.window_head_tokens,
            overlap=self.config.window_overlap, pad_id=pad_token_id(self.config),
        )
        embeddings = cut_and_normalize(sums / counts.clamp(min=1.0).unsqueeze(-1), self.config, output_dim, normalize)
        embeddings = embeddings * attention_mask.unsqueeze(-1).to(embeddings.dtype)
        return ContextEmbedOutput(chunk_embeddings=embeddings, chunk_mask=attention_mask.long())

    def _core(self, ids, mask, cids, num_chunks, token_type_ids):
        chunk_mask = np.ones((ids.shape[0], num_chunks), dtype=np.int64)
        sums, counts = self._run([_int64(ids), _int64(mask), _int64(cids), chunk_mask])
        return torch.from_numpy(np.asarray(sums, dtype=np.float32)), torch.from_numpy(np.asarray(counts, np.float32))

    def __repr__(self) -> str:
        return f"BackendModel(backend={self.backend!r}, file={str(self.file)!r})"


def _int64(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().cpu().to(torch.int64).numpy()
