"""An encoded corpus on disk: a self-contained folder that `search` reads without the source files (the folder
format; `contextembed.stores.index.IndexStore` is the store over it).

Layout (written by `contextembed encode`), format 3:

- `embeddings.npy`: one row per chunk, float32 or codes (`numpy.load` reads it, no pickles);
- `chunks.jsonl`: one JSON object per row, in the same order: `doc` (document index), `path` (the document's id: its
  path relative to the corpus root), `chunk` (index within the document), `start`, `end` (character offsets
  into the document's text) and `text` (the chunk's text); documents in order of id (the tie rule's order);
- `index.json`: `format_version`, what the vectors are (the fields of `StoreInfo`: `model`, `output_dim`,
  `precision`, `chunker`), `num_documents`, `num_chunks`, and per document (by index) its `content_hash` and
  `metadata`.

A document's id is the `path` of its records. Format 2 (written before the index was a store) is read as well: its
`documents` are plain paths, and its documents have no content hash (so an incremental `encode` embeds each of them
again) and no metadata.

Everything `search` shows comes from these three files. An index is written into a staging folder beside the
target and renamed into place, so a crash never leaves a half-written index, and an existing index is only
replaced when the caller says so. Replacing takes two renames (old index aside, new one in); a process that dies
between them leaves the old index in a hidden `.NAME.replaced-*` folder, which the next `encode`, `search` or
`read_index` of that path moves back (`restore_interrupted`).
"""

from __future__ import annotations

import json
import logging
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from contextembed.jsonl import field, read_records
from contextembed.modeling import PRECISIONS
from contextembed.scoring import check_codes

logger = logging.getLogger(__name__)

INDEX_FORMAT_VERSION = 3
READABLE_VERSIONS = (2, 3)
FILES = ("embeddings.npy", "chunks.jsonl", "index.json")
RECORD_FIELDS = {"doc": int, "path": str, "chunk": int, "start": int, "end": int, "text": str}


@dataclass
class Index:
    embeddings: np.ndarray  # (N, D) floats, or (N, D or D/8) codes of `meta["precision"]`
    chunks: list[dict]  # one record per row (RECORD_FIELDS)
    meta: dict

    @property
    def documents(self) -> list[dict]:
        """One `{"id", "content_hash", "metadata"}` per document index (format 2: no hash, no metadata)."""
        return _document_entries(self.meta.get("documents"), self.chunks)


def is_index(path: str | Path) -> bool:
    return (Path(path) / "index.json").is_file()


