"""`modeling/` ships as `contextembed.modeling`, never as a top-level `modeling` package.

Each install goes into its own throwaway virtual environment that sees this environment's
packages (torch, transformers, ...) after its own, so the test never touches the environment
it runs in.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import contextembed, contextembed.modeling
from contextembed.modeling import ContextEmbedModel
print(contextembed.modeling.__file__)
try:
    import modeling
except ImportError:
    print("no top-level modeling")
"""


def _venv(tmp_path: Path) -> Path:
    """A venv whose own site-packages come first, then this environment's (through a .pth file)."""
    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    (site_packages,) = env.glob("lib/python*/site-packages")
    outer = [p for p in sys.path if p.endswith("site-packages")]
    (site_packages / "zz_outer.pth").write_text("\n".join(outer) + "\n")
    return env / "bin" / "python"


def _install(python: Path, *args: str) -> None:
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", *args],
                   check=True, capture_output=True)


def _probe(python: Path, cwd: Path) -> list[str]:
    result = subprocess.run([str(python), "-c", PROBE], cwd=cwd, check=True, capture_output=True, text=True)
    return result.stdout.strip().splitlines()


@pytest.mark.slow
def test_wheel_install(tmp_path):
    wheel_dir = tmp_path / "wheel"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "-w", str(wheel_dir), str(ROOT)], check=True, capture_output=True)
    (wheel,) = wheel_dir.glob("contextembed-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "contextembed/modeling/modeling_contextembed.py" in names
    assert "contextembed/model_card_template.md" in names
    # the trained default model ships as one delta, with its recipe and its results file; nothing of research/
    assert [n for n in names if n.endswith(".safetensors")] == ["contextembed/default_model_delta.safetensors"]
    assert {"contextembed/recipes/default.json", "contextembed/default_model_results.json"} <= set(names)
    assert not any(name.startswith(("research/", "data_builders/", "scripts/")) for name in names)
    assert "contextembed/evaluation/data/wikiguard/qrels/test.tsv" in names
    assert "contextembed/training/trainer.py" in names
    assert not any(name.startswith("modeling/") for name in names)
    python = _venv(tmp_path)
    _install(python, str(wheel))
    lines = _probe(python, tmp_path)
    assert Path(lines[0]).parts[-4:] == ("site-packages", "contextembed", "modeling", "__init__.py")
    assert str(tmp_path) in lines[0]
    assert lines[1] == "no top-level modeling"


@pytest.mark.slow
def test_editable_install(tmp_path):
    python = _venv(tmp_path)
    _install(python, "-e", str(ROOT))
    assert list((tmp_path / "venv").glob("lib/python*/site-packages/__editable__*contextembed*"))
    lines = _probe(python, tmp_path)
    assert Path(lines[0]).resolve() == (ROOT / "modeling" / "__init__.py").resolve()
    assert lines[1] == "no top-level modeling"
