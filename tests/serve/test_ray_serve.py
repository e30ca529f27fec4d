"""`contextembed serve --replicas 2`: the same application as two Ray Serve replicas (two processes) behind one port,
answering the same clients with the Python API's vectors."""

from __future__ import annotations

import concurrent.futures

import httpx
import numpy as np
import pytest

from tests.serve.test_server import DOCUMENTS, start, stop

pytest.importorskip("ray.serve")
pytestmark = pytest.mark.slow  # starts a Ray cluster and two model replicas: one to two minutes


@pytest.fixture(scope="module")
def replicated(built):
    process, url = start(built["bert"][0], "--replicas", "2", "--cpus-per-replica", "0.5", timeout=240)
    yield url
    stop(process)


def test_two_replicas_answer_the_same_clients(replicated, built):
    import contextembed
    import openai

    reference = contextembed.load(built["bert"][0])
    documents = [[f"chunk {i} of document {k}" for i in range(1 + k % 4)] for k in range(24)] + DOCUMENTS
    serial = [reference.encode_documents([d])[0] for d in documents]

    def call(k):
        with httpx.Client(timeout=120) as client:
            answer = client.post(replicated + "/v1/contextualizedembeddings",
                                 json={"inputs": [documents[k]], "model": "tiny"})
            process = client.get(replicated + "/health").json()["process"]
        return answer, process

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(call, range(len(documents))))
    for k, (answer, _) in enumerate(answers):
        assert answer.status_code == 200, answer.text
        np.testing.assert_allclose([c["embedding"] for c in answer.json()["data"][0]["data"]], serial[k], atol=1e-6)
    processes = {p for _, p in answers} | {httpx.get(replicated + "/health").json()["process"] for _ in range(40)}
    assert len(processes) == 2  # both replicas answered

    client = openai.OpenAI(base_url=replicated + "/v1", api_key="unused", max_retries=0)
    result = client.embeddings.create(model="tiny", input=["rent due", "she pays"], encoding_format="float")
    np.testing.assert_allclose([d.embedding for d in result.data], reference.encode_queries(["rent due", "she pays"]),
                               atol=1e-6)
    bad = httpx.post(replicated + "/v1/embeddings", json={"input": "", "model": "tiny"})
    assert bad.status_code == 400 and "input[0] is empty" in bad.json()["error"]["message"]
