"""`import contextembed` registers the model with transformers' Auto classes, whatever is imported first, without
importing transformers itself (so `contextembed --help` loads no model stack)."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHECK = """
from transformers import AutoConfig, AutoModel, AutoProcessor
from transformers.models.auto.modeling_auto import MODEL_MAPPING
from transformers.models.auto.processing_auto import PROCESSOR_MAPPING
from contextembed.modeling import ContextEmbedConfig, ContextEmbedModel, ContextEmbedProcessor
assert type(AutoConfig.for_model("contextembed")) is ContextEmbedConfig
assert MODEL_MAPPING[ContextEmbedConfig] is ContextEmbedModel
assert PROCESSOR_MAPPING[ContextEmbedConfig] is ContextEmbedProcessor
print("registered")
"""
FIRST = {
    "contextembed, then transformers": "import sys, contextembed\nassert 'transformers' not in sys.modules\n",
    "transformers, then contextembed": "import transformers, contextembed\n",
    "the modeling package alone": "import contextembed.modeling\n",
    "sentence-transformers, then contextembed": "import sentence_transformers, contextembed\n",
    "contextembed, then sentence-transformers": "import contextembed, sentence_transformers\n",
}


# Two orders in the fast suite (the import hook's two paths), the others in the slow tier (each a fresh process).
FAST = ("contextembed, then transformers", "the modeling package alone")


@pytest.mark.parametrize("order", [o if o in FAST else pytest.param(o, marks=pytest.mark.slow) for o in FIRST])
def test_the_auto_classes_know_the_model_whatever_is_imported_first(order):
    run = subprocess.run([sys.executable, "-c", FIRST[order] + CHECK], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "registered", run.stderr[-2000:]


@pytest.mark.slow
def test_registering_twice_changes_nothing():
    run = subprocess.run([sys.executable, "-c", "import contextembed, transformers\n"
                          "from contextembed.registration import register_auto_classes\n"
                          "register_auto_classes(); register_auto_classes()\n" + CHECK],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
