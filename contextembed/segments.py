"""One segment of an index: documents' chunk vectors, chunk records and document entries, written once and then only
read, memory-mapped (an index is a list of segments under a manifest: `contextembed.index`).

A segment is a folder of four files, its documents sorted by id and each document's chunks in order, so a row's
position is the tie rule's order within the segment:

- `vectors.npy`: (chunks, width) float32 or codes, one row per chunk (`numpy.load` reads it, no pickles);
- `chunks.npy`: one record per row: `doc` (the document's position in the segment), `chunk` (its index in the
  document), `start`, `end` (character offsets into the document's text) and `text_end` (where its text ends in
  `texts.bin`, in bytes);
- `texts.bin`: the chunks' texts, UTF-8, one after another;
- `documents.jsonl`: one line per document, in order: `id`, `content_hash`, `metadata`.

A segment is written whole from documents in memory (`write_segment`, a batch being committed) or streamed from
other segments, block of rows by block (`SegmentWriter`, what a merge writes), and every file is flushed to disk
before the manifest that publishes it is. `Segment` reads one (or holds one in memory, for an index that is never written).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from contextembed.chunking import Chunk
from contextembed.stores.base import DocumentVectors

CHUNK_RECORD = np.dtype([("doc", "<i8"), ("chunk", "<i4"), ("start", "<i8"), ("end", "<i8"), ("text_end", "<i8")])
FILES = ("vectors.npy", "chunks.npy", "texts.bin", "documents.jsonl")
_HEADER_BYTES = 256  # an .npy header of fixed length, so a streamed file's row count is written at the end
_BLOCK_ROWS = 1 << 16  # rows copied at once by a merge


class Segment:
    """A segment's arrays (memory-mapped from its folder, or in memory) and its documents' entries.

    Opening a segment reads its headers only: the document entries, each row's document and each document's rows are
    read when first needed (a search's hits, a lookup by id, a merge), so a writer that only adds segments holds none
    of them, whatever the index's size."""

    def __init__(self, vectors: np.ndarray, chunks: np.ndarray, texts: np.ndarray | bytes,
                 documents: list[dict] | None = None, name: str = "", *, folder: Path | None = None,
                 count: int | None = None):
        self.name = name
        self.vectors = vectors  # (N, width)
        self.chunks = chunks  # (N,) CHUNK_RECORD
        self.texts = texts  # UTF-8 bytes of every chunk's text
        self.folder = folder
        self._documents = documents  # {"id", "content_hash", "metadata"} per document, sorted by id
        self.count = len(documents) if documents is not None else count  # documents
        self._positions: dict[str, int] | None = None
        self._starts: np.ndarray | None = None

    @classmethod
    def open(cls, folder: str | Path, count: int) -> Segment:
        """Map a segment's files (`count`: its documents, as its manifest says); every inconsistency found now (or
        when the entries are first read) is a `ValueError` naming the file."""
        folder = Path(folder)
        for name in FILES:
            if not (folder / name).is_file():
                raise ValueError(f"{str(folder)!r} is not a complete segment: {name} is missing")
        try:
            vectors = np.load(folder / "vectors.npy", mmap_mode="r", allow_pickle=False)
            chunks = np.load(folder / "chunks.npy", mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as error:
            raise ValueError(f"cannot read the segment {str(folder)!r}: {error}") from error
        size = (folder / "texts.bin").stat().st_size
        texts = np.memmap(folder / "texts.bin", dtype=np.uint8, mode="r") if size else np.zeros(0, np.uint8)
        segment = cls(vectors, chunks, texts, name=folder.name, folder=folder, count=count)
        where = str(folder)
        if chunks.dtype != CHUNK_RECORD or vectors.ndim != 2 or len(vectors) != len(chunks):
            raise ValueError(f"segment {where!r}: {len(vectors)} vectors but {len(chunks)} chunk records")
        if len(chunks) and chunks["text_end"][-1] != size:
            raise ValueError(f"segment {where!r}: texts.bin holds {size} bytes, the records say "
                             f"{chunks['text_end'][-1]}")
        if len(chunks) and chunks["doc"][-1] != count - 1:
            raise ValueError(f"segment {where!r}: its chunk records number {chunks['doc'][-1] + 1} documents, its "
                             f"manifest {count}")
        return segment

    @property
    def documents(self) -> list[dict]:
        if self._documents is None:
            self._documents = list(self.entries())
        return self._documents

    def entries(self, first: int = 0) -> Iterator[dict]:
        """The document entries from position `first` on, read as a stream (checked: ids distinct, in order)."""
        if self._documents is not None:
            yield from self._documents[first:]
            return
        file = self.folder / "documents.jsonl"
        previous, count = None, 0
        with open(file, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError as error:
                    raise ValueError(f"{file}:{number}: not valid JSON ({error.msg})") from error
                document_id = entry.get("id") if isinstance(entry, dict) else None
                if not isinstance(document_id, str) or not document_id or (previous is not None
                                                                           and document_id <= previous):
                    raise ValueError(f"{file}:{number}: documents.jsonl must list distinct ids in order")
                previous, count = document_id, count + 1
                if number > first:
                    yield entry
        if count != self.count:
            raise ValueError(f"{file}: {count} documents, its manifest says {self.count}")

    @property
    def doc_of_row(self) -> np.ndarray:
        """(N,) each row's document, non-decreasing."""
        return np.asarray(self.chunks["doc"])

    @property
    def starts(self) -> np.ndarray:
        """(documents + 1,) each document's first row, and the row count at the end."""
        if self._starts is None:
            docs = self.doc_of_row
            if len(docs) and (docs[0] != 0 or np.any(np.diff(docs) < 0)):
                raise ValueError(f"segment {self.name!r}: chunk records must number its documents in order")
            self._starts = np.searchsorted(docs, np.arange(self.count + 1))
        return self._starts

    @classmethod
    def from_documents(cls, documents: Sequence[DocumentVectors], width: int, dtype, name: str = "") -> Segment:
        """A segment in memory, its documents sorted by id.

        >>> b = DocumentVectors("b", [Chunk("Rent.", 0, 5), Chunk("Due.", 6, 10)], np.eye(2))
        >>> a = DocumentVectors("a", [Chunk("Pets.", 0, 5)], np.ones((1, 2)))
        >>> segment = Segment.from_documents([b, a], width=2, dtype=np.float32)
        >>> segment.ids, segment.doc_of_row.tolist(), segment.text(2), segment.rows(1)
        (['a', 'b'], [0, 1, 1], 'Due.', range(1, 3))
        """
        vectors, chunks, texts, entries = _arrays(documents, width, dtype)
        return cls(vectors, chunks, texts, entries, name)

    def __len__(self) -> int:
        """Its number of documents."""
        return self.count

    @property
    def ids(self) -> list[str]:
        return [d["id"] for d in self.documents]

    def position(self, document_id: str) -> int | None:
        """The document's position in the segment, or None."""
        if self._positions is None:
            self._positions = {d["id"]: i for i, d in enumerate(self.documents)}
        return self._positions.get(document_id)

    def read_rows(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray, bytes]:
        """Rows `start` to `stop - 1`: (vectors, chunk records, their texts' bytes), read from the files rather than
        through the maps (a merge reads every row once: mapped, they would stay resident in this process)."""
        first = int(self.chunks["text_end"][start - 1]) if start else 0
        last = int(self.chunks["text_end"][stop - 1]) if stop > start else first
        return (_read(self.vectors, start, stop), _read(self.chunks, start, stop),
                bytes(_read(self.texts, first, last)))

    def rows(self, d: int) -> range:
        return range(int(self.starts[d]), int(self.starts[d + 1]))

    def text(self, row: int) -> str:
        first = int(self.chunks["text_end"][row - 1]) if row else 0
        return bytes(self.texts[first : int(self.chunks["text_end"][row])]).decode("utf-8")

    def chunk(self, row: int) -> Chunk:
        record = self.chunks[row]
        return Chunk(self.text(row), int(record["start"]), int(record["end"]))

    def document(self, d: int) -> DocumentVectors:
        """The document at position `d`: every chunk, its vectors (read from the map), metadata and hash."""
        rows = self.rows(d)
        entry = self.documents[d]
        return DocumentVectors(entry["id"], [self.chunk(r) for r in rows],
                               np.array(self.vectors[rows.start : rows.stop]), dict(entry.get("metadata") or {}),
                               entry.get("content_hash", ""))


def write_segment(folder: Path, documents: Sequence[DocumentVectors], width: int, dtype) -> None:
    """Write documents (any order; sorted by id here) as a new segment in `folder`, durably."""
    vectors, chunks, texts, entries = _arrays(documents, width, dtype)
    folder.mkdir(parents=True)
    _write_file(folder / "vectors.npy", lambda f: np.lib.format.write_array(f, vectors, allow_pickle=False))
    _write_file(folder / "chunks.npy", lambda f: np.lib.format.write_array(f, chunks, allow_pickle=False))
    _write_file(folder / "texts.bin", lambda f: f.write(texts))
    _write_file(folder / "documents.jsonl", lambda f: f.write(_entries_jsonl(entries)))
    sync_folder(folder)


class SegmentWriter:
    """A segment written as runs of documents copied from other segments, in order of id (what a merge writes):
    memory holds one block of rows."""

    def __init__(self, folder: Path, width: int, dtype):
        folder.mkdir(parents=True)
        self.folder, self.width, self.dtype = folder, width, np.dtype(dtype)
        self._vectors = _ArrayFile(folder / "vectors.npy", self.dtype, width)
        self._chunks = _ArrayFile(folder / "chunks.npy", CHUNK_RECORD, None)
        self._texts = open(folder / "texts.bin", "wb")
        self._documents = open(folder / "documents.jsonl", "w", encoding="utf-8")
        self._last: str | None = None
        self._count = self._bytes = 0

    def add_documents(self, segment: Segment, first: int, entries: list[dict]) -> None:
        """Copy the documents of `segment` from position `first` on whose `entries` are given (ids above every id
        written so far), as blocks of rows."""
        if not entries:
            return
        if self._last is not None and entries[0]["id"] <= self._last:
            raise ValueError(f"documents must come in order of id: {entries[0]['id']!r} after {self._last!r}")
        begin, end = int(segment.starts[first]), int(segment.starts[first + len(entries)])
        for row in range(begin, end, _BLOCK_ROWS):
            vectors, records, texts = segment.read_rows(row, min(row + _BLOCK_ROWS, end))
            base = int(segment.chunks["text_end"][row - 1]) if row else 0
            records["doc"] += self._count - first
            records["text_end"] += self._bytes - base
            self._vectors.append(vectors)
            self._chunks.append(records)
            self._texts.write(texts)
            self._bytes += len(texts)
        self._documents.write(_entries_jsonl(entries))
        self._count += len(entries)
        self._last = entries[-1]["id"]

    def close(self) -> int:
        """Finish the files, durably; returns the number of documents."""
        self._vectors.close()
        self._chunks.close()
        for f in (self._texts, self._documents):
            f.flush()
            os.fsync(f.fileno())
            f.close()
        sync_folder(self.folder)
        return self._count


def _read(array: np.ndarray, start: int, stop: int) -> np.ndarray:
    """Rows `start` to `stop - 1` of an array, through its file when it is a memory map (a copy, never mapped)."""
    if not isinstance(array, np.memmap):
        return np.array(array[start:stop])
    row = array.dtype.itemsize * (int(np.prod(array.shape[1:])) if array.ndim > 1 else 1)
    with open(array.filename, "rb") as f:
        f.seek(array.offset + start * row)
        block = np.fromfile(f, dtype=array.dtype, count=(stop - start) * (row // array.dtype.itemsize))
    return block.reshape((stop - start, *array.shape[1:]))


def sync_folder(folder: Path) -> None:
    """Flush a folder's entries (new files, renames) to disk, where the platform allows it."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory handles
        return
    try:
        os.fsync(descriptor)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(descriptor)


def _write_file(path: Path, write) -> None:
    with open(path, "wb" if path.suffix != ".jsonl" else "w", **({} if path.suffix != ".jsonl" else
                                                                  {"encoding": "utf-8"})) as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())


def _entry(document: DocumentVectors) -> dict:
    return {"id": document.id, "content_hash": document.content_hash, "metadata": document.metadata}


def _entries_jsonl(entries: Iterable[dict]) -> str:
    return "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries)


def _arrays(documents: Sequence[DocumentVectors], width: int, dtype):
    """(vectors, chunk records, texts, entries) of documents sorted by id."""
    documents = sorted(documents, key=lambda d: d.id)
    counts = [len(d.chunks) for d in documents]
    texts = [c.text.encode("utf-8") for d in documents for c in d.chunks]
    chunks = np.zeros(len(texts), CHUNK_RECORD)
    chunks["doc"] = np.repeat(np.arange(len(documents)), counts)
    chunks["chunk"] = [i for n in counts for i in range(n)]
    chunks["start"] = [c.start for d in documents for c in d.chunks]
    chunks["end"] = [c.end for d in documents for c in d.chunks]
    chunks["text_end"] = np.cumsum([len(t) for t in texts])
    vectors = np.concatenate([np.asarray(d.vectors, dtype) for d in documents]) if documents \
        else np.zeros((0, width), dtype)
    return vectors, chunks, b"".join(texts), [_entry(d) for d in documents]


class _ArrayFile:
    """An .npy file appended to block by block; its header, of fixed length, gets the row count at `close`."""

    def __init__(self, path: Path, dtype: np.dtype, width: int | None):
        self.dtype, self.width, self.rows = dtype, width, 0
        self.file = open(path, "wb")
        self.file.write(self._header())

    def _header(self) -> bytes:
        shape = (self.rows,) if self.width is None else (self.rows, self.width)
        text = repr({"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False, "shape": shape})
        body = text.encode("latin1").ljust(_HEADER_BYTES - 10 - 1) + b"\n"
        if len(body) != _HEADER_BYTES - 10:
            raise ValueError(f"an .npy header of {self.dtype} does not fit {_HEADER_BYTES} bytes")
        return b"\x93NUMPY\x01\x00" + len(body).to_bytes(2, "little") + body

    def append(self, array: np.ndarray) -> None:
        self.file.write(np.ascontiguousarray(array, self.dtype).tobytes())
        self.rows += len(array)

    def close(self) -> None:
        self.file.seek(0)
        self.file.write(self._header())
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
