"""Long-document encoding on a GPU: random-weight models in bf16, whole documents in one pass.

Two models, both built with random weights (no download):

- `--model qwen3` (default): a Qwen3-0.6B-shaped backbone wrapped as `ContextEmbedModel` (bidirectional, 2048-d
  fp32 projection, Matryoshka 1024/2048 — the reference configuration); documents of `--tokens` tokens (chunks of 64
  tokens) one per forward pass. Prints tokens/s and model FLOP utilisation (MFU) against the card's dense bf16 peak
  (`--peak-tflops`, 989 for an H200 SXM).
- `--model pplx-v2-0.6b`: pplx-embed-v2-context as `contextembed convert` builds it (stock Qwen3.5 text backbone,
  Gated-DeltaNet and bidirectional full-attention layers, fp32 projection, tanh head) at the 0.6b geometry the
  public facts suggest (`PPLX_V2_06B`; inferred, see docs/pplx-v2.md), at 8,192 and 32,768 tokens per document by
  default. For each length: tokens/s and peak GPU memory of the whole model (backbone, pooling, head) against a plain
  forward of the same backbone, run side by side; first a check that every attention implementation keeps the
  full-attention layers bidirectional, and which Gated-DeltaNet kernels ran (flash-linear-attention and
  causal-conv1d when installed, transformers' pure-torch path otherwise).

Both use sdpa and, when the `flash_attn` package is installed, flash_attention_2.

    python bench/gpu.py                                     # on a CUDA machine
    python bench/gpu.py --model pplx-v2-0.6b                # 8k and 32k tokens per document
    python bench/gpu.py --model pipeline                    # the whole pipeline, real tokenisation (below)
    python bench/gpu.py --tiny [--model pplx-v2-0.6b]       # reduced size on the CPU (what CI can run)

`--model pipeline` runs `encode_documents` end to end on random-weight models with real tokenizers
(`bench/_models.py`): the Qwen3-0.6B reference at 32k tokens, pplx-embed-v2-context at its 0.6b geometry at 8k and
32k, and 512-token documents in bulk, padded and packed (one packed row a pass: variable-length flash attention where
installed, a block-diagonal mask on sdpa). Per case: tokens/s, MFU (Qwen3: from its FLOPs per token), the share of
the wall time the device waited for the host (CUDA events around each backbone call), and peak memory.

Last line: tokens/s of the best attention implementation (the whole model, at the longest length).
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import sys
import time
from pathlib import Path

import torch
from transformers import Qwen3_5TextConfig, Qwen3Config

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import interleaved, write_result  # noqa: E402

from contextembed.modeling import ContextEmbedConfig, ContextEmbedModel  # noqa: E402

MODELS = ("qwen3", "pplx-v2-0.6b", "pipeline")
# pplx-embed-v2-context-0.6b's geometry, inferred (docs/pplx-v2.md: from the public ports that read its remote code): 12 layers at hidden 1024, 6
# Gated-DeltaNet and 6 full attention (the sibling v2-late-0.6b's 150 layer tensors), vocabulary 248,320, 1024-d
# output; the head and MLP sizes are Qwen3.5's small-model ratios, chosen so that the text model has ~0.5B parameters.
PPLX_V2_06B = dict(vocab_size=248320, hidden_size=1024, intermediate_size=3584, num_hidden_layers=12,
                   num_attention_heads=8, num_key_value_heads=2, head_dim=256, linear_num_key_heads=16,
                   linear_num_value_heads=16, linear_key_head_dim=128, linear_value_head_dim=128,
                   layer_types=["linear_attention", "full_attention"] * 6)
PPLX_V2_TINY = dict(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
                    linear_key_head_dim=16, linear_value_head_dim=16,
                    layer_types=["linear_attention", "full_attention"] * 2)


def backbone_config(tiny: bool) -> Qwen3Config:
    if tiny:
        return Qwen3Config(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, head_dim=16, intermediate_size=128, max_position_embeddings=32768)
    return Qwen3Config(vocab_size=151936, hidden_size=1024, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, intermediate_size=3072, max_position_embeddings=32768)


def pplx_v2_config(tiny: bool) -> ContextEmbedConfig:
    """The configuration `contextembed convert` writes for a pplx-embed-v2-context folder, at `PPLX_V2_06B`."""
    geometry = PPLX_V2_TINY if tiny else PPLX_V2_06B
    text = Qwen3_5TextConfig(**geometry, max_position_embeddings=262144, use_cache=False)
    dim = geometry["hidden_size"]
    return ContextEmbedConfig(text_config=text, chunk_token_id=3, projection_dim=dim, matryoshka_dims=[dim // 2, dim],
                              head_activation="tanh", int8_scheme="bounded", default_precision="int8",
                              max_seq_length=262144, query_prefix="[Q] ", document_prefix="[D] ")


def flops_per_token(config: Qwen3Config, tokens: int) -> float:
    """Forward FLOPs per token: 2 x non-embedding parameters, plus attention scores and values."""
    h, layers, heads, head_dim = config.hidden_size, config.num_hidden_layers, config.num_attention_heads, config.head_dim
    kv = config.num_key_value_heads
    per_layer = 2 * (h * heads * head_dim + 2 * h * kv * head_dim + heads * head_dim * h) + 2 * 3 * h * config.intermediate_size
    attention = 2 * 2 * heads * head_dim * tokens  # QK^T and AV, bidirectional: every token sees all
    return layers * (per_layer + attention)


def document(tokens: int, vocab_size: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Random ids (1, T) and chunk ids (1, T): chunks of 64 tokens after two unpooled prefix tokens (like `[D] `)."""
    ids = torch.randint(10, vocab_size, (1, tokens), device=device)
    chunk_ids = (torch.arange(tokens, device=device) - 2).div(64, rounding_mode="floor").unsqueeze(0)
    chunk_ids[:, :2] = -1
    return ids, chunk_ids


