"""The wire formats the server speaks: request bodies checked into `Job`s, vectors written back in each API's shape.

- OpenAI `POST /v1/embeddings`: `input` (a string or a list of strings), `model`, `dimensions`, `encoding_format`
  (`float` | `base64`, little-endian float32), `user`; each text is embedded **as a query** unless the request
  says `"input_type": "document"` (then each text is a one-chunk document).
- Perplexity `POST /v1/contextualizedembeddings` with `input`: a list of documents, each a list of chunk strings;
  `dimensions`; `encoding_format` `base64_int8` (the default) | `base64_binary` (sign bits packed LSB first) |
  `float`.
- Voyage `POST /v1/contextualizedembeddings` with `inputs`; `input_type` `query` | `document` (default), a query
  being each chunk embedded alone as a query; `output_dimension`; `output_dtype` `float` | `int8` | `uint8` |
  `binary` | `ubinary` (the package's own codes); `encoding_format` `base64` (the raw bytes of that dtype) or none.

Every problem is a `RequestError` (status 400 unless said) whose message names the field, as the Python API would.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

import numpy as np

from contextembed.modeling import check_count, normalize_documents

API = ("openai", "perplexity", "voyage")
OPENAI_FIELDS = {"input", "model", "dimensions", "encoding_format", "user", "input_type"}
PERPLEXITY_FIELDS = {"input", "model", "dimensions", "encoding_format"}
VOYAGE_FIELDS = {"inputs", "model", "input_type", "output_dimension", "output_dtype", "encoding_format"}
PERPLEXITY_ENCODINGS = {"base64_int8": "int8", "base64_binary": "ubinary", "float": "float32"}
VOYAGE_DTYPES = {"float": "float32", "int8": "int8", "uint8": "uint8", "binary": "binary", "ubinary": "ubinary"}


class RequestError(ValueError):
    """A request the server refuses: an HTTP status and a message naming the problem."""

    def __init__(self, message: str, status: int = 400, param: str | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status, self.param, self.headers = status, param, headers or {}

    def body(self, api: str | None = None) -> dict:
        """The error in `api`'s shape: Voyage's `{"detail": message}` (what its client reads), else OpenAI's (which
        Perplexity's follows).

        >>> RequestError("dimensions must be a positive integer", param="dimensions").body()["error"]["type"]
        'invalid_request_error'
        >>> RequestError("inputs[0] is empty").body("voyage")
        {'detail': 'inputs[0] is empty'}
        """
        if api == "voyage":
            return {"detail": str(self)}
        kind = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
                413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error"}.get(self.status, "error")
        return {"error": {"message": str(self), "type": kind, "param": self.param, "code": self.status}}


@dataclass
class Limits:
    """What one request may hold (defaults keep a request within memory on a small machine; Perplexity's own API
    allows 512 documents, 16,000 chunks and 120K tokens per request)."""

    max_documents: int = 512
    max_chunks: int = 16_000
    max_chunks_per_document: int = 4_096
    max_tokens: int = 120_000
    max_document_tokens: int = 32_768
    max_body_bytes: int = 16 * 2**20


@dataclass
class Job:
    """One request's work: documents (lists of chunks) embedded as `task`, coded at `precision`, cut to `output_dim`."""

    api: str
    model: str
    documents: list[list[str]]
    task: str  # "query" (each chunk alone, as a query) or "document" (late chunking)
    precision: str
    output_dim: int | None  # the request's `dimensions` / `output_dimension`
    encoding: str  # how vectors are written back: "float", "base64", "base64_int8", "base64_binary"
    tokens: int = 0
    rows: list[dict] = field(default_factory=list)  # the model's input, tokenised once (`tokenize_job`)
    meta: dict = field(default_factory=dict)


