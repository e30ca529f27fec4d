"""The store interface: chunk vectors of whole documents kept in a database, changed and searched as documents.

A store holds documents; a document is its chunks (text and character offsets), one vector per chunk, a content
hash and metadata. Writes take whole documents: `add_documents` refuses an id the store already has, `replace`
swaps every chunk of a document for its new ones as one unit (no reader ever sees old and new chunks of one
document together, and a writer that dies half way leaves the document as it was before or after), `delete`
removes documents. `search_documents` ranks documents by their best chunk (MaxSim) and returns that chunk.

A store also keeps what its vectors are (`StoreInfo`: model, dimension, precision, chunker), written when it is
created and checked on every write and query, so vectors of another width or precision are refused with a message
that names both. Each database is one subclass in its own module (`qdrant`, `lancedb`, `postgres`); a fourth is one
more file.
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from contextembed.chunking import Chunk
from contextembed.modeling import check_count
from contextembed.ranking import ChunkHit, DocumentHit, rank_documents, read_ranked
from contextembed.scoring import check_codes

Scalar = str | int | float | bool
Where = Mapping[str, Scalar | Sequence[Scalar]]  # metadata key -> a value, or a list of values any of which match


@dataclass(frozen=True)
class StoreInfo:
    """What a store's vectors are; fixed when the store is created."""

    model: str
    dim: int  # the width of the stored vectors (their dimensions, before any packing into bits)
    precision: str = "float32"
    chunker: str = ""

    @classmethod
    def from_dict(cls, values: Mapping) -> StoreInfo:
        """The info a store saved; stores of earlier releases named the width `output_dim`.

        >>> StoreInfo.from_dict({"model": "m", "output_dim": 384, "chunker": "TokenWindows(size=64, overlap=8)"})
        StoreInfo(model='m', dim=384, precision='float32', chunker='TokenChunks(size=64, overlap=8)')
        """
        values = {"dim": values.get("output_dim"), **{k: values[k] for k in ("model", "dim", "precision", "chunker")
                                                      if k in values}}
        if values.get("chunker"):  # stores written before the token chunker's rename name it by its former name
            values["chunker"] = values["chunker"].replace("TokenWindows(", "TokenChunks(", 1)
        return cls(**values)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class DocumentVectors:
    """One document as a store keeps it: every chunk with its vector, written and replaced together."""

    id: str
    chunks: list[Chunk]
    vectors: np.ndarray  # (len(chunks), D) floats, or codes of the store's precision
    metadata: dict = field(default_factory=dict)
    content_hash: str = ""


STORE_PRECISIONS = ("float32", "int8")