def write_index(output_dir: str | Path, embeddings: np.ndarray, chunks: list[dict], meta: dict,
                overwrite: bool = False) -> Path:
    """Write an index atomically: into a staging folder beside `output_dir`, then renamed into place.

    An existing index in `output_dir` is replaced only with `overwrite=True`; a folder that holds anything
    else, or a file at that path, is never touched.
    """
    output_dir = Path(output_dir)
    check_index_target(output_dir, overwrite)  # also finishes an earlier interrupted replace
    if len(chunks) != len(embeddings):
        raise ValueError(f"{len(embeddings)} vectors but {len(chunks)} chunk records")
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = output_dir.parent / f".{output_dir.name}.staging-{uuid.uuid4().hex[:8]}"
    staging.mkdir()
    try:
        np.save(staging / "embeddings.npy", embeddings)
        with open(staging / "chunks.jsonl", "w", encoding="utf-8") as f:
            for chunk in chunks:
                f.write(json.dumps(chunk, ensure_ascii=False) + "\n")
        documents = [{"content_hash": d["content_hash"], "metadata": d["metadata"]}
                     for d in _document_entries(meta.get("documents"), chunks)]
        meta = {**meta, "format_version": INDEX_FORMAT_VERSION, "num_chunks": len(chunks), "documents": documents}
        (staging / "index.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        if output_dir.exists():
            # The old index moves aside before the new one moves in: at every moment one of them is whole.
            retired = output_dir.parent / f".{output_dir.name}.replaced-{uuid.uuid4().hex[:8]}"
            output_dir.rename(retired)
            try:
                staging.rename(output_dir)
            except OSError:
                retired.rename(output_dir)
                raise
            shutil.rmtree(retired, ignore_errors=True)
        else:
            staging.rename(output_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return output_dir


def restore_interrupted(output_dir: str | Path) -> bool:
    """Finish what a `write_index` that died left behind at `output_dir`; returns whether an index was restored.

    With no index at `output_dir` but the previous one moved aside (`.NAME.replaced-*`, complete), that index moves
    back: the replacement never finished, so the path holds what it held before. Moved-aside copies left next to an
    index that is in place (a crash after both renames) are removed.
    """
    output_dir = Path(output_dir)
    parent, name = output_dir.parent, output_dir.name
    if not parent.is_dir():
        return False
    retired = sorted((p for p in parent.glob(f".{name}.replaced-*") if p.is_dir()), key=lambda p: p.stat().st_mtime)
    restored = False
    if retired and not output_dir.exists() and is_index(retired[-1]):
        retired.pop().rename(output_dir)
        restored = True
        logger.warning("restored the index at %s: a write that was replacing it stopped half way", output_dir)
    if output_dir.exists():
        for leftover in retired:
            shutil.rmtree(leftover, ignore_errors=True)
    return restored


def check_index_target(output_dir: str | Path, overwrite: bool = False) -> None:
    """Raise a `ValueError` unless an index may be written to `output_dir` (see `write_index`)."""
    from contextembed.checkpoint import check_output_folder

    restore_interrupted(output_dir)
    check_output_folder(output_dir, is_index, "index", overwrite)


def read_index(path: str | Path, mmap: bool = False) -> Index:
    """Read and check an index (with `mmap`, its vectors as a read-only memory map); every inconsistency is a
    `ValueError` naming the file (and line)."""
    path = Path(path)
    restore_interrupted(path)
    for name in FILES:
        if not (path / name).is_file():
            raise ValueError(f"{str(path)!r} is not a complete index: {name} is missing")
    meta = _read_meta(path / "index.json")
    try:
        embeddings = np.load(path / "embeddings.npy", allow_pickle=False, mmap_mode="r" if mmap else None)
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot read {str(path / 'embeddings.npy')!r}: {error}") from error
    chunks = _read_records(path / "chunks.jsonl")
    if embeddings.ndim != 2:
        raise ValueError(f"{str(path / 'embeddings.npy')!r} must be a 2-D array, got shape {embeddings.shape}")
    check_codes(embeddings, meta["precision"], f"the vectors in {str(path / 'embeddings.npy')!r}")
    width = meta["output_dim"] // 8 if meta["precision"] in ("binary", "ubinary") else meta["output_dim"]
    if embeddings.shape[1] != width:
        raise ValueError(f"index {str(path)!r} says output_dim={meta['output_dim']} ({meta['precision']}), but its "
                         f"vectors have {embeddings.shape[1]} columns")
    if not len(chunks) == len(embeddings) == meta["num_chunks"]:
        raise ValueError(f"index {str(path)!r} has {len(embeddings)} vectors but {len(chunks)} chunk records "
                         f"(index.json says {meta['num_chunks']})")
    docs = [record["doc"] for record in chunks]
    if any(b < a for a, b in zip(docs, docs[1:])) or (docs and docs[0] < 0):
        raise ValueError(f"{str(path / 'chunks.jsonl')!r}: `doc` must be non-negative and non-decreasing")
    listed = meta.get("documents")
    if meta["format_version"] >= 3 and (not isinstance(listed, list) or len(listed) != (docs[-1] + 1 if docs else 0)
                                        or not all(isinstance(d, dict) and isinstance(d.get("content_hash", ""), str)
                                                   and isinstance(d.get("metadata", {}), dict) for d in listed)):
        raise ValueError(f"{str(path / 'index.json')!r}: `documents` must list one object (`content_hash`, "
                         f"`metadata`) per document ({docs[-1] + 1 if docs else 0})")
    ids = [d["id"] for d in _document_entries(listed, chunks)]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{str(path / 'index.json')!r}: document ids repeat (e.g. "
                         f"{next(i for i in ids if ids.count(i) > 1)!r})")
    return Index(embeddings, chunks, meta)


def document_text(records: list[dict]) -> str:
    """A document's text rebuilt from its chunk records alone: each chunk at its offsets, gaps as spaces.

    >>> document_text([{"start": 0, "end": 5, "text": "Rent."}, {"start": 6, "end": 10, "text": "Due."}])
    'Rent. Due.'
    """
    length = max((r["end"] for r in records), default=0)
    characters = [" "] * length
    for record in records:
        characters[record["start"] : record["end"]] = record["text"]
    return "".join(characters)


def _read_meta(file: Path) -> dict:
    try:
        meta = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot read {str(file)!r} as JSON: {error}") from error
    if not isinstance(meta, dict):
        raise ValueError(f"{str(file)!r} must hold a JSON object")
    if meta.get("format_version") not in READABLE_VERSIONS:
        raise ValueError(f"{str(file)!r}: format_version must be {' or '.join(map(str, READABLE_VERSIONS))}, got "
                         f"{meta.get('format_version')!r} (re-encode the corpus with this version: contextembed "
                         "encode CORPUS INDEX --overwrite)")
    if meta.get("precision") not in PRECISIONS:
        raise ValueError(f"{str(file)!r}: precision must be one of {PRECISIONS}, got {meta.get('precision')!r}")
    for name in ("output_dim", "num_chunks"):
        value = meta.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{str(file)!r}: {name} must be a non-negative integer, got {value!r}")
    return meta


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


def _document_entries(listed, chunks: list[dict]) -> list[dict]:
    """`{"id", "content_hash", "metadata"}` per document index: the id is the `path` of the document's records; hash
    and metadata as listed (format 3), none for format 2 (which listed paths)."""
    ids = {}
    for record in chunks:
        ids.setdefault(record["doc"], record["path"])
    listed = listed if listed and isinstance(listed[0], dict) else [{}] * (max(ids, default=-1) + 1)
    return [{"id": ids.get(d, str(d)), "content_hash": entry.get("content_hash", ""),
             "metadata": entry.get("metadata", {})} for d, entry in enumerate(listed)]
