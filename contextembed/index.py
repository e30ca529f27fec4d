"""An encoded corpus on disk, built to grow: immutable segments published by one small manifest replaced atomically
(the Lucene and Lance shape). `search` reads it without the source files; `contextembed.stores.index.IndexStore` is
the store over it.

Layout, format 4:

- `manifest.json`, the commit point: `format_version`, what the vectors are (the fields of `StoreInfo`: `model`,
  `dim`, `precision`, `chunker`), `generation` (one more at every commit), `num_documents`, `num_chunks`,
  and the `segments`, each with its `name`, `documents`, `chunks`, and `deleted`: the file in the segment's folder
  that records which of its documents were deleted or replaced since (none: all live);
- `segments/NAME/`: one segment each (`contextembed.segments`: vectors, chunk records, chunk texts and document
  entries, every document's chunks in order, documents sorted by id), never changed once written.

A write costs what it adds: new documents go into a new segment; a replaced or deleted document is marked in a new,
small deletion file of the segment that holds it (an update is a delete plus an add). Segment files are flushed to
disk first, then a new manifest is written beside the old one and renamed over it (`os.replace`): a process killed at
any moment leaves the last published manifest, whole, and files it never published, which the next writer removes.
Writers take turns through a lock on the index folder (`fcntl.flock`; where that does not exist, the threads of one
process), and a reader takes it to read a manifest and open what it lists, so it never sees half a write: what it
opened stays readable (memory-mapped) while later writes go on.

Segments are merged by size tiers as they accumulate (`MERGE_FACTOR` of one size become one) and a segment with more
dead than live chunks is rewritten without them; `compact` merges everything into one segment. Indexes of formats 2
and 3 (one folder of `embeddings.npy`, `chunks.jsonl` and `index.json`; `contextembed.index_legacy`) are read as one
segment and upgraded to format 4 by their first write.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import logging
import math
import os
import shutil
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from contextembed.index_legacy import (LEGACY_FILES, is_legacy_index, read_header, read_legacy_index,
                                      restore_interrupted)
from contextembed.modeling import PRECISIONS
from contextembed.segments import Segment, SegmentWriter, sync_folder, write_segment
from contextembed.stores.base import DocumentVectors

logger = logging.getLogger(__name__)

INDEX_FORMAT_VERSION = 4
MANIFEST = "manifest.json"
SEGMENTS = "segments"
MERGE_FACTOR = 10  # segments of one size tier merged into one
MERGE_RUN = 4096  # documents a merge copies at once, at most (memory holds their entries)
INFO_FIELDS = ("model", "dim", "precision", "chunker")

_THREADS = threading.Lock()  # flock does not order the threads of one process where fcntl is missing
_HELD = threading.local()  # the folders whose lock this thread holds (a re-read inside a write takes it once)


@dataclass
class Part:
    """A segment as a manifest publishes it: which of its documents are live."""

    segment: Segment
    live: np.ndarray  # (documents,) bool
    deleted: str | None = None  # its deletion file (None: every document live)

    @property
    def live_chunks(self) -> int:
        if self.live.all():  # from the header alone: a segment read for nothing else is not read for this
            return len(self.segment.chunks)
        return int(np.diff(self.segment.starts)[self.live].sum())

    def entry(self) -> dict:
        return {"name": self.segment.name, "documents": len(self.segment), "chunks": len(self.segment.chunks),
                "deleted": self.deleted, "live_documents": int(self.live.sum()), "live_chunks": self.live_chunks}


@dataclass
class Snapshot:
    """One published state of an index: what its vectors are, and its segments with their live documents."""

    meta: dict  # the info fields, and `generation`
    parts: list[Part] = field(default_factory=list)
    legacy: bool = False  # read from a format 2 or 3 folder (rewritten as format 4 by the first write)

    @property
    def num_documents(self) -> int:
        return sum(int(p.live.sum()) for p in self.parts)

    @property
    def num_chunks(self) -> int:
        return sum(p.live_chunks for p in self.parts)

    def locate(self, document_id: str) -> tuple[Part, int] | None:
        """The part and position holding the live document with this id, or None."""
        for part in self.parts:
            d = part.segment.position(document_id)
            if d is not None and part.live[d]:
                return part, d
        return None

    def hashes(self) -> dict[str, str]:
        """Every live document's id and content hash."""
        return {part.segment.documents[d]["id"]: part.segment.documents[d].get("content_hash", "")
                for part in self.parts for d in np.flatnonzero(part.live)}


