"""A tiny random pplx-embed-v2-context folder laid out as published, and the published computation over it.

The folder (`make_source`) follows the published layout (docs/pplx-v2.md): a Qwen3.5 VL `config.json` of model type
`pplx_contextual_qwen3_5` with the retrieval fields and an `auto_map` whose files write a marker file if anything
ever imports them; `language_model.*` and `visual.*` weights in shards with an index; `contextual_projection.weight`
(fp32, [E, H]) in `contextual_head.safetensors`; a byte-level BPE tokenizer (NFC, Qwen's split pattern) with special
`[Q] ` and `[D] ` and a non-special `<|chunk_sep|>`.

`Reference` is the computation as the ports describe it, written here from stock transformers only
(`Qwen3_5TextModel`, eager attention, the tokenizer called as the reference calls it): queries are the `[Q] ` id and
the text's tokens, meaned whole; documents are `"[D] " + marker.join(chunks)` tokenised once, each chunk the mean of
the tokens whose character offsets overlap its range (an empty chunk a zero vector); then the fp32 projection, tanh,
int8 = round(tanh(x) * 127) and float = normalize(tanh(x)).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3_5Config, Qwen3_5Model, Qwen3_5TextConfig, Qwen3_5TextModel

QUERY_PREFIX, DOCUMENT_PREFIX, MARKER = "[Q] ", "[D] ", "<|chunk_sep|>"
SPLIT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|"""
         r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
CORPUS = ("the lease of the street is signed by the tenant and the company pays the monthly rent on the first day; "
          "she moved to the apartment in the year of the revision, café naïve résumé, table row section rule date "
          "deposit landlord address one two three [D] [Q] <chunk> ]").split(";")


def tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE like Qwen3.5's (NFC, its split pattern, no BOS, nothing appended), trained on a few lines."""
    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(SPLIT), behavior="isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(CORPUS * 4, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    fast.add_special_tokens({"additional_special_tokens": [QUERY_PREFIX, DOCUMENT_PREFIX]})
    fast.add_tokens([MARKER])  # not special: the reference's `split_special_tokens=True` leaves it whole
    return fast


def text_config(vocab_size: int, hidden: int = 32, document_length: int = 262144) -> dict:
    config = Qwen3_5TextConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                               num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                               linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
                               linear_value_head_dim=8, max_position_embeddings=document_length, use_cache=False,
                               layer_types=["linear_attention", "full_attention"] * 2, pad_token_id=None,
                               eos_token_id=0).to_dict()
    # Keys the published text_config carries beyond stock transformers' (is_causal: its only bidirectional switch).
    return config | {"is_causal": False, "attn_output_gate": True, "mamba_ssm_dtype": "float32"}


VISION = {"model_type": "qwen3_5_vision", "depth": 1, "hidden_size": 16, "intermediate_size": 32, "num_heads": 2,
          "out_hidden_size": 32, "patch_size": 4, "temporal_patch_size": 2, "spatial_merge_size": 2,
          "num_position_embeddings": 16}

REMOTE_CODE = """from pathlib import Path
Path({marker!r}).write_text("imported {name}")
raise ImportError("the remote code of a pplx-embed-v2-context folder must never run")
"""


