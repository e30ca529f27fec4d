"""Checkpoints built from a backbone load through transformers and sentence-transformers with trust off."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch
from transformers import AutoModel, AutoProcessor

import contextembed
from contextembed import ContextEmbedSentenceTransformer
from contextembed.modeling import ContextEmbedModel, ContextEmbedProcessor

DOCS = [["the lease is for one year", "rent is two", "she is the tenant"], ["one"], ["a b", "c d"], "plain"]


def direct_chunks(model, processor, docs):
    batch = processor(docs)
    with torch.inference_mode():
        out = model(**batch)
    return [out.chunk_embeddings[i, : int(n)] for i, n in enumerate(batch["attention_mask"].sum(1))]


class TestSavedFiles:
    def test_files_present(self, checkpoint_dir):
        names = {p.name for p in checkpoint_dir.iterdir()}
        assert {"config.json", "model.safetensors", "tokenizer.json", "processor_config.json", "modules.json",
                "sentence_bert_config.json", "config_sentence_transformers.json", "README.md", "1_Pooling",
                "2_Normalize"} <= names
        assert not list(checkpoint_dir.glob("*.bin")) and not list(checkpoint_dir.glob("*.py"))

    def test_ready_for_the_hub_no_machine_path_and_readable_files(self, checkpoint_dir, backbone_dirs):
        for file in checkpoint_dir.rglob("*.json"):
            assert str(backbone_dirs["bert"].parent) not in file.read_text(), file
        for path in [checkpoint_dir, *checkpoint_dir.rglob("*")]:
            assert path.stat().st_mode & 0o044 == 0o044, path  # group and others can read

    def test_modules_are_builtin_sentence_transformers_classes(self, checkpoint_dir):
        modules = json.loads((checkpoint_dir / "modules.json").read_text())
        assert modules and all(m["type"].startswith("sentence_transformers.") for m in modules)

    def test_no_auto_map_anywhere(self, checkpoint_dir):
        for path in checkpoint_dir.rglob("*.json"):
            assert 'auto_map' not in path.read_text(), path

    def test_processor_config_names_the_registered_class(self, checkpoint_dir):
        config = json.loads((checkpoint_dir / "processor_config.json").read_text())
        assert config["processor_class"] == "ContextEmbedProcessor"

    def test_card_states_the_checkpoint_facts(self, checkpoint_dir):
        card = (checkpoint_dir / "README.md").read_text()
        assert card.startswith("---\nlibrary_name: sentence-transformers")
        assert "import contextembed" in card and "<|chunk_sep|>" in card and "8, 16" in card


class TestRoundTrip:
    def test_auto_classes_give_identical_outputs(self, built, family):
        path, model, processor = built[family]
        loaded = AutoModel.from_pretrained(path)
        loaded_processor = AutoProcessor.from_pretrained(path)
        assert isinstance(loaded, ContextEmbedModel) and isinstance(loaded_processor, ContextEmbedProcessor)
        for a, b in zip(direct_chunks(model, processor, DOCS), direct_chunks(loaded, loaded_processor, DOCS)):
            assert torch.equal(a, b)

    def test_resave_round_trip(self, built, family, tmp_path):
        path, model, processor = built[family]
        contextembed.save_checkpoint(AutoModel.from_pretrained(path), AutoProcessor.from_pretrained(path), tmp_path)
        again = AutoModel.from_pretrained(tmp_path)
        for a, b in zip(direct_chunks(model, processor, DOCS), direct_chunks(again, processor, DOCS)):
            assert torch.equal(a, b)


FRESH_PROCESS = """
import json, sys
import torch
import contextembed
from sentence_transformers import SentenceTransformer
from transformers import AutoModel, AutoProcessor

path = sys.argv[1]
st = SentenceTransformer(path, trust_remote_code=False, device="cpu")
docs = [["the lease is for one year", "rent is two", "she is the tenant"], ["one"]]
got = st.encode_document(contextembed.as_chunked(docs), output_value="token_embeddings")
model, processor = AutoModel.from_pretrained(path), AutoProcessor.from_pretrained(path)
batch = processor(docs)
with torch.inference_mode():
    out = model(**batch).chunk_embeddings
