"""`contextembed train`: fine-tune a checkpoint with the recipe of SPEC §2."""

from __future__ import annotations

import argparse
from pathlib import Path

from contextembed.cli.options import positive_float, positive_int


def add_commands(commands) -> None:
    train = commands.add_parser("train", help="fine-tune a checkpoint for contextual retrieval (SPEC §2 recipe)",
                                description="LoRA + separator row, L_doc + L_dist, a chunking drawn per batch, "
                                            "Matryoshka, int8 QAT at the end and a soup of the last checkpoints. "
                                            "Writes OUTPUT_DIR/checkpoint (a full checkpoint), "
                                            "OUTPUT_DIR/delta.safetensors, train_log.jsonl and train_config.json. "
                                            "Needs pip install 'contextembed[train]'.")
    train.add_argument("checkpoint", help="contextembed checkpoint folder or Hub id to start from")
    train.add_argument("data", help="training documents (JSON lines, see contextembed.training.data)")
    train.add_argument("output_dir", help="folder for checkpoints, logs and the result")
    train.add_argument("--config", help="JSON file of TrainConfig fields (seed, max_steps, weights, ...)")
    train.add_argument("--max-steps", type=positive_int, help="optimizer steps (overrides the config)")
    train.add_argument("--max-minutes", type=positive_float, help="stop after this many minutes (a hard stop)")
    train.add_argument("--seed", type=int, help="random seed (overrides the config)")
    train.add_argument("--resume", action="store_true", help="continue from the last checkpoint in OUTPUT_DIR")
    train.set_defaults(func=train_command)


def train_command(args: argparse.Namespace) -> int:
    from contextembed.training.config import TrainConfig

    config = TrainConfig.from_file(args.config, max_steps=args.max_steps, max_minutes=args.max_minutes,
                                   seed=args.seed)  # a bad config fails before peft and the model load
    from contextembed.hub import resolve_checkpoint
    from contextembed.training import train

    out = train(resolve_checkpoint(args.checkpoint), args.data, args.output_dir, config, resume=args.resume)
    print(f"wrote the trained checkpoint to {out} and its delta to {Path(args.output_dir) / 'delta.safetensors'}")
    return 0
