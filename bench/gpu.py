"""Long-document encoding on a GPU: a random Qwen3-class backbone in bf16, 32,768-token documents in one pass.

Builds a Qwen3-0.6B-shaped backbone with random weights (no download), wraps it as `ContextEmbedModel`
(bidirectional, 2048-d fp32 projection, Matryoshka 1024/2048 — the reference configuration), and encodes
documents of `--tokens` tokens (chunks of 64 tokens) one per forward pass, with sdpa and, when the
`flash_attn` package is installed, flash_attention_2. Prints tokens/s and model FLOP utilisation (MFU) against
the card's dense bf16 peak (`--peak-tflops`, 989 for an H200 SXM).

    python bench/gpu.py                      # on a CUDA machine
    python bench/gpu.py --tiny               # reduced size on the CPU (what CI can run)

Last line: tokens/s of the best attention implementation.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import torch
from transformers import Qwen3Config

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_result  # noqa: E402

from contextembed.modeling import ContextEmbedConfig, ContextEmbedModel  # noqa: E402


def backbone_config(tiny: bool) -> Qwen3Config:
    if tiny:
        return Qwen3Config(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, head_dim=16, intermediate_size=128, max_position_embeddings=32768)
    return Qwen3Config(vocab_size=151936, hidden_size=1024, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, intermediate_size=3072, max_position_embeddings=32768)


def flops_per_token(config: Qwen3Config, tokens: int) -> float:
    """Forward FLOPs per token: 2 x non-embedding parameters, plus attention scores and values."""
    h, layers, heads, head_dim = config.hidden_size, config.num_hidden_layers, config.num_attention_heads, config.head_dim
    kv = config.num_key_value_heads
    per_layer = 2 * (h * heads * head_dim + 2 * h * kv * head_dim + heads * head_dim * h) + 2 * 3 * h * config.intermediate_size
    attention = 2 * 2 * heads * head_dim * tokens  # QK^T and AV, bidirectional: every token sees all
    return layers * (per_layer + attention)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="small model and 2k tokens, runs on the CPU")
    parser.add_argument("--tokens", type=int, help="tokens per document (default 32768, tiny 2048)")
    parser.add_argument("--docs", type=int, default=4, help="documents to time (after one warm-up)")
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak of the device")
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    if not args.tiny and device == "cpu":
        print("no CUDA device: run with --tiny for the CPU-sized check", file=sys.stderr)
        return 2
    tokens = args.tokens or (2048 if args.tiny else 32768)
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    implementations = ["sdpa"] + (["flash_attention_2"] if device == "cuda" and importlib.util.find_spec("flash_attn")
                                  else [])
    torch.manual_seed(0)
    lines, best = [], 0.0
    results = {}
    for implementation in implementations:
        text_config = backbone_config(args.tiny)
        config = ContextEmbedConfig.reference(text_config, chunk_token_id=3)
        model = ContextEmbedModel._from_config(config, dtype=dtype, attn_implementation=implementation)
        model = model.to(device).eval()
        params = sum(p.numel() for p in model.backbone.parameters())
        ids = torch.randint(10, text_config.vocab_size, (1, tokens), device=device)
        chunk_ids = torch.arange(tokens, device=device).div(64, rounding_mode="floor").unsqueeze(0)
        chunk_ids[:, 0] = -1
        chunk_ids[:, -1] = -1
        with torch.inference_mode():
            out = model(input_ids=ids, chunk_ids=chunk_ids)  # warm-up
            assert out.chunk_embeddings.dtype == torch.float32 and out.chunk_embeddings.shape[-1] == 2048
            if device == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            start = time.perf_counter()
            for _ in range(args.docs):
                model(input_ids=ids, chunk_ids=chunk_ids)
            if device == "cuda":
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
        rate = args.docs * tokens / seconds
        achieved = rate * flops_per_token(text_config, tokens)
        mfu = achieved / (args.peak_tflops * 1e12) if device == "cuda" else None
        memory = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None
        results[implementation] = {"tokens_per_s": rate, "tflops": achieved / 1e12, "mfu": mfu, "peak_gib": memory}
        lines.append(f"| {implementation} | {params / 1e6:.0f}M | {tokens} | {rate:,.0f} | {achieved / 1e12:.1f} | "
                     + (f"{mfu:.1%} | {memory:.1f} |" if mfu is not None else "n/a (CPU) | n/a |"))
        best = max(best, rate)
        del model
    device_name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    table = [f"Device: {device_name}; {args.docs} documents of {tokens} tokens, one pass each, {dtype}.", "",
             "| attention | backbone params | tokens/doc | tokens/s | TFLOP/s | MFU | peak GiB |",
             "|---|---|---|---|---|---|---|", *lines]
    print("\n".join(table))
    name = "gpu_tiny_cpu" if args.tiny else "gpu"
    write_result(name, "python bench/gpu.py" + (" --tiny" if args.tiny else ""), table, results)
    print(f"tokens per second (best attention): {best:,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
