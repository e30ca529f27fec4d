"""Recipes: a model's whole training as one file, its stages run in order from a named starting checkpoint.

A recipe is a JSON object:

    {"description": "...", "base": "contextembed-all-MiniLM-L6-v2-untrained", "data": "training-data.jsonl",
     "threads": 2, "stages": [{"name": "contextual", "config": {TrainConfig}},
                              {"name": "one-pass-mix", "continues": "contextual", "config": {TrainConfig}}]}

Every stage trains from `base`; a stage that `continues` an earlier one starts its adapters, separator row and any
projection from that stage's delta. `contextembed train --recipe default OUT` runs the packaged recipe of the default
model (`contextembed/recipes/default.json`); the last stage's delta is the model (`OUT/delta.safetensors`).
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import dataclass, replace
from importlib.resources import files
from pathlib import Path

from contextembed.training.config import TrainConfig

logger = logging.getLogger(__name__)

PACKAGED = ("default",)  # recipes that ship in contextembed/recipes/


@dataclass(frozen=True)
class Stage:
    name: str
    config: TrainConfig
    continues: str | None = None  # the earlier stage whose delta this one starts from


@dataclass(frozen=True)
class Recipe:
    description: str
    base: str  # a checkpoint path, a Hub id or a name contextembed builds (contextembed.load takes the same)
    data: str  # the training file the stages read, unless the caller names another
    threads: int
    stages: tuple[Stage, ...]


def load_recipe(name_or_path: str | Path) -> Recipe:
    """A packaged recipe by name (`PACKAGED`), or a recipe file; every problem is a `ValueError` naming the field."""
    if str(name_or_path) in PACKAGED:
        where = f"the packaged recipe {str(name_or_path)!r}"
        text = files("contextembed").joinpath("recipes", f"{name_or_path}.json").read_text(encoding="utf-8")
    else:
        where = repr(str(name_or_path))
        try:
            text = Path(name_or_path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"--recipe must be one of {PACKAGED} or a recipe file, got {str(name_or_path)!r} "
                             f"({error})") from error
    try:
        values = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"cannot read the recipe {where} as JSON: {error}") from error
    return parse_recipe(values, where)


def parse_recipe(values, where: str = "the recipe") -> Recipe:
    """A `Recipe` from its JSON form, checked.

    >>> parse_recipe({"base": "b", "data": "d.jsonl", "stages": [{"name": "one", "config": {}},
    ...                                                         {"name": "two", "continues": "one", "config": {}}]}
    ...              ).stages[1].continues
    'one'
    >>> parse_recipe({"base": "b", "data": "d.jsonl", "stages": [{"name": "one", "continues": "two", "config": {}}]})
    Traceback (most recent call last):
    ...
    ValueError: the recipe: stages[0].continues must name an earlier stage ([]), got 'two'
    """
    if not isinstance(values, dict):
        raise ValueError(f"{where} must be a JSON object, got a {type(values).__name__}")
    unknown = sorted(set(values) - {"description", "base", "data", "threads", "stages"})
    if unknown:
        raise ValueError(f"unknown recipe fields in {where}: {unknown}")
    for name in ("base", "data"):
        if not isinstance(values.get(name), str) or not values[name]:
            raise ValueError(f"{where}: {name} must be a non-empty string, got {values.get(name)!r}")
    threads = values.get("threads", 0)
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 0:
        raise ValueError(f"{where}: threads must be a non-negative integer (0: torch's default), got {threads!r}")
    stages = values.get("stages")
    if not isinstance(stages, list) or not stages:
        raise ValueError(f"{where}: stages must be a non-empty list of {{'name', 'config'}} objects, got {stages!r}")
    parsed: list[Stage] = []
    for i, stage in enumerate(stages):
        if not isinstance(stage, dict) or set(stage) - {"name", "continues", "config"}:
            raise ValueError(f"{where}: stages[{i}] must be an object with name, config and optionally continues, got "
                             f"{stage!r}")
        name, continues = stage.get("name"), stage.get("continues")
        if not isinstance(name, str) or not name or not name.replace("-", "_").isidentifier():
            raise ValueError(f"{where}: stages[{i}].name must be a name of letters, digits, - and _, got {name!r}")
        earlier = [s.name for s in parsed]
        if name in earlier:
            raise ValueError(f"{where}: stages[{i}].name {name!r} is used twice")
        if continues is not None and continues not in earlier:
            raise ValueError(f"{where}: stages[{i}].continues must name an earlier stage ({earlier}), got "
                             f"{continues!r}")
        config = TrainConfig.from_dict(stage.get("config", {}), where=f"{where}, stages[{i}].config")
        if config.adapters.init_delta is not None:
            raise ValueError(f"{where}: stages[{i}].config sets adapters.init_delta; in a recipe a stage starts from "
                             "an earlier stage's delta with 'continues'")
        parsed.append(Stage(name, config, continues))
    return Recipe(values.get("description", ""), values["base"], values["data"], threads, tuple(parsed))


def stage_configs(recipe: Recipe, **overrides) -> list[TrainConfig]:
    """Each stage's config with `overrides` (flat `TrainConfig` field names) applied; a bad override is named here."""
    return [TrainConfig.from_dict(stage.config.to_dict(), **overrides) for stage in recipe.stages]


def run_recipe(recipe: Recipe, base: str | Path, output_dir: str | Path, *, data: str | Path | None = None,
               **overrides) -> Path:
    """Train every stage from the checkpoint folder `base` (the recipe's `base`, resolved by the caller) into
    `OUTPUT_DIR/<stage>` and copy the last stage's delta to `OUTPUT_DIR/delta.safetensors`; returns the last stage's
    checkpoint. `overrides` (`max_steps`, `max_minutes`, by field name) apply to every stage;
    `OUTPUT_DIR/recipe_run.json` records what ran, and for how long."""
    import torch

    from contextembed.training.trainer import train

    output_dir, data = Path(output_dir), Path(data or recipe.data)
    if not data.is_file():
        raise ValueError(f"the recipe trains on {str(data)!r}, which is not a file: pass --data FILE (the default "
                         "model's training file is built by data_builders/training_data.py in the contextembed source "
                         "repository, which the installed package does not include)")
    threads = torch.get_num_threads()
    if recipe.threads:
        torch.set_num_threads(recipe.threads)  # the recipe's results are reproducible at its own thread count
    record = {"recipe": recipe.description, "base": recipe.base, "data": str(data), "threads": recipe.threads,
              "overrides": {k: v for k, v in overrides.items() if v is not None}, "stages": []}
    try:
        for stage, config in zip(recipe.stages, stage_configs(recipe, **overrides)):
            if stage.continues:
                init = str(output_dir / stage.continues / "delta.safetensors")
                config = replace(config, adapters=replace(config.adapters, init_delta=init))
            start = time.monotonic()
            checkpoint = train(base, data, output_dir / stage.name, config)
            minutes = (time.monotonic() - start) / 60
            logger.info("stage %s trained in %.1f minutes", stage.name, minutes)
            log = (output_dir / stage.name / "train_log.jsonl").read_text(encoding="utf-8").splitlines()
            steps = max((json.loads(line).get("step", 0) for line in log), default=0)
            record["stages"].append({"name": stage.name, "minutes": round(minutes, 1), "steps": steps,
                                     "planned_steps": config.schedule.max_steps})
    finally:
        torch.set_num_threads(threads)
    shutil.copy(output_dir / recipe.stages[-1].name / "delta.safetensors", output_dir / "delta.safetensors")
    (output_dir / "recipe_run.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return checkpoint
