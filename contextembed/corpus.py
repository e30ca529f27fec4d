"""A corpus read as a stream of documents, never whole: a folder of `.txt`/`.md` files, a JSON-lines file, or Parquet;
and documents embedded with each distinct one encoded once.

    for document in read_corpus("corpus.jsonl"):      # one Document at a time
        ...

What a path is read as:

- a **folder** of `.txt`/`.md` files (searched recursively, sorted by path): one document each, its id the path
  relative to the folder, its metadata `{"path": id}`; a `.txt`/`.md` file alone is a corpus of one;
- a **JSON-lines** file (`.jsonl`, `.jsonl.gz`, `.ndjson`): one document a line, an `id` (or `_id`, as BEIR's
  `corpus.jsonl` has it) and either `text` (raw text, split by the chunker) or its chunks, kept exactly, as `chunks`
  or `sentences` (context-bench's `documents.jsonl`); optional `title` (context in every window, never pooled) and
  `metadata` (an object of strings, numbers and booleans, for filters);
- **Parquet**: a `.parquet` file, or a folder of them (read in order of path), with the same columns.

A JSON-lines or Parquet path is never read as plain text. Every bad record is a `ValueError` naming its file and line
(or row) and what is wrong; an id that repeats is an error (the second one named); a document with nothing to embed
(an empty file, empty `text`) is skipped with one warning that counts them. Chunks given as a list are placed as if
joined by one space (their character offsets in the index count that way).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from contextembed.jsonl import read_records

logger = logging.getLogger(__name__)

SUFFIXES = (".txt", ".md")
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson")
ID_FIELDS = ("id", "_id")
CHUNK_FIELDS = ("chunks", "sentences")


@dataclass
class Document:
    """One document of a corpus: its id, and its raw `text` or its `chunks` (exactly one of them)."""

    id: str
    text: str | None = None
    chunks: list[str] | None = None
    title: str | None = None
    metadata: dict = field(default_factory=dict)

    @property
    def content_hash(self) -> str:
        """What incremental encoding compares: a text with no title and no metadata of its own (a folder's file,
        whose metadata is its path) hashes as its text alone, as indexes of earlier releases recorded it; anything
        else as the canonical JSON of text or chunks, title and metadata.

        >>> Document("a", "rent").content_hash == Document("b", "rent", metadata={"path": "b"}).content_hash
        True
        >>> Document("a", "rent").content_hash == Document("a", "rent", title="Lease").content_hash
        False
        """
        if self.chunks is None and self.title is None and self.metadata in ({}, {"path": self.id}):
            return hashlib.sha256(self.text.encode("utf-8")).hexdigest()
        canonical = json.dumps({"text": self.text, "chunks": self.chunks, "title": self.title,
                                "metadata": self.metadata}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class Corpus:
    """The documents under a path, read as a stream each time it is iterated (see the module docstring)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.exists():
            raise ValueError(f"corpus path {str(self.path)!r} does not exist")
        self.kind, self.files = _layout(self.path)

    def __iter__(self) -> Iterator[Document]:
        seen: set[str] = set()
        empty: list[str] = []
        for where, document in self._documents():
            if document is None:
                empty.append(where)
                continue
            if document.id in seen:
                raise ValueError(f"{where}: duplicate document id {document.id!r}: every document needs its own id")
            seen.add(document.id)
            yield document
        if empty:
            logger.warning("skipped %d empty document(s) with nothing to embed (e.g. %s)", len(empty), empty[0])
        if not seen:
            raise ValueError(f"{str(self.path)!r} holds no document with text: the corpus is empty")

    def _documents(self) -> Iterator[tuple[str, Document | None]]:
        if self.kind == "text":
            root = self.path if self.path.is_dir() else self.path.parent
            for file in self.files:
                try:
                    text = file.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as error:
                    raise ValueError(f"cannot read {str(file)!r} as UTF-8 text: {error}") from error
                name = file.relative_to(root).as_posix()
                yield str(file), (Document(name, text, metadata={"path": name}) if text.strip() else None)
            return
        records = _jsonl_records if self.kind == "jsonl" else _parquet_records
        for file in self.files:
            for where, record in records(file):
                yield where, document_from_record(record, where)

    def count(self) -> int | None:
        """How many records the corpus holds, cheaply (for a progress bar): files, lines or Parquet rows; None where
        counting would mean reading everything (a compressed file)."""
        if self.kind == "text":
            return len(self.files)
        if self.kind == "parquet":
            import pyarrow.parquet as pq

            return sum(pq.ParquetFile(file).metadata.num_rows for file in self.files)
        if any(file.name.endswith(".gz") for file in self.files):
            return None
        lines = 0
        for file in self.files:
            with open(file, "rb") as f:
                last = b"\n"
                for block in iter(lambda: f.read(1 << 20), b""):
                    lines += block.count(b"\n")
                    last = block[-1:]
                lines += last != b"\n"
        return lines


