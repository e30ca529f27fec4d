"""`contextembed serve` as a real process on 127.0.0.1, called by the official OpenAI, Perplexity and Voyage clients
and by plain HTTP: the vectors are the Python API's, bad requests are named 4xx errors, overload is a 503."""

from __future__ import annotations

import base64
import concurrent.futures
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

import contextembed
from tests.modeling.test_windowing import long_document

PPLX = "pplx-embed-context-v1-0.6b"  # the Perplexity client only sends its own model names
DOCUMENTS = [["The rent is due on the first.", "She pays it late."], ["Ocean Drive 88."],
             long_document(40, seed=3)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(path, *extra, timeout: float = 120) -> tuple[subprocess.Popen, str]:
    """`contextembed serve` on `path` (served as `tiny` and as Perplexity's name) with `extra` options."""
    port = free_port()
    command = [str(Path(sys.executable).with_name("contextembed")), "serve", str(path), "--port", str(port),
               "--served-model-name", "tiny", "--served-model-name", PPLX, *extra]
    return launch(command, port, timeout)


def launch(command: list[str], port: int, timeout: float = 120, output=subprocess.PIPE) -> tuple[subprocess.Popen, str]:
    """Run a server `command` listening on 127.0.0.1:`port` until its /health answers 200; its stdout and stderr go
    to `output`."""
    process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited: {process.stdout.read() if process.stdout else ''}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("the server did not become healthy")


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(scope="module")
def checkpoint(built):
    return built["bert"][0]


@pytest.fixture(scope="module")
def reference(checkpoint):
    return contextembed.load(checkpoint)


@pytest.fixture(scope="module")
def server(checkpoint):
    process, url = start(checkpoint)
    yield url
    stop(process)


def test_openai_client_gets_the_query_vectors(server, reference):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server + "/v1", api_key="unused", max_retries=0)
    result = client.embeddings.create(model="tiny", input=["rent due", "she pays"])  # base64 by default
    got = np.array([d.embedding for d in result.data])
    np.testing.assert_allclose(got, reference.encode_queries(["rent due", "she pays"]), atol=1e-6, rtol=0)
    assert result.usage.total_tokens > 0 and [d.index for d in result.data] == [0, 1]
    cut = client.embeddings.create(model="tiny", input="rent", dimensions=8, encoding_format="float")
    np.testing.assert_allclose(cut.data[0].embedding, reference.encode_queries(["rent"], output_dim=8)[0], atol=1e-6)
    documents = client.embeddings.create(model="tiny", input=["rent due"], extra_body={"input_type": "document"})
    np.testing.assert_allclose(documents.data[0].embedding, reference.encode_documents([["rent due"]])[0][0],
                               atol=1e-6)


def test_langchain_openai_embeddings_as_a_framework_client(server, reference):
    langchain_openai = pytest.importorskip("langchain_openai")
    # check_embedding_ctx_length=False: no tiktoken (it would download its encodings); we count tokens ourselves
    embeddings = langchain_openai.OpenAIEmbeddings(model="tiny", base_url=server + "/v1", api_key="unused",
                                                   check_embedding_ctx_length=False, max_retries=0)
    np.testing.assert_allclose(embeddings.embed_query("rent due"), reference.encode_queries(["rent due"])[0],
                               atol=1e-6)
    np.testing.assert_allclose(embeddings.embed_documents(["rent due", "she pays"]),
                               reference.encode_queries(["rent due", "she pays"]), atol=1e-6)


def test_perplexity_client_gets_late_chunked_codes(server, reference):
    perplexity = pytest.importorskip("perplexity")
    client = perplexity.Perplexity(api_key="unused", base_url=server, max_retries=0)
    result = client.contextualized_embeddings.create(input=DOCUMENTS, model=PPLX)
    expected = reference.encode_documents(DOCUMENTS, precision="int8")
    assert [d.index for d in result.data] == [0, 1, 2]
    for document, codes in zip(result.data, expected):
        got = np.stack([np.frombuffer(base64.b64decode(c.embedding), dtype=np.int8) for c in document.data])
        np.testing.assert_array_equal(got, codes)  # one vector per chunk, in order, the package's own codes
    binary = client.contextualized_embeddings.create(input=DOCUMENTS[:1], model=PPLX, encoding_format="base64_binary",
                                                     dimensions=8)
    bits = np.unpackbits(reference.encode_documents(DOCUMENTS[:1], precision="ubinary", output_dim=8)[0], axis=1)
    for chunk, row in zip(binary.data[0].data, bits):
        assert base64.b64decode(chunk.embedding) == np.packbits(row, bitorder="little").tobytes()


