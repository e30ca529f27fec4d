"""Shared fixtures: tiny random backbones (BERT, ModernBERT, Qwen3) and a tokenizer from a vocab file.

Nothing is downloaded: HF_HUB_OFFLINE=1 makes an accidental Hub access fail loudly.
"""

from __future__ import annotations

import copy
import os
import string

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402
from transformers import AutoModel, BertConfig, BertTokenizer, ModernBertConfig, Qwen3Config  # noqa: E402

import contextembed  # noqa: E402

FAMILIES = ("bert", "modernbert", "qwen3")
WORDS = (
    "the a an of to in is was and or for on at by with lease rent monthly tenant address street company "
    "she he it they table row section rule date year revision apartment landlord deposit one two three"
).split()
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
EXTRA_SPECIALS = ["<|endoftext|>"]


def write_vocab(directory) -> None:
    chars = string.ascii_lowercase + string.digits
    pieces = list(chars + string.punctuation) + ["##" + c for c in chars + string.punctuation]
    (directory / "vocab.txt").write_text("\n".join(SPECIALS + WORDS + pieces) + "\n")


def tiny_text_config(family: str, vocab_size: int):
    common = dict(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, pad_token_id=0)
    if family == "bert":
        return BertConfig(max_position_embeddings=512, **common)
    if family == "modernbert":
        return ModernBertConfig(max_position_embeddings=8192, global_attn_every_n_layers=2, local_attention=64,
                                cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3, **common)
    if family == "qwen3":
        return Qwen3Config(max_position_embeddings=32768, num_key_value_heads=2, head_dim=8,
                           tie_word_embeddings=False, **common)
    raise ValueError(family)


def make_backbone_dir(directory, family: str, seed: int = 0):
    """A tiny random backbone saved like a Hub checkpoint: weights, config and tokenizer files."""
    directory.mkdir(parents=True, exist_ok=True)
    write_vocab(directory)
    tokenizer = BertTokenizer.from_pretrained(directory)
    tokenizer.add_special_tokens({"extra_special_tokens": EXTRA_SPECIALS})
    tokenizer.save_pretrained(directory)
    torch.manual_seed(seed)
    model = AutoModel.from_config(tiny_text_config(family, len(tokenizer)))
    model.save_pretrained(directory)
    return directory


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def backbone_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("backbones")
    return {family: make_backbone_dir(root / family, family) for family in FAMILIES}


@pytest.fixture(scope="session")
def built(backbone_dirs, tmp_path_factory):
    """family -> (checkpoint dir, model, processor); a 16-d projection with Matryoshka 8/16."""
    root = tmp_path_factory.mktemp("checkpoints")
    result = {}
    for family, path in backbone_dirs.items():
        out = root / family
        model, processor = contextembed.build_checkpoint(path, out, projection_dim=16, matryoshka_dims=[8, 16],
                                                         max_seq_length=64)
        result[family] = (out, model, processor)
    return result


@pytest.fixture(params=FAMILIES)
def family(request):
    return request.param


@pytest.fixture
def model_and_processor(built, family):
    _, model, processor = built[family]
    return copy.deepcopy(model).eval(), processor


@pytest.fixture
def checkpoint_dir(built, family):
    return built[family][0]


@pytest.fixture(scope="session")
def default_model_cache(tmp_path_factory):
    """Build the real default model (packaged MiniLM) once, into a throwaway cache."""
    cache = tmp_path_factory.mktemp("contextembed-cache")
    previous = os.environ.get("CONTEXTEMBED_CACHE")
    os.environ["CONTEXTEMBED_CACHE"] = str(cache)
    from contextembed.default_model import default_model_path

    default_model_path()
    yield cache
    if previous is None:
        os.environ.pop("CONTEXTEMBED_CACHE", None)
    else:
        os.environ["CONTEXTEMBED_CACHE"] = previous


@pytest.fixture(scope="session")
def default_encoder(default_model_cache):
    return contextembed.load()
