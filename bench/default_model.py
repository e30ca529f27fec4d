"""Measure the default model and write its one results file, `contextembed/default_model_results.json`.

    python bench/default_model.py                                  # shipped sets, int8, untrained, leases
    python bench/default_model.py --validation validation/ --recipe-run runs/default/recipe_run.json

Every figure in MODEL_CARD.md (and each cached checkpoint's card) is read from that file by
`contextembed.default_model_card`; nothing is typed by hand. What it holds, per model (`default`, `untrained`):

- `shipped`: `contextembed evaluate`'s results on the shipped sets (late chunking, each chunk alone, whole document;
  the plain-retrieval guard), and `int8`: the contextual sets scored on int8 codes (default only);
- `leases`: `examples/lease_questions.py`'s count at 512-token windows (the asked lease's clause first among six
  identical copies, of 30 questions);
- `validation` (with `--validation`): the generated and hand-written families of `data_builders/training_data.py`,
  which chose the recipe's settings, so validation figures, not test results;
- `untrained`: the same sections for the untrained baseline (with `shipped`, `leases` or `validation`);
- `training`: the recipe run's minutes per stage, whether it reproduced the packaged delta tensor for tensor, and
  the rerun model's figures on the contextual shipped sets (`--recipe-run`);
- `recipe`: the recipe's settings the card states (seed, widths, steps), read from its file at every run.

`--parts` recomputes only some sections and keeps the others from the existing file. One block is not measured by
this script: `independent_families`, Answer@1 on document families none of the project's sets contain, measured by
the project's maintainers and entered by hand as they reported it (approximate; the card says so).
"""

from __future__ import annotations

import argparse
import json
import runpy
import shlex
import sys
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "contextembed" / "default_model_results.json"
PARTS = ("shipped", "int8", "untrained", "leases", "validation", "training", "recipe")


def recipe_fields() -> dict:
    """The recipe's settings the card states (seed, Matryoshka widths, each stage's steps and LoRA rank), so that
    rendering the card needs no training code."""
    from contextembed.training.recipe import load_recipe

    recipe = load_recipe("default")
    first = recipe.stages[0].config
    return {"seed": first.seed, "matryoshka_dims": list(first.losses.matryoshka_dims),
            "stages": [{"name": s.name, "max_steps": s.config.schedule.max_steps,
                        "lora_rank": s.config.adapters.lora_rank} for s in recipe.stages]}


def evaluate(model, datasets, **options) -> dict:
    from contextembed.evaluation.run import evaluate_datasets

    results, _ = evaluate_datasets(model, datasets, show_progress_bar=False, **options)
    return results


def lease_hits(model) -> dict:
    from contextembed.corpus import read_corpus

    example = runpy.run_path(str(ROOT / "examples" / "lease_questions.py"))
    documents = list(read_corpus(example["LEASES"]))
    return {"hits": example["hits"](model, documents), "questions": len(example["QUESTIONS"]) * len(example["ADDRESSES"]),
            "max_seq_length": model.config.max_seq_length}


def validation_sets(folder: Path) -> dict:
    return {p.name: (p, "context-bench") for p in sorted(folder.iterdir()) if (p / "queries.jsonl").is_file()}


def delta_check(run_dir: Path) -> dict:
    """The recipe run's delta against the packaged one: equal tensors, and the largest difference."""
    from importlib.resources import files

    from safetensors.torch import load_file

    new = load_file(run_dir / "delta.safetensors")
    shipped = load_file(str(files("contextembed").joinpath("default_model_delta.safetensors")))
    equal = sum(1 for k in shipped if k in new and bool((new[k] == shipped[k]).all()))
    largest = max(float((new[k].float() - shipped[k].float()).abs().max()) for k in shipped if k in new)
    return {"tensors": len(shipped), "equal": equal, "largest_difference": largest,
            "same_names": sorted(new) == sorted(shipped)}


def _portable(argument: str) -> str:
    """A command-line argument as it can be printed: a path by its last two parts, no machine's folders."""
    path = Path(argument)
    return str(Path(*path.parts[-2:])) if path.is_absolute() else argument


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--validation", type=Path, help="the validation sets' folder (data_builders/training_data.py)")
    parser.add_argument("--recipe-run", type=Path, help="recipe_run.json of `contextembed train --recipe default`")
    parser.add_argument("--training-note", help="what the card should say of the run's minutes (e.g. it was paused)")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=None, help="recompute only these sections")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if args.parts and "validation" in args.parts and not args.validation:
        parser.error("--parts validation needs --validation FOLDER")
    if args.parts and "training" in args.parts and not args.recipe_run:
        parser.error("--parts training needs --recipe-run FILE")
    import contextembed
    from contextembed.default_model import BASELINE_MODEL_NAME, DEFAULT_MODEL_NAME
    from contextembed.evaluation.datasets import SHIPPED_LAYOUTS, resolve_datasets

    parts = set(args.parts or [p for p in PARTS if p not in ("validation", "training")
                               or (p == "validation" and args.validation) or (p == "training" and args.recipe_run)])
    results = json.loads(args.out.read_text(encoding="utf-8")) if args.out.is_file() else {}
    models = results.setdefault("models", {"default": {}, "untrained": {}})
    shipped = resolve_datasets(None)
    contextual = {n: d for n, d in shipped.items() if SHIPPED_LAYOUTS[n] == "context-bench"}
    measured = {"shipped", "leases", "validation"} & parts  # per model; the untrained one only with `untrained`
    default = contextembed.load(DEFAULT_MODEL_NAME) if measured or "int8" in parts else None
    for name in ("default", "untrained") if "untrained" in parts else ("default",):
        model = default if name == "default" else contextembed.load(BASELINE_MODEL_NAME)
        if "shipped" in parts:
            models[name]["shipped"] = evaluate(model, shipped)
        if "leases" in parts:
            models[name]["leases"] = lease_hits(model)
        if "validation" in parts:
            models[name]["validation"] = evaluate(model, validation_sets(args.validation))
    if "int8" in parts:
        models["default"]["int8"] = evaluate(default, contextual, precision="int8")
    if "training" in parts:
        run = json.loads(args.recipe_run.read_text(encoding="utf-8"))
        rerun = contextembed.load(args.recipe_run.parent / run["stages"][-1]["name"] / "checkpoint")
        results["training"] = {"stages": run["stages"], "threads": run["threads"],
                               "reproduction": {**delta_check(args.recipe_run.parent),
                                                "shipped": evaluate(rerun, contextual)}}
        if args.training_note:
            results["training"]["note"] = args.training_note
    results["recipe"] = recipe_fields()  # what the card says of the recipe: read from its file, nothing measured
    measured = results.setdefault("measured", {})
    for part in sorted(parts):  # each section keeps the run that measured it; paths by name only
        measured[part] = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
                          "contextembed": version("contextembed"), "torch": version("torch"),
                          "transformers": version("transformers"),
                          "command": shlex.join(["python", "bench/default_model.py", *map(_portable, sys.argv[1:])]),
                          "window_overlap": contextembed.load(DEFAULT_MODEL_NAME).config.window_overlap}
    args.out.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
