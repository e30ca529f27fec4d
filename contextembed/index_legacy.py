"""Indexes of formats 2 and 3, as releases before segments wrote them: one folder of three files, read as a single
segment (`contextembed.index` upgrades them to format 4 by their first write).

- `embeddings.npy`: one row per chunk, float32 or codes;
- `chunks.jsonl`: one JSON object per row: `doc` (document index), `path` (the document's id), `chunk`, `start`,
  `end`, `text`;
- `index.json`: `format_version`, the `StoreInfo` fields, `num_chunks`, and per document its `content_hash` and
  `metadata` (format 3) or its path (format 2: no hash, so an incremental encode embeds it again, and no metadata).

Those releases replaced an index with two renames (old index aside, new one in); a process that died between them
left the old index in a hidden `.NAME.replaced-*` folder, which `restore_interrupted` moves back.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from contextembed.jsonl import field, read_records
from contextembed.modeling import PRECISIONS
from contextembed.scoring import check_codes

logger = logging.getLogger(__name__)

LEGACY_FILES = ("embeddings.npy", "chunks.jsonl", "index.json")
READABLE_VERSIONS = (2, 3)
RECORD_FIELDS = {"doc": int, "path": str, "chunk": int, "start": int, "end": int, "text": str}


def is_legacy_index(path: str | Path) -> bool:
    return (Path(path) / "index.json").is_file()


def read_legacy_index(path: str | Path):
    """(a `Segment` in memory, its documents sorted by id; the info fields) of a format 2 or 3 index. Every
    inconsistency is a `ValueError` naming the file (and line)."""
    from contextembed.chunking import Chunk
    from contextembed.segments import Segment
    from contextembed.stores.base import DocumentVectors

    path = Path(path)
    for name in LEGACY_FILES:
        if not (path / name).is_file():
            raise ValueError(f"{str(path)!r} is not a complete index: {name} is missing")
    meta = _read_meta(path / "index.json")
    try:
        embeddings = np.load(path / "embeddings.npy", allow_pickle=False, mmap_mode="r")
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot read {str(path / 'embeddings.npy')!r}: {error}") from error
    records = _read_records(path / "chunks.jsonl")
    if embeddings.ndim != 2:
        raise ValueError(f"{str(path / 'embeddings.npy')!r} must be a 2-D array, got shape {embeddings.shape}")
    check_codes(embeddings, meta["precision"], f"the vectors in {str(path / 'embeddings.npy')!r}")
    width = meta["output_dim"] // 8 if meta["precision"] in ("binary", "ubinary") else meta["output_dim"]
    if embeddings.shape[1] != width:
        raise ValueError(f"index {str(path)!r} says output_dim={meta['output_dim']} ({meta['precision']}), but its "
                         f"vectors have {embeddings.shape[1]} columns")
    if not len(records) == len(embeddings) == meta["num_chunks"]:
        raise ValueError(f"index {str(path)!r} has {len(embeddings)} vectors but {len(records)} chunk records "
                         f"(index.json says {meta['num_chunks']})")
    docs = [record["doc"] for record in records]
    if any(b < a for a, b in zip(docs, docs[1:])) or (docs and docs[0] < 0):
        raise ValueError(f"{str(path / 'chunks.jsonl')!r}: `doc` must be non-negative and non-decreasing")
    count = docs[-1] + 1 if docs else 0
    listed = meta.get("documents")
    if meta["format_version"] >= 3 and (not isinstance(listed, list) or len(listed) != count
                                        or not all(isinstance(d, dict) and isinstance(d.get("content_hash", ""), str)
                                                   and isinstance(d.get("metadata", {}), dict) for d in listed)):
        raise ValueError(f"{str(path / 'index.json')!r}: `documents` must list one object (`content_hash`, "
                         f"`metadata`) per document ({count})")
    if meta["format_version"] < 3 or not listed:
        listed = [{}] * count
    rows: dict[int, list[int]] = {}
    for row, record in enumerate(records):
        rows.setdefault(record["doc"], []).append(row)
    documents = []
    for d, entry in enumerate(listed):
        mine = rows.get(d, [])
        if not mine:
            continue
        documents.append(DocumentVectors(records[mine[0]]["path"], [Chunk(records[r]["text"], records[r]["start"],
                                                                          records[r]["end"]) for r in mine],
                                         np.asarray(embeddings[mine[0] : mine[-1] + 1]),
                                         dict(entry.get("metadata", {})), entry.get("content_hash", "")))
    ids = [d.id for d in documents]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{str(path / 'index.json')!r}: document ids repeat (e.g. "
                         f"{next(i for i in ids if ids.count(i) > 1)!r})")
    info = {k: meta.get(k, "") for k in ("model", "chunker")}
    info.update(dim=meta["output_dim"], precision=meta["precision"])
    return Segment.from_documents(documents, width, embeddings.dtype, name="legacy"), info


def restore_interrupted(output_dir: str | Path) -> bool:
    """Finish what an older release's index write that died left behind at `output_dir`; returns whether an index
    was restored.

    With no index at `output_dir` but the previous one moved aside (`.NAME.replaced-*`, complete), that index moves
    back: the replacement never finished, so the path holds what it held before. Moved-aside copies left next to an
    index that is in place (a crash after both renames) are removed.
    """
    import shutil

    output_dir = Path(output_dir)
    parent, name = output_dir.parent, output_dir.name
    if not parent.is_dir():
        return False
    retired = sorted((p for p in parent.glob(f".{name}.replaced-*") if p.is_dir()), key=lambda p: p.stat().st_mtime)
    restored = False
    if retired and not output_dir.exists() and is_legacy_index(retired[-1]):
        retired.pop().rename(output_dir)
        restored = True
        logger.warning("restored the index at %s: a write that was replacing it stopped half way", output_dir)
    if output_dir.exists():
        for leftover in retired:
            shutil.rmtree(leftover, ignore_errors=True)
    return restored


def read_header(file: Path, versions: tuple[int, ...], newer: str, counts: tuple[str, ...]) -> dict:
    """An index's JSON header (format 4's manifest, formats 2 and 3's index.json), checked: a readable JSON object,
    `format_version` one of `versions` (else a ValueError ending in `newer`, what to do), a known `precision`, and
    the fields named in `counts` non-negative integers. Every problem is a `ValueError` naming the file."""
    try:
        header = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot read {str(file)!r} as JSON: {error}") from error
    if not isinstance(header, dict):
        raise ValueError(f"{str(file)!r} must hold a JSON object")
    if header.get("format_version") not in versions:
        raise ValueError(f"{str(file)!r}: format_version must be {' or '.join(map(str, versions))}, got "
                         f"{header.get('format_version')!r} ({newer})")
    if header.get("precision") not in PRECISIONS:
        raise ValueError(f"{str(file)!r}: precision must be one of {PRECISIONS}, got {header.get('precision')!r}")
    for name in counts:
        value = header.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{str(file)!r}: {name} must be a non-negative integer, got {value!r}")
    return header


def _read_meta(file: Path) -> dict:
    return read_header(file, READABLE_VERSIONS, "re-encode the corpus with this version: contextembed encode CORPUS "
                       "INDEX --overwrite", ("output_dim", "num_chunks"))


def _read_records(file: Path) -> list[dict]:
    records = []
    for number, record in read_records(file):
        where = f"{file}:{number}"
        for name, kind in RECORD_FIELDS.items():
            field(record, name, kind, where)
        if not 0 <= record["start"] <= record["end"] or record["end"] - record["start"] != len(record["text"]):
            raise ValueError(f"{where}: start/end ({record['start']}, {record['end']}) do not span the "
                             f"{len(record['text'])} characters of its text")
        records.append(record)
    return records
