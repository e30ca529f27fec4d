"""bfloat16 vs float32 weights on this CPU: encoding throughput side by side, and how far the chunk vectors move.

    python bench/dtype.py [--docs N] [--repeats R]

Default model (MiniLM) on the shipped recipes set, the same documents and batches for both. `dtype="auto"` picks
bfloat16 only where the device computes it natively. Last line: the throughput ratio.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import interleaved, write_result  # noqa: E402

import contextembed  # noqa: E402
from contextembed.encoder import native_bf16  # noqa: E402
from contextembed.evaluation.datasets import shipped_dataset  # noqa: E402
from contextembed.evaluation.loaders import load_context_bench  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=64, help="documents from the shipped set (default 64)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    documents, _ = load_context_bench(shipped_dataset())
    docs = [d.sentences for d in documents[: args.docs]]
    models = {"float32": contextembed.load(), "bfloat16": contextembed.load(dtype="bfloat16")}
    vectors = {name: np.concatenate(m.encode_documents(docs, show_progress_bar=False)) for name, m in models.items()}
    cosine = (vectors["float32"] * vectors["bfloat16"]).sum(1)  # unit vectors
    codes = {name: np.concatenate(m.encode_documents(docs, precision="int8", show_progress_bar=False)).astype(int)
             for name, m in models.items()}
    code_diff = np.abs(codes["float32"] - codes["bfloat16"])
    seconds = interleaved({name: (lambda m=m: m.encode_documents(docs, show_progress_bar=False))
                           for name, m in models.items()}, repeats=args.repeats)
    ratio = seconds["float32"] / seconds["bfloat16"]
    lines = [
        f"{len(docs)} documents, {len(cosine)} chunks; native bf16 on this CPU: {native_bf16('cpu')}.",
        "",
        "| weights | median s |",
        "|---|---|",
        *(f"| {name} | {s:.3f} |" for name, s in seconds.items()),
        "",
        f"Throughput bfloat16 / float32: **{ratio:.2f}**; chunk cosine bf16 vs fp32 min {cosine.min():.5f}, mean "
        f"{cosine.mean():.6f}; int8 codes differ by up to {code_diff.max()} ({(code_diff > 0).mean():.1%} of codes).",
    ]
    print("\n".join(lines))
    write_result("dtype", "python bench/dtype.py", lines,
                 {"seconds": seconds, "ratio": ratio, "cosine_min": float(cosine.min()),
                  "cosine_mean": float(cosine.mean()), "int8_max_code_diff": int(code_diff.max()),
                  "native_bf16": native_bf16("cpu")})
    print(f"ratio bfloat16/float32 throughput: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
