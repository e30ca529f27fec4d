"""Which datasets an evaluation runs on: the sets that ship with the package, or a folder in one of the layouts.

`DATASET_LAYOUTS` are the folder layouts the loaders read (see `contextembed.evaluation.loaders`).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Literal

from contextembed.choices import DATASET_LAYOUTS  # noqa: F401 - the layouts, defined once (the command line's too)

DatasetLayout = Literal["context-bench", "conteb", "beir"]

# The sets that ship with the package (see each SOURCE.md), in the layout each is in: three contextual sets and a
# plain-retrieval guard.
SHIPPED_LAYOUTS = {"recipes": "context-bench", "pyfaq": "context-bench", "wikipacks": "context-bench",
                   "wikiguard": "beir"}
SHIPPED = tuple(SHIPPED_LAYOUTS)


def shipped_dataset(name: str = "recipes") -> Path:
    """An evaluation set that ships with the package (see its SOURCE.md): one of `SHIPPED`."""
    if name not in SHIPPED:
        raise ValueError(f"shipped sets are {SHIPPED}, got {name!r}")
    return Path(str(files("contextembed").joinpath("evaluation", "data", name)))


def resolve_datasets(data: str | Path | None, layout: DatasetLayout = "context-bench") -> dict[str, tuple[Path, str]]:
    """`{name: (folder, layout)}`: the shipped sets when `data` is `None`, else the one folder `data`.

    >>> sorted(resolve_datasets(None))
    ['pyfaq', 'recipes', 'wikiguard', 'wikipacks']
    """
    if layout not in DATASET_LAYOUTS:
        raise ValueError(f"layout must be one of {DATASET_LAYOUTS}, got {layout!r}")
    if data is None:
        if layout != "context-bench":
            raise ValueError("the shipped sets are in the context-bench layout: pass a dataset folder for other "
                             "layouts")
        return {name: (shipped_dataset(name), shipped) for name, shipped in SHIPPED_LAYOUTS.items()}
    folder = Path(data)
    if not folder.is_dir():
        raise ValueError(f"dataset folder {str(data)!r} does not exist")
    return {folder.name: (folder, layout)}
