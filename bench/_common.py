"""Helpers shared by the benchmarks: side-by-side timing, machine facts, result files."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def interleaved(candidates: dict[str, Callable[[], object]], repeats: int = 5, warmup: int = 1) -> dict[str, float]:
    """Median seconds per candidate, running them in turn each round so drift hits all of them alike."""
    for _ in range(warmup):
        for fn in candidates.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def machine() -> str:
    import torch

    return (f"{platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
            f"({torch.get_num_threads()} threads), Python {sys.version.split()[0]}")


def write_result(name: str, command: str, lines: list[str], data: dict) -> None:
    """`bench/results/<name>.md` (command, machine, findings) and `.json` (the numbers).

    `$CONTEXTEMBED_BENCH_RESULTS` redirects them (the smoke tests write to a temporary folder).
    """
    folder = Path(os.environ.get("CONTEXTEMBED_BENCH_RESULTS", RESULTS))
    folder.mkdir(parents=True, exist_ok=True)
    body = [f"### {name}", "", f"`{command}`", "", f"Machine: {machine()}.", "", *lines, ""]
    (folder / f"{name}.md").write_text("\n".join(body), encoding="utf-8")
    (folder / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
