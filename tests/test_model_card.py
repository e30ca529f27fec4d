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