def read_corpus(path: str | Path) -> Corpus:
    """The corpus at `path` (a folder of .txt/.md files, a JSON-lines file, Parquet), read as a stream."""
    return Corpus(path)


def document_from_record(record: Mapping, where: str) -> Document | None:
    """A `Document` from one JSON-lines record or Parquet row (None: nothing to embed); every problem a `ValueError`
    that starts with `where`.

    >>> document_from_record({"_id": "d1", "title": "Lease", "text": "Rent is due."}, "corpus.jsonl:1").title
    'Lease'
    >>> document_from_record({"id": "d2", "sentences": ["Rent.", "Due."]}, "documents.jsonl:2").chunks
    ['Rent.', 'Due.']
    >>> document_from_record({"id": "d3", "text": "rent", "chunks": ["rent"]}, "x.jsonl:3")
    Traceback (most recent call last):
    ...
    ValueError: x.jsonl:3: a document has `text` or its chunks (`chunks`/`sentences`), not both
    """
    if not isinstance(record, Mapping):
        raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
    named = [name for name in ID_FIELDS if record.get(name) is not None]
    if not named:
        raise ValueError(f"{where}: missing the document's id (field 'id', or '_id')")
    document_id = record[named[0]]
    if isinstance(document_id, bool) or not isinstance(document_id, (str, int)) or document_id == "":
        raise ValueError(f"{where}: '{named[0]}' must be a non-empty string (or an integer), got {document_id!r}")
    document_id = str(document_id)
    given = [name for name in ("text", *CHUNK_FIELDS) if record.get(name) is not None]
    if len(given) != 1:
        raise ValueError(f"{where}: a document has `text` or its chunks (`chunks`/`sentences`), "
                         + ("not both" if given else "and this one has neither"))
    title = record.get("title")
    if title is not None and not isinstance(title, str):
        raise ValueError(f"{where}: 'title' must be a string, got {type(title).__name__}")
    metadata = _checked_metadata(record.get("metadata"), where)
    title = title or None  # BEIR gives documents without a title an empty one
    if given[0] == "text":
        text = record["text"]
        if not isinstance(text, str):
            raise ValueError(f"{where}: 'text' must be a string, got {type(text).__name__}")
        return Document(document_id, text, title=title, metadata=metadata) if text.strip() else None
    chunks = record[given[0]]
    if isinstance(chunks, np.ndarray):  # a Parquet list column
        chunks = chunks.tolist()
    if not isinstance(chunks, list) or not all(isinstance(c, str) for c in chunks):
        raise ValueError(f"{where}: '{given[0]}' must be a list of strings")
    for i, chunk in enumerate(chunks):
        if not chunk.strip():
            raise ValueError(f"{where}: {given[0]}[{i}] is empty: a chunk needs text to embed")
    return Document(document_id, chunks=chunks, title=title, metadata=metadata) if chunks else None


