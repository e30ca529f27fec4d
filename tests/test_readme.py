"""The README's promises: CI runs its test command, and its usage snippet runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def bash_blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)\n```", README, flags=re.S)


def test_readme_opens_with_the_two_commands():
    main_job, tests = bash_blocks()[:2]
    assert "contextembed search examples/data/leases" in main_job
    assert tests.rstrip().endswith("python -m pytest")


def test_ci_runs_the_readme_test_command():
    tests = bash_blocks()[1]
    install_and_test = tests.split("&& ", 2)[2]  # after creating and activating the virtual environment
    assert install_and_test in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


@pytest.mark.slow
def test_usage_snippet_runs(default_model_cache, monkeypatch):
    monkeypatch.chdir(ROOT)
    snippet = re.findall(r"```python\n(.*?)```", README, flags=re.S)[0]
    namespace: dict = {}
    exec(compile(snippet, "README usage", "exec"), namespace)
    assert [v.shape for v in namespace["chunk_vectors"]] == [(3, 384), (1, 384)]
    assert namespace["doc"].embeddings.shape == (34, 384)


@pytest.mark.slow
def test_sentence_transformers_snippet_runs(default_model_cache, monkeypatch):
    monkeypatch.chdir(ROOT)
    snippet = next(b for b in re.findall(r"```python\n(.*?)```", README, flags=re.S) if "SentenceTransformer(path)" in b)
    namespace: dict = {}
    exec(compile(snippet, "README sentence-transformers", "exec"), namespace)  # every name it uses is defined in it
    assert namespace["out"].chunk_embeddings.shape[:2] == (2, 2)
