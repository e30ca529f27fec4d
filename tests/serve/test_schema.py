"""The server publishes its OpenAPI schema, and a fuzzer that reads it (schemathesis) finds no server error: every
request it makes, malformed or not, is answered 2xx or 4xx, and the server is alive afterwards. On a real server on
127.0.0.1 (the module's own, started once)."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests.serve.test_server import start, stop

schemathesis = pytest.importorskip("schemathesis")
from schemathesis import GenerationMode  # noqa: E402


@pytest.fixture(scope="module")
def served(built, tmp_path_factory):
    keys = tmp_path_factory.mktemp("keys") / "keys.txt"
    keys.write_text("sesame\n")
    process, url = start(built["bert"][0], "--api-key-file", str(keys))
    yield url
    stop(process)


AUTH = {"Authorization": "Bearer sesame"}


def test_the_schema_describes_every_route_and_is_behind_the_key(served):
    assert httpx.get(served + "/openapi.json").status_code == 401
    assert httpx.get(served + "/docs").status_code == 401
    schema = httpx.get(served + "/openapi.json", headers=AUTH).json()
    assert set(schema["paths"]) >= {"/v1/embeddings", "/v1/contextualizedembeddings", "/v1/models", "/health"}
    contextualized = schema["paths"]["/v1/contextualizedembeddings"]["post"]
    body = contextualized["requestBody"]["content"]["application/json"]["schema"]
    assert {ref["$ref"].rsplit("/", 1)[1] for ref in body["oneOf"]} == {"PerplexityRequest", "VoyageRequest"}
    assert {"200", "400", "401", "413"} <= set(contextualized["responses"])
    voyage = schema["components"]["schemas"]["VoyageRequest"]
    assert voyage["additionalProperties"] is False and "inputs" in voyage["required"]
    assert "text/html" in httpx.get(served + "/docs", headers=AUTH).headers["content-type"]


@pytest.mark.slow
def test_no_docs_means_no_schema(built):
    process, url = start(built["bert"][0], "--no-docs")
    try:
        assert httpx.get(url + "/openapi.json").status_code == 404
        assert httpx.get(url + "/docs").status_code == 404
    finally:
        stop(process)


def test_a_fuzzer_reading_the_schema_finds_no_server_error(served):
    """Bounded: 60 well-formed and 60 malformed requests per operation, each checked for a 5xx."""
    schema = schemathesis.openapi.from_url(served + "/openapi.json", headers=AUTH)
    failures, statuses = [], {}

    @settings(max_examples=60, deadline=None, derandomize=True, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    def run(case):
        response = case.call(headers=AUTH, timeout=60)
        statuses[response.status_code // 100] = statuses.get(response.status_code // 100, 0) + 1
        if response.status_code >= 500:
            failures.append((case.method, case.path, case.body, response.status_code, response.text[:200]))

    for result in schema.get_all_operations():
        operation = result.ok()
        # well-formed, and (where there is a body to break) of the wrong type or shape
        modes = [GenerationMode.POSITIVE] + ([GenerationMode.NEGATIVE] if operation.method.upper() == "POST" else [])
        for mode in modes:
            given(case=operation.as_strategy(generation_mode=mode))(run)()
    assert not failures, failures[:5]
    assert statuses.get(2, 0) > 50 and statuses.get(4, 0) > 100, statuses  # both kinds were sent and answered
    assert httpx.get(served + "/health").json()["status"] == "ok"