def gdn_kernels() -> str:
    """Which Gated-DeltaNet kernels transformers uses on CUDA: the packages' when installed, else pure torch."""
    found = [name for name, module in (("flash-linear-attention", "fla"), ("causal-conv1d", "causal_conv1d"))
             if importlib.util.find_spec(module)]
    return ", ".join(found) if found else "pure torch (neither flash-linear-attention nor causal-conv1d installed)"


def is_bidirectional(model: ContextEmbedModel, device: str) -> bool:
    """Whether a token's final state changes when a later token changes (only full attention carries it back)."""
    ids = torch.randint(10, model.config.text_config.vocab_size, (1, 96), device=device)
    edited = ids.clone()
    edited[0, 90] = 5
    with torch.inference_mode():
        a, b = (model.backbone(input_ids=x).last_hidden_state[0, :32].float() for x in (ids, edited))
    return bool((a - b).abs().max() > 0)


def peak_gib(run, device: str) -> float | None:
    """Peak GPU memory of one call, GiB (None on the CPU)."""
    if device != "cuda":
        run()
        return None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    run()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / 2**30


def run_pplx_v2(args, device: str, dtype: torch.dtype, implementations: list[str]) -> tuple[list[str], dict, float]:
    lengths = args.tokens or ([256, 1024] if args.tiny else [8192, 32768])
    config = pplx_v2_config(args.tiny)
    lines, results, best = [], {"gdn_kernels": gdn_kernels(), "lengths": lengths}, 0.0
    for implementation in implementations:
        torch.manual_seed(0)
        with torch.device(device):
            model = ContextEmbedModel._from_config(config, attn_implementation=implementation)
        model.backbone.to(dtype)  # the projection stays fp32, as a converted checkpoint loads it
        model.eval()
        assert model.projection.weight.dtype == torch.float32
        bidirectional = is_bidirectional(model, device)
        params = sum(p.numel() for p in model.backbone.parameters())
        for tokens in lengths:
            ids, chunk_ids = document(tokens, config.text_config.vocab_size, device)

            def whole(model=model):
                out = model(input_ids=ids, chunk_ids=chunk_ids)
                assert out.chunk_embeddings.dtype == torch.float32
                if device == "cuda":
                    torch.cuda.synchronize()

            def plain(model=model):
                model.backbone(input_ids=ids)
                if device == "cuda":
                    torch.cuda.synchronize()

            with torch.inference_mode():
                seconds = interleaved({"model": whole, "backbone": plain}, repeats=args.docs)
                memory = {"model": peak_gib(whole, device), "backbone": peak_gib(plain, device)}
            rate = {name: tokens / s for name, s in seconds.items()}
            results[f"{implementation}/{tokens}"] = {"tokens_per_s": rate, "peak_gib": memory,
                                                     "bidirectional": bidirectional}
            gib = (f"{memory['model']:.2f} | {memory['backbone']:.2f} |" if memory["model"] is not None
                   else "n/a (CPU) | n/a |")
            lines.append(f"| {implementation} | {params / 1e6:.0f}M | {tokens} | {rate['model']:,.0f} | "
                         f"{rate['backbone']:,.0f} | {rate['model'] / rate['backbone']:.2f} | {gib} "
                         f"{'yes' if bidirectional else 'NO'} |")
            best = max(best, rate["model"]) if tokens == lengths[-1] else best
        del model
    header = [f"GDN kernels: {results['gdn_kernels']}.", "",
              "| attention | backbone params | tokens/doc | model tokens/s | backbone tokens/s | ratio | "
              "model peak GiB | backbone peak GiB | bidirectional |", "|---|---|---|---|---|---|---|---|---|"]
    return header + lines, results, best


