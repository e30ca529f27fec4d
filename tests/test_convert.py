"""`contextembed convert`: a checkpoint laid out like Perplexity's pplx-embed-context-v1 gives the vectors and int8
codes of an independent reimplementation of its pooling, and loads with trust_remote_code=False."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3Model

import contextembed
from contextembed.cli import main
from contextembed.convert import convert_pplx

WORDS = "the lease rent tenant street company she her it pays table row section rule date year a of to is".split()
SEPARATOR = "<|endoftext|>"
DOCS = [["the tenant pays rent", "she is the tenant of the street", "it is a row"], ["her lease"],
        ["the company pays the rule", "a date of the year is it", "table", "rent rent rent to the street"]]


@pytest.fixture(scope="module")
def pplx_dir(tmp_path_factory):
    """A tiny random checkpoint in pplx-embed-context-v1's layout: plain Qwen3 keys (no prefix, no head), a config
    naming its remote code, and a byte-level-free tokenizer that adds no special tokens, with `<|endoftext|>`."""
    path = tmp_path_factory.mktemp("pplx")
    vocab = {token: i for i, token in enumerate(["[UNK]", *WORDS, SEPARATOR, "<|im_start|>"])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token=SEPARATOR,
                                        eos_token="<|im_start|>")
    tokenizer.add_special_tokens({"additional_special_tokens": [SEPARATOR]})
    tokenizer.save_pretrained(path)
    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=8, intermediate_size=64, max_position_embeddings=4096,
                         tie_word_embeddings=False)
    Qwen3Model(config).save_pretrained(path)
    raw = json.loads((path / "config.json").read_text())
    raw.update(model_type="bidirectional_pplx_qwen3", architectures=["PPLXQwen3Model"], use_bidirectional_attention=True,
               use_cache=False, auto_map={"AutoConfig": "configuration.PPLXQwen3Config",
                                          "AutoModel": "modeling.PPLXQwen3ContextualModel"})
    (path / "config.json").write_text(json.dumps(raw))
    return path


def reference_chunks(path, documents):
    """pplx's pooling restated: join the chunks with `<|endoftext|>` as one string, run a stock Qwen3Model without
    the causal mask on it alone, and average the final states of each span between separators."""
    tokenizer = PreTrainedTokenizerFast.from_pretrained(path)
    config = Qwen3Config.from_dict({k: v for k, v in json.loads((path / "config.json").read_text()).items()
                                    if k not in ("model_type", "auto_map", "architectures")})
    config.is_causal = False
    model = Qwen3Model.from_pretrained(path, config=config).eval()
    separator = tokenizer.convert_tokens_to_ids(SEPARATOR)
    out = []
    for chunks in documents:
        ids = tokenizer(SEPARATOR.join(chunks), add_special_tokens=True, return_tensors="pt")["input_ids"]
        with torch.inference_mode():
            hidden = model(input_ids=ids).last_hidden_state[0]
        cuts = [-1, *(ids[0] == separator).nonzero().flatten().tolist(), len(ids[0])]
        out.append(torch.stack([hidden[a + 1 : b].mean(0) for a, b in zip(cuts[:-1], cuts[1:])]).numpy())
    return out


def test_reference_is_bidirectional(pplx_dir):
    """The check below is only worth something if the reference itself sees the whole document."""
    a = reference_chunks(pplx_dir, [["the tenant pays rent", "she is here"]])[0]
    b = reference_chunks(pplx_dir, [["the tenant pays rent", "it is a table"]])[0]
    assert np.abs(a[0] - b[0]).max() > 1e-3


def test_converted_matches_the_reference_pooling_and_int8(pplx_dir, tmp_path):
    model, processor = convert_pplx(pplx_dir, tmp_path / "converted", source_id="org/tiny-pplx")
    assert model.config.chunk_token == SEPARATOR and model.config.int8_scheme == "tanh"
    encoder = contextembed.load(tmp_path / "converted")
    expected = reference_chunks(pplx_dir, DOCS)
    raw = encoder.encode_documents(DOCS, normalize=False)  # one padded batch of three documents
    for got, ref in zip(raw, expected):
        np.testing.assert_allclose(got, ref, atol=1e-5, rtol=0)
    for got, ref in zip(encoder.encode_documents(DOCS), expected):
        np.testing.assert_allclose(got, ref / np.linalg.norm(ref, axis=1, keepdims=True), atol=1e-5, rtol=0)
    for got, ref in zip(encoder.encode_documents(DOCS, precision="int8"), expected):
        np.testing.assert_array_equal(got, np.clip(np.rint(np.tanh(ref) * 127), -127, 127).astype(np.int8))
    # A query is a one-chunk document, as the card advises.
    np.testing.assert_allclose(encoder.encode_queries(["who pays rent"], normalize=False)[0],
                               reference_chunks(pplx_dir, [["who pays rent"]])[0][0], atol=1e-5, rtol=0)
    card = (tmp_path / "converted" / "README.md").read_text()
    assert "base_model: org/tiny-pplx" in card and "not on these weights" in card


def test_load_converts_a_pplx_folder_in_memory(pplx_dir):
    encoder = contextembed.load(pplx_dir)
    for got, ref in zip(encoder.encode_documents(DOCS, normalize=False), reference_chunks(pplx_dir, DOCS)):
        np.testing.assert_allclose(got, ref, atol=1e-5, rtol=0)


FRESH = """
import json, sys
import numpy as np
import contextembed
from sentence_transformers import SentenceTransformer
from transformers import AutoModel, AutoProcessor
path = sys.argv[1]
docs = json.loads(sys.argv[2])
st = SentenceTransformer(path, trust_remote_code=False, device="cpu")
got = st.encode_document(contextembed.as_chunked(docs), output_value="token_embeddings")
model = AutoModel.from_pretrained(path, trust_remote_code=False)
print(json.dumps([g.cpu().numpy().tolist() for g in got]))
"""


@pytest.mark.slow
def test_converted_loads_with_trust_off_in_a_fresh_process(pplx_dir, tmp_path):
    assert main(["convert", str(pplx_dir), str(tmp_path / "out")]) == 0
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["model_type"] == "contextembed" and "auto_map" not in config and "auto_map" not in config[
        "text_config"]
    assert not list((tmp_path / "out").glob("*.py"))
    result = subprocess.run([sys.executable, "-c", FRESH, str(tmp_path / "out"), json.dumps(DOCS)],
                            capture_output=True, text=True, check=True,
                            env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"})
    got = json.loads(result.stdout.strip().splitlines()[-1])
    for g, ref in zip(got, reference_chunks(pplx_dir, DOCS)):
        np.testing.assert_allclose(np.array(g), ref / np.linalg.norm(ref, axis=1, keepdims=True), atol=1e-5, rtol=0)


def test_bad_sources(pplx_dir, built, tmp_path):
    with pytest.raises(ValueError, match="not a pplx-embed-context-v1 checkpoint"):
        convert_pplx(built["qwen3"][0])
    with pytest.raises(ValueError, match="no config.json"):
        convert_pplx(tmp_path)
    broken = tmp_path / "broken"
    import shutil

    shutil.copytree(pplx_dir, broken)
    raw = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**raw, "num_hidden_layers": 3}))
    with pytest.raises(ValueError, match="not a valid Qwen3 config"):
        convert_pplx(broken)  # 3 layers, 2 layer types
    raw.pop("layer_types", None)
    (broken / "config.json").write_text(json.dumps({**raw, "num_hidden_layers": 3}))
    with pytest.raises(ValueError, match="missing keys"):
        convert_pplx(broken)  # 3 layers in the config, 2 in the weights
    with pytest.raises(ValueError, match="QAT"):
        from contextembed.training import TrainConfig, train

        train(convert_pplx(pplx_dir, tmp_path / "c")[0] and tmp_path / "c", tmp_path / "none.jsonl", tmp_path / "t",
              TrainConfig.from_dict(max_steps=1))


def test_damaged_sources_are_named(pplx_dir, tmp_path):
    import shutil

    for name, damage, message in [
        ("config.json", lambda p: p.write_text('{"model_type": "bidirect'), r"cannot read .*config.json.* as JSON"),
        ("model.safetensors", lambda p: p.write_bytes(p.read_bytes()[:1000]),
         r"model.safetensors is damaged or truncated"),
        ("tokenizer.json", lambda p: p.write_text("not json"), r"cannot read .*tokenizer.json.* as JSON"),
    ]:
        broken = tmp_path / name
        shutil.copytree(pplx_dir, broken)
        damage(broken / name)
        with pytest.raises(ValueError, match=message):
            convert_pplx(broken)
        with pytest.raises(ValueError, match=message):
            contextembed.load(str(broken))  # the in-memory route reads the same files


def test_convert_never_writes_into_a_folder_of_other_files(pplx_dir, tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "README.md").write_text("my notes")
    assert main(["convert", str(pplx_dir), str(mine)]) == 2
    assert "is a non-empty folder that is not a contextembed checkpoint" in capsys.readouterr().err
    assert [p.name for p in mine.iterdir()] == ["README.md"] and (mine / "README.md").read_text() == "my notes"
    assert main(["convert", str(pplx_dir), str(tmp_path / "out")]) == 0
    assert main(["convert", str(pplx_dir), str(tmp_path / "out")]) == 2
    assert main(["convert", str(pplx_dir), str(tmp_path / "out"), "--overwrite"]) == 0