class VectorStore(ABC):
    """A database of documents' chunk vectors (see the module docstring). Subclasses implement the `_` methods.

    Every ranking follows the tie rule of `contextembed.ranking` (score, then document id, then chunk index): a
    database returns its top k in any order among equal scores and may cut a run of equal scores anywhere, so its
    hits are read past the cut until the run at it is complete, and sorted there (`read_ranked`, `rank_documents`).
    """

    uri: str
    precisions: tuple[str, ...] = STORE_PRECISIONS  # the precisions this kind of store keeps
    noun = "store"  # what messages call it
    batch_documents: int | None = 64  # documents per write when keeping it in step with a corpus (None: all)

    # --- what a subclass provides -------------------------------------------------------------------------
    @abstractmethod
    def _read_info(self) -> StoreInfo | None:
        """The stored info, or None for a store that does not exist yet."""

    @abstractmethod
    def _create(self, info: StoreInfo) -> None:
        """Create the empty store for vectors described by `info`."""

    @abstractmethod
    def _write(self, documents: list[DocumentVectors], replace: bool) -> None:
        """Write the documents; with `replace`, their previous chunks go in the same unit of work."""

    @abstractmethod
    def _delete(self, ids: list[str]) -> None:
        """Remove every chunk of these documents."""

    @abstractmethod
    def _top_chunks(self, query: np.ndarray, k: int, where: Where | None) -> list[ChunkHit]:
        """The k best chunks for one query by the database's scores (any order, any of equal ones at the cut)."""

    @abstractmethod
    def fetch_documents(self, ids: Sequence[str]) -> list[DocumentVectors]:
        """The documents with these ids, every chunk with its vector, in the order asked (ids the store does not
        hold are left out). Found by id, never by scanning the vectors: what evidence for a result costs."""

    @abstractmethod
    def document_hashes(self, ids: Sequence[str] | None = None) -> dict[str, str]:
        """Every stored document's id and content hash (with `ids`: of those of them the store holds)."""

    @abstractmethod
    def count_chunks(self, document: str | None = None) -> int:
        """Chunks stored (of one document, or in all)."""

    def count_documents(self) -> int:
        """Documents stored."""
        return len(self.document_hashes())

    def close(self) -> None:
        """Release connections and locks; a closed store is not used again."""

    # --- the interface ------------------------------------------------------------------------------------
    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _known_info(self) -> StoreInfo | None:
        """The info, read once (it never changes after the store is created); None while the store does not exist."""
        if getattr(self, "_info", None) is None:
            self._info = self._read_info()
        return self._info

    @property
    def info(self) -> StoreInfo:
        """What the store's vectors are."""
        cached = self._known_info()
        if cached is None:
            raise ValueError(f"the {self.noun} {self.uri} holds no vectors yet: write documents to it first "
                             "(contextembed encode CORPUS URI)")
        return cached

    def ensure(self, info: StoreInfo) -> StoreInfo:
        """Create the store for `info` if it does not exist, else check that it holds vectors of the same kind."""
        if info.precision not in self.precisions:
            raise ValueError(f"{type(self).__name__} stores keep {' or '.join(self.precisions)} vectors, got "
                             f"precision {info.precision!r}")
        current = self._read_info()
        if current is None:
            self._create(info)
            self._info = info
            return info
        for name in ("dim", "precision", "model", "chunker"):
            have, want = getattr(current, name), getattr(info, name)
            if have != want and (name != "chunker" or want):
                raise ValueError(f"the {self.noun} {self.uri} holds {name}={have!r} vectors, these are "
                                 f"{name}={want!r}: "
                                 "write them to another store (or delete this one)")
        return current

    def add_documents(self, documents: Iterable[DocumentVectors], *, known_new: bool = False) -> int:
        """Write new documents (an id the store already has is an error: use `replace`); returns chunks written.
        `known_new`: the caller has read the store's ids and none of these is among them (a sync), so the store is
        not asked again, and a database writes them without matching them against what it holds."""
        documents = self._checked(documents)
        existing = set() if known_new else set(self.document_hashes([d.id for d in documents]))
        if existing:
            raise ValueError(f"the store already holds {len(existing)} of these documents (e.g. "
                             f"{sorted(existing)[0]!r}): use replace() to change them")
        self._write(documents, replace=False)
        return sum(len(d.chunks) for d in documents)

    def replace(self, documents: Iterable[DocumentVectors]) -> int:
        """Write documents, each replacing every chunk it had before (or added, if new); returns chunks written."""
        documents = self._checked(documents)
        self._write(documents, replace=True)
        return sum(len(d.chunks) for d in documents)

    def delete(self, ids: Iterable[str]) -> None:
        ids = list(ids)
        for i in ids:
            _check_id(i)
        if ids:
            self._delete(ids)

    def search_chunks(self, query: np.ndarray, k: int = 10, where: Where | None = None) -> list[ChunkHit]:
        """The k best chunks of the whole store for one query vector (of the store's precision)."""
        check_count(k, "k")
        query, where = self._checked_query(query), _checked_where(where)
        return read_ranked(lambda n: self._top_chunks(query, n, where), k)[0][:k]

    def search_documents(self, query: np.ndarray, k: int = 10, where: Where | None = None) -> list[DocumentHit]:
        """The k best documents, each scored by its best chunk (MaxSim), with that chunk: exact whenever chunk
        search is (`contextembed.ranking.rank_documents`)."""
        check_count(k, "k")
        query, where = self._checked_query(query), _checked_where(where)
        return rank_documents(lambda n: self._top_chunks(query, n, where), k)

    # --- checks shared by every store ----------------------------------------------------------------------
    def _checked(self, documents: Iterable[DocumentVectors]) -> list[DocumentVectors]:
        info = self.info
        documents = list(documents)
        ids = [d.id for d in documents]
        if len(set(ids)) != len(ids):
            raise ValueError(f"document ids repeat in one write (e.g. {next(i for i in ids if ids.count(i) > 1)!r})")
        for document in documents:
            _check_id(document.id)
            vectors = np.asarray(document.vectors)
            if vectors.ndim != 2 or len(vectors) != len(document.chunks):
                raise ValueError(f"document {document.id!r} has {len(document.chunks)} chunks but vectors of shape "
                                 f"{vectors.shape}: one vector per chunk")
            if not document.chunks:
                raise ValueError(f"document {document.id!r} has no chunks")
            _check_vectors(vectors, info, f"the vectors of document {document.id!r}")
            _check_metadata(document.metadata, document.id)
        return documents

    def _checked_query(self, query: np.ndarray) -> np.ndarray:
        query = np.asarray(query)
        if query.ndim == 2 and len(query) == 1:
            query = query[0]
        if query.ndim != 1:
            raise ValueError(f"search takes one query vector, got shape {query.shape}")
        _check_vectors(query[None], self.info, "the query")
        return query