def test_voyage_client_gets_every_dtype(server, reference):
    voyageai = pytest.importorskip("voyageai")
    client = voyageai.Client(api_key="unused", base_url=server + "/v1", max_retries=0)
    result = client.contextualized_embed(inputs=DOCUMENTS, model="tiny", input_type="document")
    for got, expected in zip(result.results, reference.encode_documents(DOCUMENTS)):
        np.testing.assert_allclose(np.array(got.embeddings), expected, atol=1e-6, rtol=0)
    assert result.total_tokens > 0
    for dtype in ("int8", "uint8", "binary", "ubinary"):
        coded = client.contextualized_embed(inputs=DOCUMENTS[:2], model="tiny", input_type="document",
                                            output_dtype=dtype)
        for got, expected in zip(coded.results, reference.encode_documents(DOCUMENTS[:2], precision=dtype)):
            np.testing.assert_array_equal(np.array(got.embeddings), expected)
    queries = client.contextualized_embed(inputs=[["rent due"], ["she pays"]], model="tiny", input_type="query")
    np.testing.assert_allclose([r.embeddings[0] for r in queries.results],
                               reference.encode_queries(["rent due", "she pays"]), atol=1e-6)


def test_sixteen_clients_at_once_get_the_serial_results(server, reference):
    documents = [[f"chunk {i} of document {k}" for i in range(1 + k % 5)] for k in range(16)]
    serial = [reference.encode_documents([d])[0] for d in documents]
    codes = [reference.encode_documents([d], precision="int8")[0] for d in documents]

    def call(k):
        with httpx.Client(timeout=60) as client:
            floats = client.post(server + "/v1/contextualizedembeddings",
                                 json={"inputs": [documents[k]], "model": "tiny"}).json()
            ints = client.post(server + "/v1/contextualizedembeddings",
                               json={"input": [documents[k]], "model": "tiny"}).json()
        return floats, ints

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(call, range(16)))
    off_by_one = 0
    for k, (floats, ints) in enumerate(answers):
        np.testing.assert_allclose([c["embedding"] for c in floats["data"][0]["data"]], serial[k], atol=1e-6)
        got = np.stack([np.frombuffer(base64.b64decode(c["embedding"]), np.int8) for c in ints["data"][0]["data"]])
        assert np.abs(got.astype(int) - codes[k]).max() <= 1  # merged with others: float noise may move a code by 1
        off_by_one += int((got != codes[k]).sum())
    print(f"codes off by one when merged: {off_by_one}")