def _integer(body: dict, name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    try:
        return check_count(value, name)
    except ValueError as error:
        raise RequestError(str(error), param=name) from None


def _choice(body: dict, name: str, choices, default):
    value = body.get(name, default)
    if value is None:
        value = default
    if value not in choices:
        raise RequestError(f"{name} must be one of {sorted(choices)}, got {value!r}", param=name)
    return value


def _known(body: dict, fields: set[str], api: str) -> None:
    unknown = sorted(set(body) - fields)
    if unknown:
        raise RequestError(f"unknown field(s) {unknown} for the {api} API (known: {sorted(fields)})", param=unknown[0])


def _chunks(documents, name: str) -> list[list[str]]:
    """The request's documents, checked as the Python API checks them (`normalize_documents`), none blank."""
    try:
        return normalize_documents(documents, name, strings="error", blank="error")
    except ValueError as error:
        raise RequestError(str(error), param=name) from None


def parse_embeddings(body: dict, served: str) -> Job:
    """An OpenAI embeddings request.

    >>> job = parse_embeddings({"input": "rent", "model": "m"}, "m")
    >>> job.documents, job.task, job.encoding
    ([['rent']], 'query', 'float')
    >>> parse_embeddings({"input": [1, 2], "model": "m"}, "m")
    Traceback (most recent call last):
    ...
    contextembed.serve.protocol.RequestError: input[0] must be a string, got int (token arrays are not accepted)
    """
    _known(body, OPENAI_FIELDS, "OpenAI embeddings")
    texts = body.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts:
        raise RequestError("input must be a string or a non-empty list of strings", param="input")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise RequestError(f"input[{i}] must be a string, got {type(text).__name__} (token arrays are not "
                               "accepted)", param="input")
        if not text.strip():
            raise RequestError(f"input[{i}] is empty: every input needs text", param="input")
    task = _choice(body, "input_type", {"query", "document"}, "query")
    encoding = _choice(body, "encoding_format", {"float", "base64"}, "float")
    return Job("openai", served, [[t] for t in texts], task, "float32", _integer(body, "dimensions"), encoding)


def parse_contextualized(body: dict, served: str) -> Job:
    """A contextualized request, Perplexity's (`input`) or Voyage's (`inputs`) told apart by their fields.

    >>> parse_contextualized({"input": [["a", "b"]], "model": "m"}, "m").precision
    'int8'
    >>> job = parse_contextualized({"inputs": [["a"]], "model": "m", "output_dtype": "ubinary"}, "m")
    >>> job.api, job.task, job.precision
    ('voyage', 'document', 'ubinary')
    """
    if "input" in body and "inputs" in body:
        raise RequestError("send either input (Perplexity's shape) or inputs (Voyage's), not both", param="input")
    if "inputs" in body:
        _known(body, VOYAGE_FIELDS, "Voyage contextualized embeddings")
        documents = _chunks(body["inputs"], "inputs")
        precision = VOYAGE_DTYPES[_choice(body, "output_dtype", VOYAGE_DTYPES, "float")]
        encoding = "base64" if _choice(body, "encoding_format", {"base64", "none"}, "none") == "base64" else "float"
        task = _choice(body, "input_type", {"query", "document"}, "document")
        return Job("voyage", served, documents, task, precision, _integer(body, "output_dimension"), encoding)
    if "input" not in body:
        raise RequestError("a contextualized request needs input (Perplexity) or inputs (Voyage)", param="input")
    _known(body, PERPLEXITY_FIELDS, "Perplexity contextualized embeddings")
    documents = _chunks(body["input"], "input")
    encoding = _choice(body, "encoding_format", PERPLEXITY_ENCODINGS, "base64_int8")
    return Job("perplexity", served, documents, "document", PERPLEXITY_ENCODINGS[encoding],
               _integer(body, "dimensions"), encoding)


def check_model(body: dict, names: set[str]) -> str:
    """The requested model, which must be one of the served names (no model is ever loaded by request)."""
    model = body.get("model")
    if not isinstance(model, str):
        raise RequestError("model must be a string naming the served model", param="model")
    if model not in names:
        raise RequestError(f"model {model!r} is not served here (served: {sorted(names)})", status=404,
                           param="model")
    return model


def encode_vector(vector: np.ndarray, encoding: str):
    """One vector as the response writes it.

    >>> encode_vector(np.array([1.0, -2.0], dtype=np.float32), "float")
    [1.0, -2.0]
    >>> encode_vector(np.array([1, -1], dtype=np.int8), "base64_int8")
    'Af8='
    >>> encode_vector(np.array([0b10000000], dtype=np.uint8), "base64_binary")  # sign bit 0 first, LSB first
    'AQ=='
    """
    if encoding == "float":
        return vector.tolist()
    if encoding == "base64_binary":  # Perplexity: bit i of the vector is bit (i % 8) of byte i // 8
        bits = np.unpackbits(np.asarray(vector, dtype=np.uint8))
        return base64.b64encode(np.packbits(bits, bitorder="little").tobytes()).decode()
    if encoding == "base64":
        dtype = {np.dtype(np.float32): "<f4"}.get(vector.dtype, vector.dtype)
        return base64.b64encode(np.ascontiguousarray(vector, dtype=dtype).tobytes()).decode()
    return base64.b64encode(np.ascontiguousarray(vector, dtype=np.int8).tobytes()).decode()  # base64_int8


def response(job: Job, vectors: list[np.ndarray]) -> dict:
    """The response body for `job` in its API's shape; `vectors` holds one array per document, one row per chunk."""
    usage = {"prompt_tokens": job.tokens, "total_tokens": job.tokens}
    if job.api == "openai":
        data = [{"object": "embedding", "index": i, "embedding": encode_vector(v[0], job.encoding)}
                for i, v in enumerate(vectors)]
        return {"object": "list", "data": data, "model": job.model, "usage": usage}
    data = [{"object": "list" if job.api == "voyage" else "contextualized_embedding", "index": i,
             "data": [{"object": "embedding", "index": j, "embedding": encode_vector(row, job.encoding)}
                      for j, row in enumerate(v)]}
            for i, v in enumerate(vectors)]
    if job.api == "voyage":
        usage = {"total_tokens": job.tokens}
    return {"object": "list", "data": data, "model": job.model, "usage": usage}


def tokenize_job(job: Job, processor) -> list[int]:
    """Tokenise a request once, as the model will read it, into `job.rows` (the processor's rows: one per document,
    or one per chunk for queries, each chunk alone) and `job.tokens` (its chunks' tokens: the usage); returns each
    document's chunk tokens, for the limits. The batcher embeds these rows, so a request is never tokenised twice. A
    chunk with no tokens (only characters the tokenizer drops) is the Python API's own `ValueError`, naming it: the
    request fails alone, before it is queued with others."""
    if job.task == "query":  # each chunk alone, as a query
        documents = [[c] for d in job.documents for c in d]
    else:
        documents = job.documents
    job.rows = processor.tokenize_documents(documents, task=job.task, long_documents="window", empty_chunks="error")
    counts = iter(sum(1 for c in row["chunk_ids"] if c >= 0) for row in job.rows)
    if job.task == "query":  # a row per chunk: each document's rows summed
        per_document = [sum(next(counts) for _ in d) for d in job.documents]
    else:
        per_document = list(counts)
    job.tokens = sum(per_document)
    return per_document