def assemble_documents(rows, ids: Sequence[str]) -> list[DocumentVectors]:
    """Documents from chunk rows `(doc_id, chunk, start, end, text, content_hash, metadata, vector)` in any order,
    each one's chunks in order, the documents in the order of `ids` (those with no rows left out).

    >>> rows = [("b", 0, 0, 2, "hi", "h", {}, [1.0]), ("a", 1, 4, 6, "yo", "g", {}, [3.0]),
    ...         ("a", 0, 0, 3, "hey", "g", {}, [2.0])]
    >>> found = assemble_documents(rows, ["a", "c", "b"])
    >>> [(d.id, [c.text for c in d.chunks], d.vectors.ravel().tolist()) for d in found]
    [('a', ['hey', 'yo'], [2.0, 3.0]), ('b', ['hi'], [1.0])]
    """
    by_id: dict[str, list] = {}
    for row in rows:
        by_id.setdefault(row[0], []).append(row)
    documents = []
    for document in ids:
        if document not in by_id:
            continue
        chunks = sorted(by_id[document], key=lambda row: row[1])
        if [row[1] for row in chunks] != list(range(len(chunks))):
            raise ValueError(f"the chunks of document {document!r} are not numbered 0..{len(chunks) - 1}: the store "
                             "holds a damaged document")
        _, _, _, _, _, digest, metadata, _ = chunks[0]
        documents.append(DocumentVectors(document, [Chunk(text, start, end) for _, _, start, end, text, *_ in chunks],
                                         np.stack([np.asarray(row[7]) for row in chunks]), dict(metadata), digest))
    return documents


def content_hash(text: str) -> str:
    """The hash incremental encoding compares: the document's text, exactly.

    >>> content_hash("rent") == content_hash("rent"), content_hash("rent") == content_hash("rent ")
    (True, False)
    """
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def metadata_tags(metadata: Mapping[str, Scalar]) -> list[str]:
    """Metadata as `key=value` strings (values in JSON), the form stores without typed columns filter on.

    >>> metadata_tags({"lang": "en", "year": 2024})
    ['lang="en"', 'year=2024']
    """
    return [_tag(key, value) for key, value in sorted(metadata.items())]


def where_tags(where: Where) -> list[list[str]]:
    """A filter as tag alternatives: every inner list must have a match (AND of ORs).

    >>> where_tags({"lang": ["en", "de"], "year": 2024})
    [['lang="en"', 'lang="de"'], ['year=2024']]
    """
    groups = []
    for key, value in where.items():
        values = value if isinstance(value, (list, tuple)) else [value]
        groups.append([_tag(key, v) for v in values])
    return groups


def _tag(key: str, value: Scalar) -> str:
    return f"{key}={json.dumps(value, ensure_ascii=False)}"


def _check_id(document_id) -> None:
    if not isinstance(document_id, str) or not document_id:
        raise ValueError(f"a document id must be a non-empty string, got {document_id!r}")


def _check_vectors(vectors: np.ndarray, info: StoreInfo, name: str) -> None:
    packed = info.precision in ("binary", "ubinary")  # 8 dimensions a byte
    if vectors.shape[-1] * (8 if packed else 1) != info.dim:
        raise ValueError(f"{name} have {vectors.shape[-1] * (8 if packed else 1)} dimensions, but the store holds "
                         f"{info.dim}-d vectors")
    check_codes(vectors, info.precision, name)
    if info.precision == "float32" and not np.isfinite(vectors).all():
        raise ValueError(f"{name} hold NaN or infinite values")


def _check_metadata(metadata, document_id: str) -> None:
    if not isinstance(metadata, Mapping):
        raise ValueError(f"the metadata of document {document_id!r} must be a mapping, got {type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise ValueError(f"metadata keys are identifiers (letters, digits, _), got {key!r} in {document_id!r}")
        if not isinstance(value, (str, int, float, bool)) or (isinstance(value, float) and not math.isfinite(value)):
            raise ValueError(f"metadata values are strings, numbers or booleans, got {key}={value!r} in "
                             f"{document_id!r}")


def _checked_where(where) -> Where | None:
    if where is None:
        return None
    if not isinstance(where, Mapping):
        raise ValueError(f"where must map metadata keys to a value or a list of values, got {type(where).__name__}")
    for key, value in where.items():
        values = value if isinstance(value, (list, tuple)) else [value]
        if not isinstance(key, str) or not key.isidentifier():
            raise ValueError(f"where keys are metadata keys (identifiers), got {key!r}")
        if not values or any(not isinstance(v, (str, int, float, bool)) for v in values):
            raise ValueError(f"where[{key!r}] must be a string, number or boolean, or a non-empty list of them, "
                             f"got {value!r}")
    return where
