"""A converted pplx-embed-v2-context checkpoint served under its own name: the official Perplexity client gets the
published int8 codes (round(tanh(x) * 127)), the OpenAI and Voyage clients the float vectors (normalize(tanh(x))),
from a real server on 127.0.0.1 started by `contextembed serve`."""

from __future__ import annotations

import base64

import numpy as np
import pytest

import contextembed
from contextembed.pplx_v2 import convert_pplx_v2
from tests.pplx_v2_layout import Reference, int8, make_source, unit
from tests.serve.test_server import start, stop

NAME = "pplx-embed-v2-context-0.6b"
DOCUMENTS = [["The lease of 14 Harbor Street is signed.", "She pays the rent on the first day."],
             ["One chunk only."], ["Café naïve résumé.", "a literal <|chunk_sep|> inside a chunk", "the deposit"]]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("pplx-v2-serve")
    marker = root / "the-remote-code-ran"
    source = make_source(root / "source", marker=marker)
    convert_pplx_v2(source, root / "converted")
    return source, root / "converted", marker


@pytest.fixture(scope="module")
def server(folders):
    _, converted, marker = folders
    process, url = start(converted, "--served-model-name", NAME)
    yield url
    stop(process)
    assert not marker.exists()


@pytest.fixture(scope="module")
def reference(folders):
    return Reference(folders[0])


def decode(document) -> np.ndarray:
    return np.stack([np.frombuffer(base64.b64decode(chunk.embedding), dtype=np.int8) for chunk in document.data])


def test_perplexity_client_gets_the_published_int8_codes(server, reference, folders):
    """perplexityai 0.46 accepts only the v1 context names in `model` (it validates them before sending), so the
    v2 name goes in the body through the client's own `extra_body`, which overrides the field it sends."""
    perplexity = pytest.importorskip("perplexity")
    client = perplexity.Perplexity(api_key="unused", base_url=server, max_retries=0)
    as_v2 = {"model": "pplx-embed-context-v1-0.6b", "extra_body": {"model": NAME}}
    result = client.contextualized_embeddings.create(input=DOCUMENTS, **as_v2)  # base64_int8 by default
    assert result.model == NAME
    assert [d.index for d in result.data] == [0, 1, 2]
    local = contextembed.load(folders[1]).encode_documents(DOCUMENTS, precision="int8")
    off_by_one = 0
    for document, got, mine in zip(DOCUMENTS, result.data, local):
        codes = decode(got)
        expected = int8(reference.document(document)[0]).numpy()
        assert codes.shape == (len(document), 16)
        assert np.abs(codes.astype(int) - expected).max() <= 1 and np.abs(codes.astype(int) - mine).max() <= 1
        off_by_one += int((codes != expected).sum())
    assert off_by_one <= 2, off_by_one  # float noise crossing a rounding boundary, counted
    half = client.contextualized_embeddings.create(input=DOCUMENTS[:1], dimensions=8, **as_v2)
    np.testing.assert_array_equal(decode(half.data[0]), decode(result.data[0])[:, :8])  # the first codes of tanh(x)


def test_openai_and_voyage_clients_get_the_float_vectors(server, reference):
    openai = pytest.importorskip("openai")
    voyageai = pytest.importorskip("voyageai")
    client = openai.OpenAI(base_url=server + "/v1", api_key="unused", max_retries=0)
    queries = client.embeddings.create(model=NAME, input=["who pays the rent?", "Café"])  # queries by default
    for got, text in zip(queries.data, ["who pays the rent?", "Café"]):
        np.testing.assert_allclose(got.embedding, unit(reference.query(text)).numpy(), atol=1e-4, rtol=0)
    voyage = voyageai.Client(api_key="unused", base_url=server + "/v1", max_retries=0)
    result = voyage.contextualized_embed(inputs=DOCUMENTS, model=NAME, input_type="document")
    for got, document in zip(result.results, DOCUMENTS):
        np.testing.assert_allclose(np.array(got.embeddings), unit(reference.document(document)[0]).numpy(),
                                   atol=1e-4, rtol=0)
