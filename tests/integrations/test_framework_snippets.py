"""docs/frameworks.md's framework snippets run as written (repository root, default model) and find Ocean Drive."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "frameworks.md"
SNIPPETS = dict(re.findall(r"```python\n# framework: (\w+)\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S))


def test_every_framework_has_a_snippet():
    assert sorted(SNIPPETS) == ["haystack", "langchain", "llamaindex", "ray"]


@pytest.mark.parametrize("name", ["langchain", "llamaindex", "haystack", pytest.param("ray", marks=pytest.mark.slow)])
def test_snippet_runs(name, default_model_cache, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("HAYSTACK_TELEMETRY_ENABLED", "False")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    exec(compile(SNIPPETS[name], f"docs/frameworks.md {name} snippet", "exec"), {})
    printed = ast.literal_eval(capsys.readouterr().out.strip().splitlines()[-1])
    if name == "ray":
        assert printed == [("harbor", 0, 384), ("harbor", 1, 384), ("mill", 0, 384), ("mill", 1, 384)]
    else:
        assert printed[0][0] == "lease-ocean-drive", printed
