"""JSON-lines files read record by record, with every error naming the file and line."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path


def read_records(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each non-empty line, read as a stream (a `.gz` file decompressed on the way); a
    line that is not a JSON object is a `ValueError`."""
    opener = gzip.open if str(path).lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for line_number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as error:
                    raise ValueError(f"{path}:{line_number}: not valid JSON ({error.msg})") from error
                if not isinstance(record, dict):
                    raise ValueError(f"{path}:{line_number}: expected a JSON object, got {type(record).__name__}")
                yield line_number, record
    except (OSError, UnicodeDecodeError, EOFError) as error:
        raise ValueError(f"cannot read {str(path)!r}: {error}") from error


def field(record: dict, name: str, kind, where: str):
    """`record[name]`, checked to be of `kind` (a type or a tuple of types; `bool` never passes for `int`).

    >>> field({"start": 3}, "start", int, "f.jsonl:1")
    3
    >>> field({"start": True}, "start", int, "f.jsonl:1")
    Traceback (most recent call last):
    ...
    ValueError: f.jsonl:1: field 'start' must be int, got bool
    """
    if name not in record:
        raise ValueError(f"{where}: missing field {name!r}")
    value = record[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        expected = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise ValueError(f"{where}: field {name!r} must be {expected}, got {type(value).__name__}")
    return value
