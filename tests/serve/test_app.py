"""The application's error boundary, on a real uvicorn process on 127.0.0.1 serving a model with a bug put in on
purpose: what the client sent wrong is a 4xx in the Python API's words, a failure of ours past the checks is a 500
naming only its type, with the traceback in the server's log; Starlette's own refusals (no such route, a body over
the limit) come in the same error shape, and the metrics count each answer by route and status."""

from __future__ import annotations

import json
import sys
import time

import httpx
import pytest

import contextembed
from tests.serve.test_server import free_port, launch, stop

# The model's forward pass fails in two ways past the request's checks, as a bug of ours would: int8 calls raise a
# ValueError (which the server used to answer 400, blaming the client), float32 calls return NaN vectors, which
# fail when the answer is written as JSON floats.
FAULTY_SERVER = """
import sys

import numpy as np
import uvicorn

import contextembed
from contextembed.serve import Limits, ServeSettings, create_app

model = contextembed.load(sys.argv[1])
forward = model.encode_tokenized


def faulty(rows, **options):
    if options["precision"] == "int8":
        raise ValueError("a bug in the forward pass")
    return [np.full_like(vectors, np.nan) for vectors in forward(rows, **options)]


model.encode_tokenized = faulty
settings = ServeSettings(model_names=["tiny"], limits=Limits(max_body_bytes=4096))
uvicorn.run(create_app(model, settings), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
"""


@pytest.fixture(scope="module")
def reference(built):
    return contextembed.load(built["bert"][0])


@pytest.fixture(scope="module")
def faulty(built, tmp_path_factory):
    """(url, the file the server logs to)."""
    port, log = free_port(), tmp_path_factory.mktemp("faulty") / "server.log"
    with log.open("w") as output:
        process, url = launch([sys.executable, "-c", FAULTY_SERVER, str(built["bert"][0]), str(port)], port,
                              output=output)
    yield url, log
    stop(process)


def post(url: str, body) -> httpx.Response:
    return httpx.post(url + "/v1/contextualizedembeddings", json=body, timeout=60)


def test_a_bad_request_is_the_clients_error_in_the_python_apis_words(faulty, reference):
    url, _ = faulty
    with pytest.raises(ValueError) as python:
        reference.encode_documents([["The rent is due.", "\x00\x01"]])  # a chunk the tokenizer leaves empty
    answer = post(url, {"input": [["The rent is due.", "\x00\x01"]], "model": "tiny"})
    assert answer.status_code == 400 and answer.json()["error"]["message"] == str(python.value)
    with pytest.raises(ValueError) as python:
        reference.encode_documents([["rent"]], output_dim=5)
    answer = post(url, {"input": [["rent"]], "model": "tiny", "dimensions": 5})
    error = answer.json()["error"]
    assert answer.status_code == 400 and error["param"] == "dimensions"
    assert error["message"] == str(python.value).replace("output_dim", "the dimension")  # the wire's word for it
    answer = post(url, {"inputs": [["rent"]], "model": "tiny", "output_dimension": 5})  # Voyage's error shape
    assert answer.status_code == 400 and answer.json() == {
        "detail": str(python.value).replace("output_dim", "the dimension")}


@pytest.mark.parametrize(("body", "step"), [
    ({"input": [["The rent is due."]], "model": "tiny"}, "a bug in the forward pass"),  # int8: the model raises
    ({"inputs": [["The rent is due."]], "model": "tiny"}, "Out of range float values"),  # NaN: writing the answer
])
def test_a_failing_internal_step_is_a_500_with_its_traceback_in_the_log(faulty, body, step):
    url, log = faulty
    answer = post(url, body)
    assert answer.status_code == 500, answer.text
    assert answer.json() == ({"detail": "internal error: ValueError"} if "inputs" in body else {"error": {
        "message": "internal error: ValueError", "type": "error", "param": None, "code": 500}})
    assert step not in answer.text and "Traceback" not in answer.text  # nothing of our internals to the client
    assert httpx.get(url + "/health").status_code == 200  # one failed request, not a failed server
    logged = last_escaped_exception(log, until=f"ValueError: {step}")
    assert logged.lstrip().startswith("Traceback (most recent call last):") and f"ValueError: {step}" in logged


def last_escaped_exception(log, until: str, timeout: float = 10) -> str:
    """What the server logged after its last "Exception in ASGI application" (uvicorn's line for an exception that
    escaped the application, written just after the 500 goes out), once it holds `until` or `timeout` has passed."""
    deadline = time.monotonic() + timeout
    while True:
        logged = log.read_text().rpartition("Exception in ASGI application")[2]
        if until in logged or time.monotonic() > deadline:
            return logged
        time.sleep(0.1)


def test_starlettes_own_refusals_come_in_the_same_error_shape(faulty):
    url, _ = faulty
    body = json.dumps({"input": [["word " * 1000]], "model": "tiny"}).encode()  # over the 4096-byte body limit
    declared = httpx.post(url + "/v1/contextualizedembeddings", content=body, timeout=60)
    assert declared.status_code == 413 and declared.text == "Content Too Large"  # Starlette's, before any reading
    streamed = httpx.post(url + "/v1/contextualizedembeddings", content=iter([body[:2048], body[2048:]]), timeout=60)
    assert "content-length" not in streamed.request.headers  # sent in chunks: found too large while read
    assert streamed.status_code == 413
    assert streamed.json()["error"]["message"] == "the request body is larger than the limit of 4096 bytes"
    missing = httpx.get(url + "/v1/nothing")
    assert missing.status_code == 404 and missing.json()["error"] == {
        "message": "Not Found", "type": "not_found_error", "param": None, "code": 404}
    wrong = httpx.get(url + "/v1/embeddings")
    assert wrong.status_code == 405 and wrong.json()["error"]["message"] == "Method Not Allowed"


def test_the_metrics_count_every_answer_by_route_and_status(faulty):
    url, _ = faulty
    post(url, {"model": "tiny"})
    post(url, {"input": [["The rent is due."]], "model": "tiny"})
    httpx.get(url + "/v1/nothing")
    httpx.get(url + "/health")
    metrics = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
               for line in httpx.get(url + "/metrics").text.splitlines() if line and not line.startswith("#")}
    route = '{code="%s",route="/v1/contextualizedembeddings"}'
    assert metrics["contextembed_requests_total" + route % 400] >= 1
    assert metrics["contextembed_requests_total" + route % 500] >= 1  # an exception that escaped, counted
    assert metrics['contextembed_requests_total{code="404",route="unmatched"}'] >= 1
    assert not any('route="/health"' in name or 'route="/metrics"' in name for name in metrics)  # probes: not counted
    assert metrics["contextembed_requests_in_flight"] == 0