BAD = [
    ("/v1/embeddings", "not json", 400, "not JSON"),
    ("/v1/embeddings", [], 400, "JSON object"),
    ("/v1/embeddings", {"input": "x"}, 400, "model is required"),
    ("/v1/embeddings", {"input": "x", "model": "gpt-4"}, 404, "not served here"),
    ("/v1/embeddings", {"model": "tiny"}, 400, "input is required"),
    ("/v1/embeddings", {"input": [], "model": "tiny"}, 400, "input must be a non-empty list"),
    ("/v1/embeddings", {"input": "", "model": "tiny"}, 400, "input[0] is empty"),
    ("/v1/embeddings", {"input": [[1, 2]], "model": "tiny"}, 400, "token arrays"),
    ("/v1/embeddings", {"input": [None], "model": "tiny"}, 400, "input[0] must be a string"),
    ("/v1/embeddings", {"input": "x", "model": "tiny", "dimensions": 5}, 400, "the dimension must be one of"),
    ("/v1/embeddings", {"input": "x", "model": "tiny", "dimensions": 0}, 400, "positive integer"),
    ("/v1/embeddings", {"input": "x", "model": "tiny", "dimensions": "8"}, 400, "positive integer"),
    ("/v1/embeddings", {"input": "x", "model": "tiny", "encoding_format": "hex"}, 400, "encoding_format must be"),
    ("/v1/embeddings", {"input": "x", "model": "tiny", "encoding_format": {}}, 400, "encoding_format must be"),
    ("/v1/contextualizedembeddings", {"encoding_format": {}, "inputs": [["0"]], "model": "tiny"}, 400,
     "encoding_format must be"),
    ("/v1/contextualizedembeddings", {"encoding_format": {}, "input": [["0"]], "model": "tiny"}, 400,
     "encoding_format must be"),  # the fuzzer's 500, once an unhashable dict inside the check
    ("/v1/embeddings", {"input": "x", "model": "tiny", "input_type": "poem"}, 400, "input_type must be"),
    ("/v1/embeddings", {"input": "x", "model": "tiny", "temperature": 1}, 400, "unknown field"),
    ("/v1/contextualizedembeddings", {"model": "tiny"}, 400, "input is required"),
    ("/v1/contextualizedembeddings", {"input": [["a"]], "inputs": [["a"]], "model": "tiny"}, 400, "not both"),
    ("/v1/contextualizedembeddings", {"input": "a", "model": "tiny"}, 400, "input must be a list, got str"),
    ("/v1/contextualizedembeddings", {"input": ["a"], "model": "tiny"}, 400, "input[0] must be a list, got str"),
    ("/v1/contextualizedembeddings", {"input": [[]], "model": "tiny"}, 400, "input[0] must be a non-empty list"),
    ("/v1/contextualizedembeddings", {"input": [["a", ""]], "model": "tiny"}, 400, "input[0][1] is empty"),
    ("/v1/contextualizedembeddings", {"input": [["a", 3]], "model": "tiny"}, 400, "input[0][1] must be a string"),
    # text the tokenizer drops entirely: the Python API's own error, found when the request is checked (it fails
    # alone, never a merged call of other clients' requests)
    ("/v1/contextualizedembeddings", {"input": [["a", "\x00\x01"]], "model": "tiny"}, 400,
     "document 0, chunk 1 is empty: it has no tokens"),
    ("/v1/embeddings", {"input": ["a", "\x00"], "model": "tiny"}, 400, "query 1 is empty: it has no tokens"),
    ("/v1/contextualizedembeddings", {"input": [["a"]], "model": "tiny", "encoding_format": "int4"}, 400,
     "encoding_format must be"),
    ("/v1/contextualizedembeddings", {"inputs": [["a"]], "model": "tiny", "output_dtype": "float16"}, 400,
     "output_dtype must be"),
    ("/v1/contextualizedembeddings", {"inputs": [["a"]], "model": "tiny", "input_type": "passage"}, 400,
     "input_type must be"),
    ("/v1/contextualizedembeddings", {"inputs": [["a"]], "model": "tiny", "output_dimension": 12}, 400,
     "the dimension must be one of"),
    ("/v1/contextualizedembeddings", {"inputs": [["a"]], "model": "tiny", "truncate": True}, 400, "unknown field"),
    ("/v1/contextualizedembeddings", {"input": [["a"]] * 600, "model": "tiny"}, 413, "limit of 512"),
    ("/v1/contextualizedembeddings", {"input": [["word " * 40000]], "model": "tiny"}, 413, "tokens, more than"),
]


@pytest.mark.parametrize(("route", "body", "status", "message"), BAD)
def test_bad_requests_are_named_errors(server, route, body, status, message):
    content = body if isinstance(body, str) else json.dumps(body)
    answer = httpx.post(server + route, content=content, headers={"content-type": "application/json"}, timeout=60)
    assert answer.status_code == status, answer.text
    if isinstance(body, dict) and "inputs" in body:  # Voyage's error shape: what its client reads
        assert message in answer.json()["detail"]
    else:
        error = answer.json()["error"]
        assert message in error["message"] and error["code"] == status
    assert "Traceback" not in answer.text


def test_models_health_and_metrics(server):
    assert [m["id"] for m in httpx.get(server + "/v1/models").json()["data"]] == ["tiny", PPLX]
    assert httpx.get(server + "/health").json()["status"] == "ok"
    httpx.post(server + "/v1/embeddings", json={"input": "rent", "model": "tiny"})
    metrics = httpx.get(server + "/metrics").text
    for name in ("contextembed_requests_total", "contextembed_request_seconds_bucket", "contextembed_queue_chunks",
                 "contextembed_batch_documents_bucket", "contextembed_tokens_total"):
        assert name in metrics
    assert "contextembed_workers 1.0" in metrics
    assert 'code="400"' in metrics or 'code="200"' in metrics


