"""The data builders are scripts in data_builders/, importing each other by name: their folder goes on the path."""

from __future__ import annotations

import sys
from pathlib import Path

FOLDER = Path(__file__).resolve().parents[2] / "data_builders"
if str(FOLDER) not in sys.path:
    sys.path.insert(0, str(FOLDER))
