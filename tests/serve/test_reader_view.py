"""The reader view of vectors the server returns: `/v1/contextualizedembeddings` for a document's chunks and
`/v1/embeddings` for the query, then `document_evidence` and `reader_view` (docs/search.md), equal to what the Python
API's search gives for the same document."""

from __future__ import annotations

import httpx
import numpy as np

import contextembed
from contextembed.search import document_evidence, reader_view, search
from contextembed.stores import DocumentVectors, StoreInfo
from contextembed.stores.index import IndexStore
from tests.serve.test_server import start, stop

CHUNKS = ["Lease for the apartment at 88 Ocean Drive.", "Rent is due on the first day of each month.",
          "Pets are not allowed.", "The Tenant pays for electricity and internet.", "The lease ends in May."]
QUERY = "Who pays for electricity?"


def test_the_reader_view_of_the_server_s_vectors_is_the_search_s(built):
    path = built["bert"][0]
    process, url = start(path)
    try:
        document = httpx.post(f"{url}/v1/contextualizedembeddings", json={
            "model": "tiny", "inputs": [CHUNKS], "input_type": "document", "output_dtype": "float"}, timeout=60).json()
        query = httpx.post(f"{url}/v1/embeddings", json={"model": "tiny", "input": QUERY}, timeout=60).json()
    finally:
        stop(process)
    vectors = np.array([chunk["embedding"] for chunk in document["data"][0]["data"]], dtype=np.float32)
    query_vector = np.array(query["data"][0]["embedding"], dtype=np.float32)
    over_http = document_evidence("lease", CHUNKS, vectors @ query_vector, evidence=2)

    model = contextembed.load(str(path))
    store = IndexStore()
    store.ensure(StoreInfo("test", model.dim))
    encoded = model.encode_documents([" ".join(CHUNKS)], chunker=lambda text: _spans(CHUNKS))[0]
    store.replace([DocumentVectors("lease", list(encoded.chunks), encoded.embeddings)])
    (in_python,) = search(store, model.encode_queries([QUERY])[0], k=1, evidence=2)
    assert reader_view(over_http) == reader_view(in_python)
    assert [(c.index, c.start, c.end, c.text) for c in (over_http.chunk, *over_http.evidence)] == [
        (c.index, c.start, c.end, c.text) for c in (in_python.chunk, *in_python.evidence)]
    np.testing.assert_allclose([c.score for c in (over_http.chunk, *over_http.evidence)],
                               [c.score for c in (in_python.chunk, *in_python.evidence)], atol=1e-5)


def _spans(chunks: list[str]) -> list[tuple[int, int]]:
    """The chunks' places in their text joined by one space (where `document_evidence` places strings)."""
    spans, start = [], 0
    for chunk in chunks:
        spans.append((start, start + len(chunk)))
        start += len(chunk) + 1
    return spans
