"""A corpus on disk: `.txt`/`.md` documents read from a file or a folder; and documents embedded with each distinct
one encoded once."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from collections.abc import Sequence
from pathlib import Path

import numpy as np

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
