"""Deployment backends vs torch float32 on this CPU: encoding throughput side by side, and how far vectors move.

    python bench/backends.py [--docs N] [--repeats R] [--model CHECKPOINT]

The default model (MiniLM) is copied to a temporary folder and exported there (`contextembed export`: ONNX,
ONNX with dynamic int8 weights, OpenVINO); torch bfloat16 weights are the fifth row. Same documents and batches
for all: the shipped recipes set, plus four documents longer than the 512-token window, so the windowed path is
measured too. Last line: the ONNX / torch float32 throughput ratio.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import interleaved, write_result  # noqa: E402

import contextembed  # noqa: E402
from contextembed.backends import export  # noqa: E402
from contextembed.default_model import default_model_path  # noqa: E402
from contextembed.encoder import native_bf16  # noqa: E402
from contextembed.evaluation.datasets import shipped_dataset  # noqa: E402
from contextembed.evaluation.loaders import load_context_bench  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=64, help="documents from the shipped set (default 64)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model", help="checkpoint folder to export (default: the default model; the tests pass a "
                                        "tiny one)")
    args = parser.parse_args()
    documents, _ = load_context_bench(shipped_dataset())
    docs = [d.sentences for d in documents[: args.docs]]
    docs += [sum((d.sentences for d in documents[i : i + 6]), []) for i in range(0, 24, 6)]  # > 512 tokens each
    with tempfile.TemporaryDirectory() as tmp:
        path = shutil.copytree(args.model or default_model_path(), Path(tmp) / "model")
        export(path, "onnx", quantize="int8")
        export(path, "openvino")
        models = {
            "torch float32": contextembed.load(path),
            "torch bfloat16": contextembed.load(path, dtype="bfloat16"),
            "ONNX Runtime": contextembed.load(path, backend="onnx"),
            "ONNX Runtime, int8 weights": contextembed.load(path, backend="onnx", file_name="onnx/model_qint8.onnx"),
            "OpenVINO": contextembed.load(path, backend="openvino"),
        }
        vectors = {name: np.concatenate(m.encode_documents(docs, show_progress_bar=False))
                   for name, m in models.items()}
        seconds = interleaved({name: (lambda m=m: m.encode_documents(docs, show_progress_bar=False))
                               for name, m in models.items()}, repeats=args.repeats)
    reference = vectors["torch float32"]
    rows = {}
    for name in models:
        cosine = (vectors[name] * reference).sum(1)  # unit vectors
        rows[name] = {"seconds": seconds[name], "ratio": seconds["torch float32"] / seconds[name],
                      "cosine_min": float(cosine.min()), "cosine_mean": float(cosine.mean()),
                      "max_abs_diff": float(np.abs(vectors[name] - reference).max())}
    n_tokens = sum(len(r["input_ids"]) for r in models["torch float32"].processor.tokenize_documents(docs))
    lines = [
        f"Model: {'the default model (MiniLM)' if args.model is None else Path(args.model).name}. "
        f"{len(docs)} documents ({len(docs) - args.docs} of them longer than the 512-token window), {len(reference)} "
        f"chunks, {n_tokens} tokens; native bf16 on this CPU: {native_bf16('cpu')}. Throughput ratio = torch "
        "float32 time / backend time (> 1: faster); cosine and max |diff| of each chunk vector against torch float32.",
        "",
        "| backend | median s | throughput vs torch fp32 | chunk cosine min / mean | max abs diff |",
        "|---|---|---|---|---|",
        *(f"| {name} | {r['seconds']:.3f} | {r['ratio']:.2f} | {r['cosine_min']:.6f} / {r['cosine_mean']:.6f} | "
          f"{r['max_abs_diff']:.1e} |" for name, r in rows.items()),
    ]
    print("\n".join(lines))
    write_result("backends", "python bench/backends.py", lines, {"rows": rows, "native_bf16": native_bf16("cpu")})
    print(f"ratio ONNX/torch float32 throughput: {rows['ONNX Runtime']['ratio']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
