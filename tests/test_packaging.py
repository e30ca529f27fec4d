"""`modeling/` ships as `contextembed.modeling`, never as a top-level `modeling` package."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import site, sys
site.addsitedir(sys.argv[1])
import contextembed, contextembed.modeling
from contextembed.modeling import ContextEmbedModel
print(contextembed.modeling.__file__)
try:
    import modeling
except ImportError:
    print("no top-level modeling")
"""


def _pip(*args, cwd=ROOT):
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", *args],
                   cwd=cwd, check=True, capture_output=True)


def _probe(site_dir: Path, tmp_path: Path) -> list[str]:
    result = subprocess.run([sys.executable, "-I", "-c", PROBE, str(site_dir)], cwd=tmp_path, check=True,
                            capture_output=True, text=True)
    return result.stdout.strip().splitlines()


@pytest.mark.slow
def test_wheel_install(tmp_path):
    wheel_dir, target = tmp_path / "wheel", tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "-w", str(wheel_dir), str(ROOT)], check=True, capture_output=True)
    (wheel,) = wheel_dir.glob("contextembed-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "contextembed/modeling/modeling_contextembed.py" in names
    assert "contextembed/model_card_template.md" in names
    assert not any(name.startswith("modeling/") for name in names)
    _pip("--target", str(target), str(wheel))
    lines = _probe(target, tmp_path)
    assert Path(lines[0]).resolve() == (target / "contextembed" / "modeling" / "__init__.py").resolve()
    assert lines[1] == "no top-level modeling"


@pytest.mark.slow
def test_editable_install(tmp_path):
    prefix = tmp_path / "prefix"
    _pip("--prefix", str(prefix), "-e", str(ROOT))
    (site_dir,) = prefix.glob("lib/python*/site-packages")
    lines = _probe(site_dir, tmp_path)
    assert Path(lines[0]).resolve() == (ROOT / "modeling" / "__init__.py").resolve()
    assert lines[1] == "no top-level modeling"