def test_api_keys(checkpoint, tmp_path):
    (tmp_path / "keys").write_text("first-key\nsecond-key\n")
    process, url = start(checkpoint, "--api-key-file", str(tmp_path / "keys"))
    try:
        body = {"input": "rent", "model": "tiny"}
        assert httpx.post(url + "/v1/embeddings", json=body).status_code == 401
        assert httpx.post(url + "/v1/embeddings", json=body, headers={"Authorization": "Bearer nope"}).status_code == 401
        assert httpx.post(url + "/v1/embeddings", json=body,
                          headers={"Authorization": "Bearer second-key"}).status_code == 200
        assert httpx.get(url + "/v1/models").status_code == 401
        assert httpx.get(url + "/health").status_code == 200  # liveness needs no key
    finally:
        stop(process)


def test_overload_is_a_503_with_retry_after_and_the_server_stays_healthy(checkpoint):
    process, url = start(checkpoint, "--max-queued-chunks", "40", "--max-tokens-per-batch", "512")
    try:
        body = {"input": [long_document(30, seed=k) for k in range(4)], "model": "tiny"}

        def call(_):
            return httpx.post(url + "/v1/contextualizedembeddings", json=body, timeout=120)

        with concurrent.futures.ThreadPoolExecutor(24) as pool:
            answers = list(pool.map(call, range(24)))
        codes = sorted({a.status_code for a in answers})
        assert set(codes) <= {200, 503} and 503 in codes and 200 in codes, codes
        refused = next(a for a in answers if a.status_code == 503)
        assert refused.headers["retry-after"] == "1" and "capacity" in refused.json()["error"]["message"]
        assert httpx.get(url + "/health").status_code == 200
        assert httpx.post(url + "/v1/embeddings", json={"input": "rent", "model": "tiny"}).status_code == 200
    finally:
        stop(process)


def test_a_bad_key_file_fails_before_the_model_loads(checkpoint, tmp_path):
    from contextembed.cli import main

    (tmp_path / "empty").write_text("\n")
    assert main(["serve", str(checkpoint), "--api-key-file", str(tmp_path / "empty")]) == 2


def test_sigterm_finishes_the_requests_in_flight(checkpoint):
    process, url = start(checkpoint, "--max-tokens-per-batch", "256")
    # Requests long enough (a second or so each here) to outlast the others' start on a loaded machine, sent through
    # one client made beforehand: a tenth of a second of work each, from fresh clients, could finish before the fourth
    # one arrived.
    body = {"input": [long_document(60, seed=k) for k in range(24)], "model": "tiny"}
    with httpx.Client(timeout=120) as client, concurrent.futures.ThreadPoolExecutor(4) as pool:
        calls = [pool.submit(client.post, url + "/v1/contextualizedembeddings", json=body) for _ in range(4)]
        in_flight = 0
        for _ in range(1500):  # wait until all four are being answered, then ask the server to stop
            in_flight = _in_flight(url)
            if in_flight == 4 or all(c.done() for c in calls):
                break
            time.sleep(0.02)
        process.terminate()
        answers = [c.result() for c in calls]
    assert in_flight == 4, "the requests were not all in flight when the server was asked to stop: nothing was proved"
    assert process.wait(60) in (0, -15)  # uvicorn re-raises the SIGTERM once it has shut down gracefully
    assert [a.status_code for a in answers] == [200] * 4
    assert all(len(a.json()["data"]) == 24 for a in answers)


def _in_flight(url: str) -> int:
    try:
        return httpx.get(url + "/health", timeout=1).json()["requests_in_flight"]
    except (httpx.HTTPError, ValueError, KeyError):
        return 0


