"""Stores under test: contextembed's own folder index, LanceDB and Qdrant (local mode) on temporary folders, and a
real PostgreSQL with pgvector (`pgserver`, one server for the session, a fresh table per test). Vectors: the shipped
recipes set encoded once by the packaged default model (late chunking, float32 and int8 codes)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import numpy as np
import pytest

STORE_KINDS = ("index", "lancedb", "qdrant", "pgserver")


@pytest.fixture(scope="session")
def pg_folder(tmp_path_factory):
    pytest.importorskip("pgserver")
    return tmp_path_factory.mktemp("postgres")


def store_uri(kind: str, tmp_path, pg_folder, **options) -> str:
    name = f"t{uuid.uuid4().hex[:10]}"
    query = "&".join(f"{k}={v}" for k, v in options.items())
    if kind == "index":
        return f"file://{tmp_path / 'index' / name}"
    if kind == "lancedb":
        return f"lancedb://{tmp_path / 'lance'}?table={name}" + (f"&{query}" if query else "")
    if kind == "qdrant":
        return f"qdrant://{tmp_path / 'qdrant'}?collection={name}" + (f"&{query}" if query else "")
    return f"pgserver://{pg_folder}?table={name}" + (f"&{query}" if query else "")


@pytest.fixture(params=STORE_KINDS)
def kind(request):
    pytest.importorskip({"index": "numpy", "lancedb": "lancedb", "qdrant": "qdrant_client",
                         "pgserver": "psycopg"}[request.param])
    return request.param


@dataclass
class Encoded:
    ids: list[str]
    chunks: list[list]  # Chunk per sentence
    vectors: list[np.ndarray]  # float32, one (n, 384) array per document
    codes: list[np.ndarray]  # int8 codes of the same
    queries: np.ndarray  # float32 (Q, 384)
    query_codes: np.ndarray  # int8 (Q, 384)


@pytest.fixture(scope="session")
def recipes(default_encoder) -> Encoded:
    from contextembed.chunking import Chunk
    from contextembed.evaluation.datasets import shipped_dataset
    from contextembed.evaluation.loaders import load_context_bench

    documents, queries = load_context_bench(shipped_dataset("recipes"))
    chunks = []
    for document in documents:
        offsets, start = [], 0
        for sentence in document.sentences:
            offsets.append(Chunk(sentence, start, start + len(sentence)))
            start += len(sentence) + 1
        chunks.append(offsets)
    sentences = [d.sentences for d in documents]
    vectors = default_encoder.encode_documents(sentences, show_progress_bar=False)
    codes = default_encoder.encode_documents(sentences, precision="int8", show_progress_bar=False)
    texts = [q.query for q in queries]
    return Encoded([d.id for d in documents], chunks, vectors, codes,
                   default_encoder.encode_queries(texts, show_progress_bar=False),
                   default_encoder.encode_queries(texts, precision="int8", show_progress_bar=False))