def _checked_metadata(metadata, where: str) -> dict:
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise ValueError(f"{where}: 'metadata' must be an object, got {type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise ValueError(f"{where}: metadata keys are identifiers (letters, digits, _), got {key!r}")
        if isinstance(value, float) and not math.isfinite(value) or not isinstance(value, (str, int, float, bool)):
            raise ValueError(f"{where}: metadata values are strings, numbers or booleans, got {key}={value!r}")
    return dict(metadata)


def _layout(path: Path) -> tuple[str, list[Path]]:
    """("text" | "jsonl" | "parquet", the files to read in order) for a corpus path."""
    name = path.name.lower()
    if path.is_file():
        if name.endswith(JSONL_SUFFIXES):
            return "jsonl", [path]
        if name.endswith(".parquet"):
            return "parquet", [path]
        if path.suffix.lower() in SUFFIXES:
            return "text", [path]
        if name.endswith(".json"):
            raise ValueError(f"{str(path)!r} is a JSON file: a corpus is JSON lines, one document a line (.jsonl)")
        raise ValueError(f"{str(path)!r} is not a corpus file: pass a .txt/.md file or a folder of them, a JSON-lines "
                         "file (.jsonl) or Parquet (.parquet)")
    found = sorted(p for p in path.rglob("*") if p.is_file() and not _hidden(p.relative_to(path)))
    texts = [p for p in found if p.suffix.lower() in SUFFIXES]
    parquet = [p for p in found if p.name.lower().endswith(".parquet")]
    if texts:
        skipped = [p for p in found if p.suffix.lower() not in SUFFIXES]
        if skipped:
            kinds = sorted({p.suffix.lower() or "(no suffix)" for p in skipped})
            logger.warning("skipped %d file(s) that are not %s (%s; e.g. %s): contextembed reads plain text, so "
                           "convert other formats (such as PDF) to .txt first", len(skipped), "/".join(SUFFIXES),
                           ", ".join(kinds), skipped[0].relative_to(path))
        return "text", texts
    if parquet:
        return "parquet", parquet
    lines = [p.relative_to(path).as_posix() for p in found if p.name.lower().endswith(JSONL_SUFFIXES)]
    if lines:
        raise ValueError(f"{str(path)!r} holds JSON-lines files ({', '.join(lines[:3])}): pass the corpus file "
                         f"itself, e.g. {str(path / lines[0])!r}")
    raise ValueError(f"no {'/'.join(SUFFIXES)} files (nor Parquet) under {str(path)!r}: the corpus is empty")


def _jsonl_records(file: Path) -> Iterator[tuple[str, object]]:
    for number, record in read_records(file):
        yield f"{file}:{number}", record


def _parquet_records(file: Path) -> Iterator[tuple[str, dict]]:
    try:
        import pyarrow.parquet as pq
    except ImportError as error:
        raise ImportError(f"reading {file.name} needs pyarrow: pip install pyarrow") from error
    parquet = pq.ParquetFile(file)
    wanted = [c for c in (*ID_FIELDS, "text", *CHUNK_FIELDS, "title", "metadata") if c in parquet.schema_arrow.names]
    row = 0
    for batch in parquet.iter_batches(batch_size=1024, columns=wanted):
        for record in batch.to_pylist():
            row += 1
            yield f"{file} row {row}", record


def _hidden(relative: Path) -> bool:
    # Dot folders and files (.git, .DS_Store) are not documents someone forgot to convert: not worth a warning.
    return any(part.startswith(".") for part in relative.parts)


def encode_once(model, documents: Sequence[Sequence[str]], titles: Sequence[str | None] | None = None,
                **options) -> np.ndarray:
    """Every document's chunk vectors, concatenated (one row per chunk), each distinct document (and title) encoded
    once: word-for-word copies get the same vectors, bit for bit, so only the tie rule orders them.

    >>> class Counting:
    ...     def encode_documents(self, documents, **options):
    ...         print(len(documents), "encoded")
    ...         return [np.full((len(d), 1), float(len(d[0]))) for d in documents]
    >>> encode_once(Counting(), [["ab"], ["c"], ["ab"]]).ravel().tolist()
    2 encoded
    [2.0, 1.0, 2.0]
    """
    keys = [(None if titles is None else titles[i], tuple(document)) for i, document in enumerate(documents)]
    first: dict = {}
    which = [first.setdefault(key, len(first)) for key in keys]  # each document's distinct one
    distinct = list(first)
    titled = {} if titles is None else {"titles": [title for title, _ in distinct]}
    vectors = model.encode_documents([list(chunks) for _, chunks in distinct], **options, **titled)
    return np.concatenate([vectors[i] for i in which])
