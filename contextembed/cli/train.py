"""`contextembed train`: fine-tune a checkpoint for contextual retrieval, from a recipe or one config."""

from __future__ import annotations

import argparse
from pathlib import Path

from contextembed.cli.options import positive_float, positive_int

USAGE = ("contextembed train --recipe NAME_OR_FILE [--data FILE] OUTPUT_DIR\n"
         "       contextembed train CHECKPOINT DATA OUTPUT_DIR [--config FILE]")


def add_commands(commands) -> None:
    train = commands.add_parser("train", help="fine-tune a checkpoint for contextual retrieval (a recipe, or one run)",
                                usage=USAGE,
                                description="LoRA + separator row, L_doc + L_dist (+ L_within, L_keep, L_mix), a "
                                            "chunking drawn per batch, Matryoshka, int8 QAT at the end and a soup of "
                                            "the last checkpoints. With --recipe, runs a recipe's stages in order "
                                            "(`--recipe default` reproduces the default model from its seed); "
                                            "otherwise one run from CHECKPOINT. Writes checkpoints, "
                                            "delta.safetensors, train_log.jsonl and train_config.json. Needs "
                                            "pip install 'contextembed[train]'.")
    train.add_argument("paths", nargs="+", metavar="PATH", help="OUTPUT_DIR with --recipe; else CHECKPOINT DATA "
                                                                "OUTPUT_DIR")
    train.add_argument("--recipe", help="a packaged recipe (default) or a recipe file (JSON)")
    train.add_argument("--data", help="with --recipe: the training file (default: the one the recipe names)")
    train.add_argument("--config", help="without --recipe: JSON file of TrainConfig fields "
                                        '({"seed", "data", "losses", "schedule", "adapters"})')
    train.add_argument("--max-steps", type=positive_int, help="optimizer steps of every stage (overrides the config)")
    train.add_argument("--max-minutes", type=positive_float, help="stop a stage after this many minutes (a hard stop)")
    train.add_argument("--seed", type=int, help="random seed (overrides the config)")
    train.add_argument("--resume", action="store_true", help="without --recipe: continue from the last checkpoint in "
                                                             "OUTPUT_DIR")
    train.set_defaults(func=train_command)


def train_command(args: argparse.Namespace) -> int:
    overrides = {"max_steps": args.max_steps, "max_minutes": args.max_minutes, "seed": args.seed}
    if args.recipe is not None:
        return _train_recipe(args, overrides)
    if len(args.paths) != 3 or args.data is not None:
        raise ValueError(f"without --recipe, train takes CHECKPOINT DATA OUTPUT_DIR (usage: {USAGE})")
    from contextembed.training.config import TrainConfig

    config = TrainConfig.from_file(args.config, **overrides)  # a bad config fails before peft and the model load
    from contextembed.hub import resolve_checkpoint
    from contextembed.training import train

    checkpoint, data, output_dir = args.paths
    out = train(resolve_checkpoint(checkpoint), data, output_dir, config, resume=args.resume)
    print(f"wrote the trained checkpoint to {out} and its delta to {Path(output_dir) / 'delta.safetensors'}")
    return 0


def _train_recipe(args: argparse.Namespace, overrides: dict) -> int:
    if len(args.paths) != 1:
        raise ValueError(f"with --recipe, train takes one OUTPUT_DIR (the recipe names the checkpoint; --data the "
                         f"training file), got {args.paths}")
    if args.config is not None or args.resume:
        raise ValueError("--config and --resume are for one run; a recipe carries its own configs")
    from contextembed.training.recipe import load_recipe, stage_configs

    recipe = load_recipe(args.recipe)  # a bad recipe fails before peft and the model load
    stage_configs(recipe, **overrides)  # so do bad overrides
    from contextembed.default_model import named_model_path
    from contextembed.hub import resolve_checkpoint
    from contextembed.training.recipe import run_recipe

    (output_dir,) = args.paths
    base = named_model_path(recipe.base) or resolve_checkpoint(recipe.base)
    checkpoint = run_recipe(recipe, base, output_dir, data=args.data, **overrides)
    print(f"trained {len(recipe.stages)} stages: the model is {checkpoint}, its delta "
          f"{Path(output_dir) / 'delta.safetensors'}")
    return 0
