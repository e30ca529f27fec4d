"""`contextembed evaluate` on the shipped set, in-process; the published table is what it produces."""

from __future__ import annotations

import json
import re
from importlib.resources import files

import pytest

from contextembed.cli import main

pytestmark = pytest.mark.slow


def published_table() -> str:
    text = files("contextembed").joinpath("default_model_results.md").read_text(encoding="utf-8")
    return re.search(r"<!-- evaluate:begin -->\n(.*?)\n<!-- evaluate:end -->", text, flags=re.S).group(1)


def test_evaluate_shipped_set(default_model_cache, tmp_path, capsys):
    assert main(["evaluate", "--no-progress", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())["results"]
    assert results["contextual"]["queries"] == 281
    assert results["contextual"]["Answer@10"] > results["independent"]["Answer@10"]
    table = (tmp_path / "results.md").read_text().split("\n\n", 1)[1].strip()
    assert table == published_table(), (
        "the results published in default_model_results.md (model card, README) differ from what "
        "`contextembed evaluate` produces now: update them"
    )
    assert "| contextual |" in capsys.readouterr().out


def test_evaluate_errors(tmp_path, capsys):
    assert main(["evaluate", str(tmp_path / "missing"), "--out", str(tmp_path)]) == 2
    assert "does not exist" in capsys.readouterr().err
