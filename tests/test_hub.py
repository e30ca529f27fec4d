"""Loading by Hub id from the Hugging Face cache while offline, and pushing with the hub library."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from huggingface_hub import HfApi

import contextembed

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def lay_out_cache(cache, repo_id, checkpoint):
    """The layout huggingface_hub writes: refs/main -> commit, snapshots/<commit>/files."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    shutil.copytree(checkpoint, repo / "snapshots" / COMMIT)


def test_load_hub_id_from_cache_offline(built, tmp_path):
    path, _, _ = built["bert"]
    lay_out_cache(tmp_path, "someone/tiny-contextembed", path)
    from_hub = contextembed.load("someone/tiny-contextembed", cache_dir=tmp_path)
    local = contextembed.load(str(path))
    docs = [["the lease", "rent is two"]]
    assert np.array_equal(from_hub.encode_documents(docs)[0], local.encode_documents(docs)[0])


def test_missing_from_cache_offline(tmp_path):
    with pytest.raises(FileNotFoundError, match="not in the Hugging Face cache"):
        contextembed.load("someone/not-cached", cache_dir=tmp_path)


def test_push_to_hub_uploads_a_complete_checkpoint(built, monkeypatch):
    uploaded = {}

    def fake_upload(self, *, folder_path, repo_id, commit_message, **kwargs):
        from pathlib import Path

        uploaded["files"] = {p.name for p in Path(folder_path).iterdir()}
        uploaded["repo_id"] = repo_id
        return "https://example.invalid/commit"

    monkeypatch.setattr(HfApi, "create_repo", lambda self, repo_id, **kwargs: repo_id)
    monkeypatch.setattr(HfApi, "upload_folder", fake_upload)
    encoder = contextembed.load(str(built["bert"][0]))
    encoder.push_to_hub("someone/tiny-contextembed")
    assert uploaded["repo_id"] == "someone/tiny-contextembed"
    assert {"config.json", "model.safetensors", "modules.json", "processor_config.json", "README.md"} <= uploaded["files"]
