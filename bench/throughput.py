"""Document encoding throughput: contextembed vs a plain transformers forward pass over the same tokens.

Both sides see exactly the same token ids, batch composition and padding (taken from contextembed's own
processor and token-budget batching); the plain side runs only `backbone(input_ids, attention_mask)`, the
physical limit. contextembed's side is the whole `encode_documents` call: tokenisation, batching, the forward
pass, pooling, and conversion to numpy. A third line encodes every chunk alone (the usual RAG pipeline) with
the same backbone, to show what context costs. Repeats are interleaved; medians are compared.

    python bench/throughput.py [--docs N] [--repeats R]
    python bench/throughput.py --local-mix 0.1    # what encode_documents(..., local_mix=0.1) costs instead

With `--local-mix W` it measures `encode_documents` with and without the chunk-alone mix (results in
`throughput_local_mix`), the cost of that option's second pass.

Default model (MiniLM) on the shipped recipes set (one-sentence chunks). Last line: the ratio.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import interleaved, write_result  # noqa: E402

import contextembed  # noqa: E402
from contextembed.encoder import default_max_tokens_per_batch, token_budget_batches  # noqa: E402
from contextembed.evaluation.datasets import shipped_dataset  # noqa: E402
from contextembed.evaluation.loaders import load_context_bench  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=160, help="documents from the shipped set (default all 160)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--model", help="checkpoint (default: the default model)")
    parser.add_argument("--local-mix", type=float, help="measure encode_documents(..., local_mix=W) against "
                        "encode_documents instead")
    args = parser.parse_args()

    encoder = contextembed.load(args.model)
    documents, _ = load_context_bench(shipped_dataset())
    docs = [d.sentences for d in documents[: args.docs]]
    rows = encoder.processor.tokenize_documents(docs, task="document")
    budget = default_max_tokens_per_batch(encoder.device)  # the passes encode_documents runs by default
    batches = [encoder.processor.pad([rows[i] for i in batch])
               for batch in token_budget_batches([len(r["input_ids"]) for r in rows], args.batch_size, budget)]
    backbone = encoder.model.backbone
    tokens = sum(len(r["input_ids"]) for r in rows)
    chunks = [[s] for doc in docs for s in doc]

    def plain():
        with torch.inference_mode():
            for batch in batches:
                backbone(input_ids=batch["input_ids"], attention_mask=batch["token_attention_mask"])

    def ours():
        encoder.encode_documents(docs, batch_size=args.batch_size, show_progress_bar=False)

    def independent():
        encoder.encode_documents(chunks, batch_size=args.batch_size, show_progress_bar=False)

    if args.local_mix is not None:
        return local_mix_cost(encoder, docs, chunks, tokens, ours, args)
    seconds = interleaved({"plain forward": plain, "contextembed": ours, "chunks alone": independent},
                          repeats=args.repeats)
    ratio = seconds["plain forward"] / seconds["contextembed"]
    context_cost = seconds["chunks alone"] / seconds["contextembed"]
    lines = [
        *pipeline_table(docs, chunks, tokens, seconds),
        f"Throughput of contextembed / plain forward on the same tokens: **{ratio:.3f}** (target ≥ 0.97).",
        f"Throughput of contextembed / each chunk encoded alone: **{context_cost:.2f}**.",
    ]
    print("\n".join(lines))
    write_result("throughput", "python bench/throughput.py", lines,
                 {"seconds": seconds, "ratio_vs_plain": ratio, "ratio_vs_independent": context_cost,
                  "documents": len(docs), "chunks": len(chunks), "tokens": tokens})
    print(f"ratio contextembed/plain-forward throughput: {ratio:.3f}")
    return 0


def pipeline_table(docs, chunks, tokens, seconds: dict[str, float]) -> list[str]:
    """The corpus line and the table of median seconds, each pipeline's throughput relative to contextembed's."""
    return [
        f"{len(docs)} documents, {len(chunks)} one-sentence chunks, {tokens} tokens with late chunking.",
        "",
        "| pipeline | median s | relative throughput |",
        "|---|---|---|",
        *(f"| {name} | {s:.3f} | {seconds['contextembed'] / s:.2f}× contextembed |" for name, s in seconds.items()),
        "",
    ]


def local_mix_cost(encoder, docs, chunks, tokens, ours, args) -> int:
    name = f"contextembed, local_mix {args.local_mix:g}"

    def mixed():
        encoder.encode_documents(docs, batch_size=args.batch_size, show_progress_bar=False, local_mix=args.local_mix)

    seconds = interleaved({"contextembed": ours, name: mixed}, repeats=args.repeats)
    ratio = seconds["contextembed"] / seconds[name]
    lines = [
        *pipeline_table(docs, chunks, tokens, seconds),
        f"Throughput with local_mix {args.local_mix:g} / without: **{ratio:.2f}** (a second pass over every chunk "
        "alone).",
    ]
    print("\n".join(lines))
    write_result("throughput_local_mix", f"python bench/throughput.py --local-mix {args.local_mix:g}", lines,
                 {"seconds": seconds, "ratio_local_mix": ratio, "local_mix": args.local_mix,
                  "documents": len(docs), "chunks": len(chunks), "tokens": tokens})
    print(f"ratio throughput with/without local_mix: {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