@pytest.mark.slow
def test_workers_answer_from_several_processes_with_the_same_vectors(checkpoint, reference):
    before = set(Path(tempfile.gettempdir()).glob("contextembed-metrics-*"))
    process, url = start(checkpoint, "--workers", "2", "--threads-per-worker", "1", "--max-tokens-per-batch", "256")
    try:
        def metrics() -> dict[str, float]:  # /metrics from whichever worker answers
            return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
                    for line in httpx.get(url + "/metrics").text.splitlines() if line and not line.startswith("#")}

        deadline = time.monotonic() + 120  # the first worker may answer before the other has loaded its model
        while metrics()["contextembed_workers"] < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert metrics()["contextembed_workers"] == 2  # both live, and one worker's /metrics sums both

        documents = [long_document(12, seed=k) for k in range(16)]
        expected = reference.encode_documents(documents)

        def call(document):
            with httpx.Client(timeout=120) as client:  # a connection of its own: either worker may take it
                return client.post(url + "/v1/contextualizedembeddings", json={
                    "inputs": [document], "model": "tiny", "input_type": "document"}).json()

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(call, documents))
        for answer, vectors in zip(answers, expected):
            got = np.array([c["embedding"] for c in answer["data"][0]["data"]])
            np.testing.assert_allclose(got, vectors, atol=1e-6, rtol=0)  # one vector per chunk, in order

        answered = metrics()  # every worker's answers, whichever worker counts them
        assert answered['contextembed_requests_total{code="200",route="/v1/contextualizedembeddings"}'] == 16
        assert "contextembed_queue_chunks" in answered and "contextembed_requests_in_flight" in answered

        body = {"input": [long_document(60, seed=k) for k in range(6)], "model": "tiny"}
        with concurrent.futures.ThreadPoolExecutor(4) as pool:  # SIGTERM: the workers finish what they answer
            calls = [pool.submit(httpx.post, url + "/v1/contextualizedembeddings", json=body, timeout=120)
                     for _ in range(4)]
            route = 'contextembed_requests_total{code="200",route="/v1/contextualizedembeddings"}'
            deadline = time.monotonic() + 60  # a loaded machine may take a while to accept all four
            while time.monotonic() < deadline:
                now = metrics()
                if now["contextembed_requests_in_flight"] + now[route] - 16 >= 4:  # taken: answering or answered
                    break
                time.sleep(0.05)
            process.terminate()
            answers = [c.result() for c in calls]
        assert process.wait(60) in (0, -15)
        assert [a.status_code for a in answers] == [200] * 4
    finally:
        stop(process)
    assert set(Path(tempfile.gettempdir()).glob("contextembed-metrics-*")) == before  # its metrics folder is gone


def test_workers_options(checkpoint, capsys):
    import argparse

    from contextembed.cli import main
    from contextembed.cli.serve import threads_per_worker

    assert main(["serve", str(checkpoint), "--workers", "2", "--replicas", "2"]) == 2
    assert "pass one" in capsys.readouterr().err
    assert main(["serve", str(checkpoint), "--threads-per-worker", "1", "--replicas", "2"]) == 2
    assert "--cpus-per-replica" in capsys.readouterr().err
    cpus = len(os.sched_getaffinity(0))
    assert threads_per_worker(argparse.Namespace(workers=2, threads_per_worker=None)) == max(1, cpus // 2)
    assert threads_per_worker(argparse.Namespace(workers=1, threads_per_worker=None)) is None
    assert threads_per_worker(argparse.Namespace(workers=4, threads_per_worker=3)) == 3
    with pytest.raises(SystemExit):
        main(["serve", str(checkpoint), "--workers", "0"])
    from contextembed.cli.serve import ARGS_ENVIRONMENT, worker_app

    assert ARGS_ENVIRONMENT not in os.environ
    with pytest.raises(RuntimeError, match="contextembed serve --workers"):
        worker_app()  # only the server's own workers are given their arguments


def test_the_gauges_of_dead_workers_are_forgotten(tmp_path):
    from contextembed.serve.metrics import forget_dead_workers

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for pid in (dead.pid, os.getpid()):
        for name in (f"gauge_livesum_{pid}.db", f"counter_{pid}.db"):
            (tmp_path / name).write_bytes(b"")
    assert forget_dead_workers(str(tmp_path)) == [dead.pid]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"counter_{dead.pid}.db", f"counter_{os.getpid()}.db", f"gauge_livesum_{os.getpid()}.db"])