diff = max(float((g.cpu() - out[i, : len(g)]).abs().max()) for i, g in enumerate(got))
print(json.dumps({"shapes": [list(g.shape) for g in got], "diff": diff}))
"""

WITHOUT_IMPORT = """
import sys
from sentence_transformers import SentenceTransformer
SentenceTransformer(sys.argv[1], trust_remote_code=False, device="cpu")
"""


class TestFreshProcess:
    @pytest.mark.parametrize("family", ["bert", pytest.param("modernbert", marks=pytest.mark.slow),
                                        pytest.param("qwen3", marks=pytest.mark.slow)])
    def test_sentence_transformer_loads_with_trust_off(self, built, family):
        path = built[family][0]
        result = subprocess.run([sys.executable, "-c", textwrap.dedent(FRESH_PROCESS), str(path)],
                                capture_output=True, text=True, check=True, env=_offline_env())
        payload = json.loads(result.stdout.strip().splitlines()[-1])
        assert payload["shapes"] == [[3, 16], [1, 16]]
        assert payload["diff"] <= 1e-5

    @pytest.mark.parametrize("saver", ["contextembed", pytest.param("sentence-transformers", marks=pytest.mark.slow)])
    def test_a_re_saved_folder_loads_with_trust_off_and_holds_no_machine_path(self, built, tmp_path, saver):
        path = built["qwen3"][0]
        out = tmp_path / "resaved"
        if saver == "contextembed":
            contextembed.load(path).save_pretrained(out)
        else:
            ContextEmbedSentenceTransformer(str(path), device="cpu").save(str(out))
        for file in out.rglob("*.json"):
            assert str(path.parent) not in file.read_text() and str(tmp_path) not in file.read_text(), file
        for item in [out, *out.rglob("*")]:
            assert item.stat().st_mode & 0o044 == 0o044, item
        result = subprocess.run([sys.executable, "-c", textwrap.dedent(FRESH_PROCESS), str(out)],
                                capture_output=True, text=True, check=True, env=_offline_env())
        payload = json.loads(result.stdout.strip().splitlines()[-1])
        assert payload["shapes"] == [[3, 16], [1, 16]] and payload["diff"] <= 1e-5

    @pytest.mark.slow
    def test_without_import_transformers_names_the_unknown_model_type(self, built):
        result = subprocess.run([sys.executable, "-c", WITHOUT_IMPORT, str(built["bert"][0])],
                                capture_output=True, text=True, env=_offline_env())
        assert result.returncode != 0
        assert "contextembed" in result.stderr and "does not recognize this architecture" in result.stderr


NOT_INSTALLED = """
import importlib.metadata, sys
real = importlib.metadata.version
def version(name):  # as if contextembed were not installed
    if name.replace("_", "-") == "contextembed":
        raise importlib.metadata.PackageNotFoundError(name)
    return real(name)
importlib.metadata.version = version
from sentence_transformers import SentenceTransformer
SentenceTransformer(sys.argv[1], device="cpu")
"""


class TestRequirements:
    @pytest.mark.skipif(int(__import__("sentence_transformers").__version__.split(".")[0]) < 6,
                        reason="sentence-transformers < 6 does not read `requirements`")
    @pytest.mark.slow
    def test_st6_says_to_install_contextembed_when_it_is_missing(self, built):
        """sentence-transformers >= 6 checks the checkpoint's `requirements` before loading anything: without the
        package, the error names it and why, instead of transformers' "upgrade transformers" advice."""
        result = subprocess.run([sys.executable, "-c", NOT_INSTALLED, str(built["bert"][0])], capture_output=True,
                                text=True, env=_offline_env())
        assert result.returncode != 0
        assert "contextembed>=0.1.0" in result.stderr and "import contextembed" in result.stderr
        assert "upgrade transformers" not in result.stderr


def _offline_env():
    import os

    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
