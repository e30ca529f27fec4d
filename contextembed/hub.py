"""Find a checkpoint: a local directory, or a Hub repository id resolved through the Hugging Face cache.

`huggingface_hub.snapshot_download` honours `HF_HUB_OFFLINE`, `HF_HOME` / `HF_HUB_CACHE` and a
`cache_dir`, so an offline machine loads a model that is already in its cache.
"""

from __future__ import annotations

from pathlib import Path


def resolve_checkpoint(
    path_or_id: str | Path,
    *,
    revision: str | None = None,
    token: str | bool | None = None,
    cache_dir: str | Path | None = None,
    local_files_only: bool = False,
) -> Path:
    """Return a local directory holding the checkpoint `path_or_id`."""
    path = Path(path_or_id).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ValueError(f"{str(path)!r} is a directory without config.json: not a contextembed checkpoint")
        return path
    if path.exists():
        raise ValueError(f"{str(path)!r} is a file; pass a checkpoint directory or a Hub repository id")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        return Path(snapshot_download(str(path_or_id), revision=revision, token=token, cache_dir=cache_dir,
                                      local_files_only=local_files_only))
    except HFValidationError as error:
        raise ValueError(f"{str(path_or_id)!r} is neither a local directory nor a valid Hub repository id") from error
    except LocalEntryNotFoundError as error:
        raise FileNotFoundError(
            f"{str(path_or_id)!r} is not a local directory and is not in the Hugging Face cache, and the Hub "
            "cannot be reached (offline mode or no network)"
        ) from error