class IndexFolder:
    """The folder at `path` as a sequence of snapshots; `None`: an index kept in memory (nothing written)."""

    def __init__(self, path: str | Path | None):
        self.path = None if path is None else Path(path)
        self._memory: Snapshot | None = None

    # --- reading ----------------------------------------------------------------------------------------------
    def stamp(self):
        """What changes whenever a write publishes: the manifest's inode and modification time."""
        if self.path is None:
            return None
        for name in (MANIFEST, "index.json"):
            try:
                stat = os.stat(self.path / name)
            except OSError:
                continue
            return (name, stat.st_ino, stat.st_mtime_ns)
        return ("missing",)

    def read(self) -> Snapshot | None:
        """The index as published now (None: no index there), its segments opened; under the lock."""
        if self.path is None:
            return self._memory
        with self.locked():
            return self._read_unlocked()

    def _read_unlocked(self) -> Snapshot | None:
        if not self.path.is_dir():
            return None
        if not (self.path / MANIFEST).is_file():
            restore_interrupted(self.path)
            if not is_legacy_index(self.path):
                return None
            segment, meta = read_legacy_index(self.path)
            return Snapshot({**meta, "generation": 0}, [Part(segment, np.ones(len(segment), bool))] if len(segment)
                            else [], legacy=True)
        manifest = read_manifest(self.path / MANIFEST)
        parts = []
        for entry in manifest["segments"]:
            folder = self.path / SEGMENTS / entry["name"]
            segment = Segment.open(folder, entry["documents"])
            live = np.ones(len(segment), bool)
            if entry.get("deleted"):
                dead = np.unpackbits(np.load(folder / entry["deleted"], allow_pickle=False), count=len(segment))
                live = ~dead.astype(bool)
            parts.append(Part(segment, live, entry.get("deleted")))
        return Snapshot({k: manifest[k] for k in (*INFO_FIELDS, "generation")}, parts)

    # --- writing ----------------------------------------------------------------------------------------------
    def create(self, info: dict) -> Snapshot:
        """Publish an empty index of vectors described by `info` (the `StoreInfo` fields)."""
        with self.locked():
            return self._publish(Snapshot({**info, "generation": 0}))

    def commit(self, current: Snapshot | None, info: dict, documents: list[DocumentVectors], delete: set[str],
               *, replace: bool = True, drop_all: bool = False, merge: bool = True) -> Snapshot:
        """Publish `documents` (with `replace`, each replacing any live document of its id; without, they are known
        to be new and no segment is searched for them) and the deletion of `delete`, as one commit over `current`
        (the snapshot read under the caller's lock); `drop_all` starts from an empty index (an overwrite). Then
        merge segments as `merge_plan` says (with `merge`)."""
        current = Snapshot({**info, "generation": 0}) if current is None or drop_all else self._upgraded(current)
        generation = current.meta["generation"] + 1
        gone = delete | ({d.id for d in documents} if replace else set())
        parts, marked = [], []
        for part in current.parts:
            dead = [d for d in map(part.segment.position, gone) if d is not None and part.live[d]] if gone else []
            if dead:
                live = part.live.copy()
                live[dead] = False
                part = Part(part.segment, live, f"deleted-{generation:06d}.npy")
                marked.append(part)
            if part.live.any():  # a segment left with no live document is dropped whole
                parts.append(part)
        if documents:
            parts.append(Part(self._new_segment(documents, info), np.ones(len(documents), bool)))
        published = self._publish(Snapshot({**info, "generation": generation}, parts), marked)
        if merge:
            plan = merge_plan([(p.live_chunks, len(p.segment.chunks)) for p in published.parts])
            return self.merge(published, plan) if plan else published
        return published

    def merge(self, current: Snapshot, plan: list[int] | None = None) -> Snapshot:
        """Merge the parts `plan` names (default: all, which `contextembed compact` does) into one segment of their
        live documents, streamed, and publish it in their place."""
        current = self._upgraded(current)
        plan = list(range(len(current.parts))) if plan is None else plan
        if not plan or (len(plan) == 1 and current.parts[plan[0]].live.all()):
            return current
        merged = [current.parts[i] for i in plan]
        segment = self._merged_segment(merged, current.meta)
        parts = [p for i, p in enumerate(current.parts) if i not in set(plan)]
        if len(segment):
            parts.insert(min(plan), Part(segment, np.ones(len(segment), bool)))
        logger.info("merged %d segments (%d live documents) into one", len(merged), len(segment))
        return self._publish(Snapshot({**current.meta, "generation": current.meta["generation"] + 1}, parts))

    def _upgraded(self, current: Snapshot) -> Snapshot:
        """A format 2 or 3 index written as a format 4 segment (not yet published: the caller's commit does)."""
        if not current.legacy or self.path is None:
            return current
        segment = self._merged_segment(current.parts, current.meta)
        parts = [Part(segment, np.ones(len(segment), bool))] if len(segment) else []
        logger.info("upgrading the index at %s to format %d", self.path, INDEX_FORMAT_VERSION)
        return Snapshot(current.meta, parts)

    def _new_segment(self, documents: list[DocumentVectors], info: dict) -> Segment:
        width, dtype = vector_layout(info)
        name = _segment_name()
        if self.path is None:
            return Segment.from_documents(documents, width, dtype, name=name)
        write_segment(self.path / SEGMENTS / name, documents, width, dtype)
        return Segment.open(self.path / SEGMENTS / name, len(documents))

    def _merged_segment(self, parts: list[Part], info: dict) -> Segment:
        """One segment of the live documents of `parts`, in order of id, streamed: each part's entries read once as
        they come, runs of consecutive documents of one part copied as blocks of rows."""
        width, dtype = vector_layout(info)
        name = _segment_name()

        def live_entries(i: int, part: Part):
            for d, entry in enumerate(part.segment.entries()):
                if part.live[d]:
                    yield entry["id"], i, d, entry

        order = heapq.merge(*[live_entries(i, part) for i, part in enumerate(parts)])
        if self.path is None:
            return Segment.from_documents([parts[i].segment.document(d) for _, i, d, _ in order], width, dtype, name)
        writer = SegmentWriter(self.path / SEGMENTS / name, width, dtype)
        run: list = []  # (part, first position, entries) of consecutive live documents of one part
        for _, i, d, entry in order:
            if run and (run[0] != i or run[1] + len(run[2]) != d or len(run[2]) >= MERGE_RUN):
                writer.add_documents(parts[run[0]].segment, run[1], run[2])
                run = []
            if not run:
                run = [i, d, []]
            run[2].append(entry)
        if run:
            writer.add_documents(parts[run[0]].segment, run[1], run[2])
        count = writer.close()
        return Segment.open(self.path / SEGMENTS / name, count)

    def _publish(self, snapshot: Snapshot, marked: list[Part] = ()) -> Snapshot:
        """Make `snapshot` the index: the deletion files of the `marked` parts, then the manifest; then remove what
        the manifest no longer names."""
        if self.path is None:
            self._memory = snapshot
            return snapshot
        for part in marked:
            if any(p is part for p in snapshot.parts):
                with open(self.path / SEGMENTS / part.segment.name / part.deleted, "wb") as f:
                    np.save(f, np.packbits(~part.live), allow_pickle=False)
                    f.flush()
                    os.fsync(f.fileno())
        manifest = {"format_version": INDEX_FORMAT_VERSION, **{k: snapshot.meta[k] for k in INFO_FIELDS},
                    "generation": snapshot.meta["generation"], "num_documents": snapshot.num_documents,
                    "num_chunks": snapshot.num_chunks, "segments": [p.entry() for p in snapshot.parts]}
        self.path.mkdir(parents=True, exist_ok=True)
        staged = self.path / f".{MANIFEST}.{uuid.uuid4().hex[:8]}"
        with open(staged, "w", encoding="utf-8") as f:
            f.write(json.dumps(manifest, indent=1) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(staged, self.path / MANIFEST)  # the commit
        sync_folder(self.path)
        self._collect_garbage(snapshot)
        return snapshot

    def _collect_garbage(self, snapshot: Snapshot) -> None:
        """Remove segments, deletion files and staged manifests that the published manifest does not name (what
        merges replaced, and what writers that died left behind), and the files of an upgraded format 2 or 3."""
        named = {p.segment.name: p.deleted for p in snapshot.parts}
        folder = self.path / SEGMENTS
        for segment in folder.iterdir() if folder.is_dir() else []:
            if segment.name not in named:
                shutil.rmtree(segment, ignore_errors=True)
                continue
            for deleted in segment.glob("deleted-*.npy"):
                if deleted.name != named[segment.name]:
                    deleted.unlink(missing_ok=True)
        for staged in self.path.glob(f".{MANIFEST}.*"):
            staged.unlink(missing_ok=True)
        for name in LEGACY_FILES:
            (self.path / name).unlink(missing_ok=True)

    @contextlib.contextmanager
    def locked(self):
        """Writers of one index take turns, and readers open a manifest's files, under a lock on the index folder
        (across processes where `fcntl` exists; the threads of one process otherwise)."""
        held = _HELD.__dict__.setdefault("folders", set())  # this thread's locks: a writer re-reads under its own
        key = None if self.path is None else os.path.abspath(self.path)
        if key is None or key in held:
            yield
            return
        held.add(key)
        try:
            try:
                import fcntl
            except ImportError:  # pragma: no cover - Windows: the threads of one process
                with _THREADS:
                    yield
                return
            self.path.mkdir(parents=True, exist_ok=True)
            folder = os.open(self.path, os.O_RDONLY)
            try:
                fcntl.flock(folder, fcntl.LOCK_EX)
                yield
            finally:
                os.close(folder)  # releases the lock
        finally:
            held.discard(key)


def merge_plan(sizes: list[tuple[int, int]]) -> list[int]:
    """Which parts to merge now, from each one's (live chunks, all chunks); none: an empty list. `MERGE_FACTOR` parts
    of one size tier (live chunks within a factor of `MERGE_FACTOR`), the smallest tier first; else a part whose
    chunks are mostly dead, alone (rewritten without them).

    >>> merge_plan([(5, 5)] * 9 + [(5000, 5000)]), merge_plan([(5, 5)] * 10 + [(5000, 5000)])
    ([], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    >>> merge_plan([(5000, 5000), (40, 100)])
    [1]
    """
    tiers: dict[int, list[int]] = {}
    for i, (live, _) in enumerate(sizes):
        tiers.setdefault(int(math.log(max(live, 1), MERGE_FACTOR)), []).append(i)
    for tier in sorted(tiers):
        if len(tiers[tier]) >= MERGE_FACTOR:
            return tiers[tier][:MERGE_FACTOR]
    return next(([i] for i, (live, total) in enumerate(sizes) if total - live > live), [])


def read_manifest(file: Path) -> dict:
    """A manifest, checked; every problem a `ValueError` naming the file."""
    manifest = read_header(file, (INDEX_FORMAT_VERSION,), "an index written by a newer contextembed: upgrade the "
                           "package", ("dim", "generation"))
    segments = manifest.get("segments")
    if not isinstance(segments, list) or not all(
            isinstance(s, dict) and isinstance(s.get("name"), str) and "/" not in s["name"] and s["name"][:1] not in
            ("", ".") and isinstance(s.get("documents"), int) and isinstance(s.get("deleted") or "", str)
            and "/" not in (s.get("deleted") or "") for s in segments):
        raise ValueError(f"{str(file)!r}: segments must list objects with a name, documents and deleted")
    return manifest


def is_index(path: str | Path) -> bool:
    """Whether `path` holds an index (format 4, or an older one)."""
    return (Path(path) / MANIFEST).is_file() or is_legacy_index(path)


def check_index_target(output_dir: str | Path) -> None:
    """Raise a `ValueError` unless an index may be written to `output_dir`: a new or empty folder, or an index
    (which an encode brings in step with its corpus, or replaces with `--overwrite`). A folder that holds anything
    else, or a file at that path, is never touched."""
    from contextembed.checkpoint import check_output_folder

    restore_interrupted(output_dir)
    check_output_folder(output_dir, is_index, "index", overwrite=True)


def vector_layout(info: dict) -> tuple[int, np.dtype]:
    """The stored width and dtype of vectors described by `info`: packed bits are 8 dimensions a byte."""
    from contextembed.scoring import CODE_DTYPES

    packed = info["precision"] in ("binary", "ubinary")
    return info["dim"] // 8 if packed else info["dim"], np.dtype(CODE_DTYPES.get(info["precision"],
                                                                                              np.float32))


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


def _segment_name() -> str:
    return f"seg-{uuid.uuid4().hex[:12]}"