def run_qwen3(args, device: str, dtype: torch.dtype, implementations: list[str]) -> tuple[list[str], dict, float]:
    tokens = (args.tokens or [2048 if args.tiny else 32768])[-1]
    lines, results, best = [], {}, 0.0
    for implementation in implementations:
        torch.manual_seed(0)
        text_config = backbone_config(args.tiny)
        config = ContextEmbedConfig.reference(text_config, chunk_token_id=3)
        model = ContextEmbedModel._from_config(config, dtype=dtype, attn_implementation=implementation)
        model = model.to(device).eval()
        params = sum(p.numel() for p in model.backbone.parameters())
        ids, chunk_ids = document(tokens, text_config.vocab_size, device)
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
    header = ["| attention | backbone params | tokens/doc | tokens/s | TFLOP/s | MFU | peak GiB |",
              "|---|---|---|---|---|---|---|"]
    return header + lines, results, best


def pipeline_documents(tokens: int, count: int, processor) -> list[list[str]]:
    """`count` documents of about `tokens` tokens each, of the shipped sets' real sentences (one chunk a sentence),
    cycling through them: real text through the real tokenizer."""
    import _models

    sentences = [s for d in _models.shipped_texts() for s in d]
    lengths = [len(t) for t in processor.tokenize_text(sentences)]
    documents, k = [], 0
    for _ in range(count):
        chunks, total = [], 0
        while total < tokens - 8:
            chunks.append(sentences[k % len(sentences)])
            total += lengths[k % len(sentences)] + 1
            k += 1
        documents.append(chunks)
    return documents


class DeviceTime:
    """The backbone's time on the device (CUDA events around each call): what the device was busy with; the rest
    of the wall time it waited for the host."""

    def __init__(self, backbone, device: str):
        self.device, self.pairs = device, []
        self.handles = [backbone.register_forward_pre_hook(self.before), backbone.register_forward_hook(self.after)]

    def before(self, *args):
        if self.device == "cuda":
            start = torch.cuda.Event(enable_timing=True)
            start.record()
            self.pairs.append([start, None])

    def after(self, *args):
        if self.device == "cuda":
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self.pairs[-1][1] = end

    def seconds(self) -> float | None:
        if self.device != "cuda":
            return None
        torch.cuda.synchronize()
        return sum(a.elapsed_time(b) for a, b in self.pairs) / 1000

    def remove(self):
        for handle in self.handles:
            handle.remove()


