"""A corpus on disk: reading `.txt`/`.md` documents, and an encoded index that search can reuse.

Index layout (a folder written by `contextembed encode`):

- `embeddings.npy`: one row per chunk, float32 or int8 (`numpy.load` reads it);
- `chunks.jsonl`: one JSON object per row, in the same order: `doc` (document index), `path`
  (relative to the corpus root), `chunk` (index within the document), `start`, `end` (character
  offsets into the document's text) and `text`;
- `index.json`: `format_version`, `model`, `dim`, `precision`, `int8_clip_sigmas`, `chunker`,
  `num_documents`, `num_chunks`, `root` and the document paths.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

SUFFIXES = (".txt", ".md")
INDEX_FORMAT_VERSION = 1


@dataclass
class Document:
    path: str  # relative to the corpus root
    text: str


@dataclass
class Index:
    embeddings: np.ndarray  # (N, D)
    chunks: list[dict]
    meta: dict

    def document_slices(self) -> list[slice]:
        """Row range of each document in `embeddings`."""
        bounds = [0]
        for i in range(1, len(self.chunks)):
            if self.chunks[i]["doc"] != self.chunks[i - 1]["doc"]:
                bounds.append(i)
        bounds.append(len(self.chunks))
        return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]


def read_corpus(path: str | Path) -> tuple[Path, list[Document]]:
    """Read one text file, or every `.txt`/`.md` file under a folder (sorted by path).

    Returns the corpus root and its documents. Empty files are skipped with a warning.
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"corpus path {str(path)!r} does not exist")
    if path.is_file():
        root, files = path.parent, [path]
    else:
        root = path
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
        if not files:
            raise ValueError(f"no {'/'.join(SUFFIXES)} files under {str(path)!r}: the corpus is empty")
    documents = []
    for file in files:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"cannot read {str(file)!r} as UTF-8 text: {error}") from error
        if not text.strip():
            logger.warning("skipping empty file %s", file)
            continue
        documents.append(Document(str(file.relative_to(root)), text))
    if not documents:
        raise ValueError(f"every file under {str(path)!r} is empty: the corpus is empty")
    return root, documents


def write_index(output_dir: str | Path, embeddings: np.ndarray, chunks: list[dict], meta: dict) -> Path:
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    np.save(output_dir / "embeddings.npy", embeddings)
    with open(output_dir / "chunks.jsonl", "w", encoding="utf-8") as f:
        for chunk in chunks:
            f.write(json.dumps(chunk, ensure_ascii=False) + "\n")
    meta = {"format_version": INDEX_FORMAT_VERSION, **meta, "num_chunks": len(chunks)}
    (output_dir / "index.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return output_dir


def is_index(path: str | Path) -> bool:
    return (Path(path) / "index.json").is_file()


def read_index(path: str | Path) -> Index:
    path = Path(path)
    try:
        meta = json.loads((path / "index.json").read_text(encoding="utf-8"))
        embeddings = np.load(path / "embeddings.npy")
        with open(path / "chunks.jsonl", encoding="utf-8") as f:
            chunks = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot read the index in {str(path)!r}: {error}") from error
    if meta.get("format_version") != INDEX_FORMAT_VERSION:
        raise ValueError(f"index format_version must be {INDEX_FORMAT_VERSION}, got {meta.get('format_version')!r}")
    if len(chunks) != len(embeddings):
        raise ValueError(f"index {str(path)!r} has {len(embeddings)} vectors but {len(chunks)} chunk records")
    return Index(embeddings, chunks, meta)