def make_source(directory: Path, *, marker: Path, embedding_dim: int = 16, hidden: int = 32, seed: int = 0,
                index_lists_head: bool = False, document_length: int = 262144) -> Path:
    """Write the folder; `marker` is the file the remote code would write if it ever ran."""
    directory.mkdir(parents=True, exist_ok=True)
    fast = tokenizer()
    fast.save_pretrained(directory)
    text = text_config(len(fast), hidden, document_length)
    torch.manual_seed(seed)
    model = Qwen3_5Model(Qwen3_5Config(text_config={k: v for k, v in text.items() if k != "is_causal"},
                                       vision_config=VISION)).eval()
    config = {
        "architectures": ["PplxContextualModel"], "model_type": "pplx_contextual_qwen3_5",
        "auto_map": {"AutoConfig": "configuration_pplx_contextual.PplxContextualConfig",
                     "AutoModel": "modeling_pplx_contextual.PplxContextualModel"},
        "embedding_dim": embedding_dim, "query_prefix": QUERY_PREFIX, "document_prefix": DOCUMENT_PREFIX,
        "boundary_marker": MARKER, "query_length": document_length, "document_length": document_length,
        "text_config": text, "vision_config": VISION, "image_token_id": 5, "video_token_id": 6,
        "vision_start_token_id": 7, "vision_end_token_id": 8, "tie_word_embeddings": False, "dtype": "float32",
        "transformers_version": "5.4.0",
    }
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    for name in ("configuration_pplx_contextual", "modeling_pplx_contextual"):
        (directory / f"{name}.py").write_text(REMOTE_CODE.format(marker=str(marker), name=name))

    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    assert any(k.startswith("visual.") for k in state) and any(k.startswith("language_model.") for k in state)
    keys = sorted(state)
    shards = {"model-00001-of-00002.safetensors": keys[: len(keys) // 2],
              "model-00002-of-00002.safetensors": keys[len(keys) // 2 :]}
    weight_map = {}
    for name, names in shards.items():
        save_file({k: state[k] for k in names}, str(directory / name), metadata={"format": "pt"})
        weight_map |= dict.fromkeys(names, name)
    projection = torch.randn(embedding_dim, hidden, dtype=torch.float32) / hidden**0.5
    save_file({"contextual_projection.weight": projection}, str(directory / "contextual_head.safetensors"))
    if index_lists_head:
        weight_map["contextual_projection.weight"] = "contextual_head.safetensors"
    total = sum(t.numel() * t.element_size() for t in state.values())
    (directory / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": total},
                                                                        "weight_map": weight_map}))
    return directory


class Reference:
    """The published computation over a `make_source` folder, from stock transformers (eager attention)."""

    def __init__(self, source: Path, attn_implementation: str = "eager"):
        config = json.loads((source / "config.json").read_text())
        text = dict(config["text_config"])
        text.pop("model_type")
        text_config = Qwen3_5TextConfig(**text)
        text_config._attn_implementation = attn_implementation
        self.model = Qwen3_5TextModel(text_config).eval()
        index = json.loads((source / "model.safetensors.index.json").read_text())["weight_map"]
        state = {}
        for name in sorted(set(index.values())):
            with safe_open(str(source / name), "pt") as f:
                state |= {k.removeprefix("language_model."): f.get_tensor(k) for k in f.keys()
                          if k.startswith("language_model.")}
        self.model.load_state_dict(state, strict=True)
        with safe_open(str(source / "contextual_head.safetensors"), "pt") as f:
            self.projection = f.get_tensor("contextual_projection.weight")  # (E, H), fp32
        self.tokenizer = PreTrainedTokenizerFast.from_pretrained(source)
        self.query_id = self.tokenizer.convert_tokens_to_ids(QUERY_PREFIX)

    def _states(self, ids: list[int]) -> torch.Tensor:
        with torch.no_grad():
            return self.model(input_ids=torch.tensor([ids])).last_hidden_state[0].float()  # (T, H)

    def head(self, pooled: torch.Tensor) -> torch.Tensor:
        return torch.tanh(pooled @ self.projection.T)  # (n, E): tanh(x), before rounding or normalising

    def query(self, text: str) -> torch.Tensor:
        ids = [self.query_id] + self.tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
        return self.head(self._states(ids).mean(0, keepdim=True))[0]

    def document(self, chunks: list[str]) -> tuple[torch.Tensor, list[int]]:
        """tanh(x) per chunk (n, E) and the token ids of the document."""
        text = DOCUMENT_PREFIX + MARKER.join(chunks)
        encoded = self.tokenizer(text, add_special_tokens=False, split_special_tokens=True, truncation=False,
                                 return_offsets_mapping=True)
        states = self._states(encoded["input_ids"])
        pooled, start = [], len(DOCUMENT_PREFIX)
        for chunk in chunks:
            end = start + len(chunk)
            rows = [t for t, (s, e) in enumerate(encoded["offset_mapping"]) if s < end and e > start]
            pooled.append(states[rows].mean(0) if rows else torch.zeros(states.shape[1]))
            start = end + len(MARKER)
        return self.head(torch.stack(pooled)), encoded["input_ids"]


def int8(tanh_x: torch.Tensor) -> torch.Tensor:
    return torch.round(tanh_x * 127).clamp(-128, 127)


def unit(tanh_x: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    cut = tanh_x[..., :dim] if dim else tanh_x
    return torch.nn.functional.normalize(cut, dim=-1)