def run_pipeline(args, device: str, dtype: torch.dtype, implementations: list[str]) -> tuple[list[str], dict, float]:
    """The whole pipeline with real tokenisation (`encode_documents`): Qwen3-0.6B-shaped at 32k and pplx-v2-0.6b at
    8k and 32k, one document a pass; and 512-token documents in bulk, padded and packed."""
    import _models

    from contextembed.encoder import ContextEmbedder

    size = "negligible" if args.tiny else "0.6b"
    cases = [("qwen3", 1024 if args.tiny else 32768, args.docs, (False,)),
             ("pplx-v2", 512 if args.tiny else 8192, args.docs, (False,)),
             ("pplx-v2", 1024 if args.tiny else 32768, args.docs, (False,)),
             ("qwen3", 512, 64 if args.tiny else 4096, (False, True))]
    lines, results, best = [], {}, 0.0
    for layout, tokens, count, packings in cases:
        model, processor = _models.build(layout, size, max_seq_length=max(tokens, 512))
        documents = pipeline_documents(tokens, count, processor)
        real = sum(len(r["input_ids"]) for r in processor.tokenize_documents(documents, task="document"))
        flops = flops_per_token(model.config.text_config, tokens) if layout == "qwen3" else None
        for implementation in implementations:
            model.set_attn_implementation(implementation)
            model = model.to(device=device, dtype=dtype)
            model.projection.float()  # the projection stays fp32, as from_pretrained keeps it
            encoder = ContextEmbedder(model.eval(), processor)
            for pack in packings:
                encoder.model.forward = functools.partial(type(model).forward, model, pack=pack)
                encoder.encode_documents(documents[:2], show_progress_bar=False)  # warm-up
                busy = DeviceTime(model.backbone, device)
                if device == "cuda":
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                start = time.perf_counter()
                encoder.encode_documents(documents, show_progress_bar=False)
                if device == "cuda":
                    torch.cuda.synchronize()
                wall = time.perf_counter() - start
                device_seconds = busy.seconds()
                busy.remove()
                del encoder.model.forward
                rate = real / wall
                mfu = rate * flops / (args.peak_tflops * 1e12) if flops and device == "cuda" else None
                waited = 1 - device_seconds / wall if device_seconds is not None else None
                memory = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None
                key = f"{layout} {tokens} {implementation}{' packed' if pack else ''}"
                results[key] = {"tokens_per_s": rate, "mfu": mfu, "device_waited": waited, "peak_gib": memory,
                                "documents": count, "tokens": real}
                lines.append(f"| {layout} | {tokens:,} × {count} | {implementation}{', packed' if pack else ''} | "
                             f"{rate:,.0f} | " + (f"{mfu:.1%}" if mfu is not None else "n/a") + " | "
                             + (f"{waited:.1%}" if waited is not None else "n/a (CPU)") + " | "
                             + (f"{memory:.1f}" if memory is not None else "n/a") + " |")
                best = max(best, rate)
        del model
    header = ["Whole pipeline, real tokenisation (bench/_models.py: random weights, a BPE of Qwen's kind):", "",
              "| layout | tokens × documents | attention | tokens/s | MFU | device waited | peak GiB |",
              "|---|---|---|---|---|---|---|"]
    return header + lines, results, best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=MODELS, default="qwen3",
                        help="qwen3 (default), pplx-v2-0.6b, or pipeline (the whole encode, real tokenisation)")
    parser.add_argument("--tiny", action="store_true", help="small model and short documents, runs on the CPU")
    parser.add_argument("--tokens", type=int, nargs="+",
                        help="tokens per document (qwen3: 32768, tiny 2048; pplx-v2-0.6b: 8192 32768, tiny 256 1024)")
    parser.add_argument("--docs", type=int, default=4, help="timed passes per length (after one warm-up)")
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak of the device")
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    if not args.tiny and device == "cpu":
        print("no CUDA device: run with --tiny for the CPU-sized check", file=sys.stderr)
        return 2
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    implementations = ["sdpa"] + (["flash_attention_2"] if device == "cuda" and importlib.util.find_spec("flash_attn")
                                  else [])
    run = {"pplx-v2-0.6b": run_pplx_v2, "pipeline": run_pipeline}.get(args.model, run_qwen3)
    lines, results, best = run(args, device, dtype, implementations)
    device_name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    table = [f"Device: {device_name}; model {args.model}; {args.docs} passes per length, one document each, "
             f"{dtype}.", "", *lines]
    print("\n".join(table))
    name = "gpu" + {"pplx-v2-0.6b": "_pplx_v2", "pipeline": "_pipeline"}.get(args.model, "") + (
        "_tiny_cpu" if args.tiny else "")
    command = " ".join(["python bench/gpu.py", *sys.argv[1:]])
    write_result(name, command, table, results)
    print(f"tokens per second (best attention): {best:,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
