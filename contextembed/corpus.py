"""A corpus on disk: `.txt`/`.md` documents read from a file or a folder, embedded chunk by chunk."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

SUFFIXES = (".txt", ".md")


@dataclass
class Document:
    path: str  # relative to the corpus root
    text: str


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
        found = sorted(p for p in path.rglob("*") if p.is_file())
        files = [p for p in found if p.suffix.lower() in SUFFIXES]
        skipped = [p for p in found if p.suffix.lower() not in SUFFIXES and not _hidden(p.relative_to(path))]
        if skipped:
            kinds = sorted({p.suffix.lower() or "(no suffix)" for p in skipped})
            logger.warning("skipped %d file(s) that are not %s (%s; e.g. %s): contextembed reads plain text, so "
                           "convert other formats (such as PDF) to .txt first", len(skipped), "/".join(SUFFIXES),
                           ", ".join(kinds), skipped[0].relative_to(path))
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


def _hidden(relative: Path) -> bool:
    # Dot folders and files (.git, .DS_Store) are not documents someone forgot to convert: not worth a warning.
    return any(part.startswith(".") for part in relative.parts)


def embed_corpus(model, documents: list[Document], chunker, **options):
    """Chunk and embed each document with its whole text in view.

    Returns the chunk vectors (one row per chunk, documents in order) and one record per row: `doc`, `path`,
    `chunk`, `start`, `end`, `text` (the schema of an index's `chunks.jsonl`).
    """
    import numpy as np

    results = model.encode_documents([d.text for d in documents], chunker=chunker, **options)
    records = [{"doc": i, "path": d.path, "chunk": j, "start": c.start, "end": c.end, "text": c.text}
               for i, (d, r) in enumerate(zip(documents, results)) for j, c in enumerate(r.chunks)]
    return np.concatenate([r.embeddings for r in results]), records
