"""MODEL_CARD.md is the default model's rendered card, and every code snippet in it runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from contextembed.default_model import render_default_model_card

pytestmark = pytest.mark.slow

CARD = Path(__file__).resolve().parents[1] / "MODEL_CARD.md"


def test_model_card_is_the_rendered_default_card(default_model_cache):
    assert CARD.read_text(encoding="utf-8") == render_default_model_card(), (
        "MODEL_CARD.md is stale: regenerate it with `python -m contextembed.default_model > MODEL_CARD.md`"
    )


@pytest.mark.parametrize("index", range(3))
def test_snippets_run(default_model_cache, index):
    snippets = re.findall(r"```python\n(.*?)```", CARD.read_text(encoding="utf-8"), flags=re.S)
    assert len(snippets) == 3
    exec(compile(snippets[index], f"MODEL_CARD.md snippet {index}", "exec"), {})


def test_card_metadata_comes_from_the_build_flags(backbone_dirs, tmp_path):
    """The Hub reads base_model, license and language from the card's YAML: they are written when given to
    `contextembed build`, and left out (not guessed) when not."""
    from huggingface_hub import ModelCard

    from contextembed.cli import main

    flagged, bare = tmp_path / "flagged", tmp_path / "bare"
    assert main(["build", str(backbone_dirs["bert"]), str(flagged), "--base-model", "org/tiny-bert", "--license", "mit",
                 "--language", "en", "de"]) == 0
    assert main(["build", str(backbone_dirs["bert"]), str(bare)]) == 0
    data = ModelCard.load(flagged / "README.md").data
    assert (data.base_model, data.license, data.language) == ("org/tiny-bert", "mit", ["en", "de"])
    assert data.pipeline_tag == "sentence-similarity" and "sentence-transformers" in data.tags
    data = ModelCard.load(bare / "README.md").data
    assert data.base_model is None and data.license is None and data.language is None
    assert "unknown" not in (bare / "README.md").read_text().split("---")[1]
    assert main(["build", str(backbone_dirs["bert"]), str(tmp_path / "bad"), "--language", "en us"]) == 2


def test_the_cards_figures_are_the_results_files(default_model_cache):
    """The Hub reads `model-index` from the YAML: the default card's entries are the results file's figures (written by
    bench/default_model.py from `contextembed evaluate`), the untrained baseline's card has its own, and every cell of
    the results table is a figure of that file."""
    from huggingface_hub import ModelCard

    from contextembed.default_model import BASELINE_MODEL_NAME, baseline_model_path
    from contextembed.default_model_card import SETS, load_results, model_index, pct

    results = load_results()
    default = results["models"]["default"]["shipped"]
    eval_results = ModelCard.load(CARD).data.eval_results
    assert [(r.dataset_type, r.metric_name, r.metric_value) for r in eval_results] == [
        (f"contextembed/{row['dataset']}", row["metric"], row["value"]) for row in model_index(results)]
    assert [r.metric_value for r in eval_results][:2] == [round(100 * default["recipes"]["contextual"][m], 1)
                                                          for m in ("Answer@1", "Answer@10")]
    baseline = ModelCard.load(baseline_model_path() / "README.md").data.eval_results
    assert [r.metric_value for r in baseline] == [row["value"] for row in model_index(results, "untrained")]
    assert BASELINE_MODEL_NAME in (baseline_model_path() / "README.md").read_text()
    card = CARD.read_text(encoding="utf-8")
    for name, label in SETS.items():
        row = next(line for line in card.splitlines() if line.startswith(f"| {label} | Answer@1 |"))
        assert row.split(" | ")[2] == pct(default[name]["contextual"]["Answer@1"])
        assert row.split(" | ")[3] == pct(default[name]["independent"]["Answer@1"])


def test_the_card_is_short_enough_to_read_on_a_phone():
    card = CARD.read_text(encoding="utf-8")
    assert len(card.splitlines()) <= 200
    assert max(len(line) for line in card.splitlines() if not line.startswith("|")) <= 800
