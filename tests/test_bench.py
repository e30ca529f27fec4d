"""Every benchmark starts and finishes at a tiny size (no timing is asserted: timings are not tests)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[1] / "bench"

CASES = {
    "throughput": ["throughput.py", "--docs", "4", "--repeats", "1"],
    "throughput_local_mix": ["throughput.py", "--docs", "4", "--repeats", "1", "--local-mix", "0.1"],
    "long_documents": ["long_documents.py", "--lengths", "512", "1024", "--chunks", "300", "600"],
    "search": ["search.py", "--chunks", "5000", "--dim", "64", "--queries", "4", "--repeats", "1"],
    "gpu": ["gpu.py", "--tiny", "--tokens", "256", "--docs", "1"],
    "gpu_pplx_v2": ["gpu.py", "--tiny", "--model", "pplx-v2-0.6b", "--tokens", "128", "256", "--docs", "1"],
    "gpu_pipeline": ["gpu.py", "--tiny", "--model", "pipeline", "--docs", "1"],
    "host": ["host.py", "--copies", "1", "--repeats", "1", "--parts", "device", "ceiling"],
    "scale": ["scale.py", "--documents", "60", "--sentences", "6", "--dim", "64", "--queries", "2",
              "--memory-sizes", "30", "--work", "{tmp}"],
    "ray_data": ["ray_data.py", "--docs", "4", "--repeats", "1"],
    "dtype": ["dtype.py", "--docs", "4", "--repeats", "1"],
    "backends": ["backends.py", "--docs", "4", "--repeats", "1", "--model", "{tiny}"],
    "stores": ["stores.py", "--sizes", "2000", "--queries", "3", "--max-seconds", "60"],
    "serve": ["serve.py", "--model", "{tiny}", "--documents", "8", "--clients", "1", "2", "--repeats", "1"],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_benchmark_runs(name, default_model_cache, built, tmp_path, monkeypatch):
    script, *args = (arg.format(tiny=built["bert"][0], tmp=tmp_path / "work") for arg in CASES[name])
    env = {**__import__("os").environ, "CONTEXTEMBED_BENCH_RESULTS": str(tmp_path)}
    result = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert ":" in last and any(ch.isdigit() for ch in last.split(":")[-1])
    assert list(tmp_path.glob("*.md")) and list(tmp_path.glob("*.json"))


@pytest.mark.skipif(importlib.util.find_spec("afterthoughts") is not None,
                    reason="afterthoughts is installed here; the missing-peer message cannot be observed")
def test_peer_benchmark_explains_a_missing_peer(default_model_cache, tmp_path):
    result = subprocess.run([sys.executable, str(BENCH / "peer_afterthoughts.py")], capture_output=True, text=True)
    assert result.returncode == 2 and "pip install afterthoughts accelerate" in result.stderr


def test_results_file_is_assembled_from_result_files():
    text = (BENCH / "RESULTS.md").read_text(encoding="utf-8")
    for section in ("throughput", "peer_afterthoughts", "long_documents", "search"):
        assert f"### {section}" in text
