"""`contextembed evaluate` on the shipped set, in-process; the published table is what it produces."""

from __future__ import annotations

import json

import pytest

from contextembed.cli import main
from contextembed.default_model_card import load_results

pytestmark = pytest.mark.slow


def published_figures(results: dict) -> dict:
    """Every headline figure per set and embedding (the breakdowns aside), as the model card reads them."""
    return {(name, mode, metric): value for name, modes in results.items() for mode, figures in modes.items()
            for metric, value in figures.items() if isinstance(value, (int, float))}


def test_evaluate_shipped_set(default_model_cache, tmp_path, capsys):
    assert main(["evaluate", "--no-progress", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())["results"]
    assert results["recipes"]["contextual"]["queries"] == 281 and results["pyfaq"]["contextual"]["queries"] == 178
    assert results["recipes"]["contextual"]["Answer@10"] > results["recipes"]["independent"]["Answer@10"]
    published = load_results()["models"]["default"]["shipped"]
    assert published_figures(results) == published_figures(published), (
        "the figures in default_model_results.json (model card, README) differ from what `contextembed evaluate` "
        "produces now: rerun `python bench/default_model.py`"
    )
    assert "| contextual |" in capsys.readouterr().out


def test_evaluate_errors(tmp_path, capsys):
    assert main(["evaluate", str(tmp_path / "missing"), "--out", str(tmp_path)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["evaluate", "--format", "beir", "--out", str(tmp_path)]) == 2
    assert "pass a dataset folder for other layouts" in capsys.readouterr().err


def test_evaluate_a_given_folder(default_model_cache, tmp_path, capsys):
    from contextembed.evaluation.datasets import shipped_dataset

    recipes = tmp_path / "recipes"  # a slice of the shipped recipes: 12 documents and their queries
    recipes.mkdir()
    lines = (shipped_dataset("recipes") / "documents.jsonl").read_text(encoding="utf-8").splitlines()[:12]
    kept = {json.loads(line)["id"] for line in lines}
    queries = [line for line in (shipped_dataset("recipes") / "queries.jsonl").read_text(encoding="utf-8").splitlines()
               if set(json.loads(line)["targets"]) <= kept]
    (recipes / "documents.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (recipes / "queries.jsonl").write_text("\n".join(queries) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    assert main(["evaluate", str(recipes), "--k", "5", "--no-progress", "--out", str(out)]) == 0
    payload = json.loads((out / "results.json").read_text())
    results = payload["results"]
    assert set(results) == {"recipes"} and "Answer@5" in results["recipes"]["contextual"]
    assert results["recipes"]["contextual"]["queries"] == len(queries) > 0
    # the breakdowns and the figure, with the default model's own tokenizer and window
    by_distance = results["recipes"]["contextual"]["by_distance"]
    assert payload["distance"]["max_seq_length"] == 512 and list(by_distance) == payload["distance"]["buckets"]
    assert sum(bucket["queries"] for bucket in by_distance.values()) == len(queries)
    assert (out / "figure.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and (out / "figure.html").is_file()
