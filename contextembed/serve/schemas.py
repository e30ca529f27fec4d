"""The wire formats as pydantic models: what each route accepts and answers, typed, published as the server's OpenAPI
schema (`/openapi.json`).

FastAPI checks every body against these before a route runs: a field of the wrong type, shape or value is a 4xx
naming the field, in the error shape of the API it belongs to (`error_body`), never a failure inside. What a type
cannot say (a blank chunk, the served model's name, its dimensions, the limits) the routes check next
(`contextembed.serve.protocol` and `validation`), in the Python API's words.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, StrictInt, StrictStr, Tag, WithJsonSchema

Text = Annotated[StrictStr, Field(min_length=1)]
Count = Annotated[StrictInt, Field(ge=1)]
Documents = Annotated[list[Annotated[list[Text], Field(min_length=1)]], Field(min_length=1)]


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid")  # an unknown field is refused, naming it

    model: StrictStr = Field(description="the served model's name (GET /v1/models lists them)")


class OpenAIEmbeddingsRequest(Request):
    """OpenAI's `POST /v1/embeddings`: each text embedded as a query unless `input_type` is `document`."""

    input: Annotated[list[Text], Field(min_length=1), BeforeValidator(lambda v: [v] if isinstance(v, str) else v),
                     WithJsonSchema({"anyOf": [{"type": "string", "minLength": 1},
                                               {"type": "array", "items": {"type": "string", "minLength": 1},
                                                "minItems": 1}]})] = Field(description="a text or a list of texts")
    dimensions: Count | None = Field(None, description="a Matryoshka width of the model")
    encoding_format: Literal["float", "base64"] = Field("float", description="base64: little-endian float32")
    user: StrictStr | None = None
    input_type: Literal["query", "document"] = "query"


class PerplexityRequest(Request):
    """Perplexity's `POST /v1/contextualizedembeddings`: documents as lists of chunks, each chunk's vector contextual."""

    input: Documents = Field(description="documents, each a list of chunk strings")
    dimensions: Count | None = None
    encoding_format: Literal["base64_int8", "base64_binary", "float"] = "base64_int8"


class VoyageRequest(Request):
    """Voyage's `POST /v1/contextualizedembeddings` (`inputs`): documents, or queries with `input_type: query`."""

    inputs: Documents = Field(description="documents, each a list of chunk strings")
    input_type: Literal["query", "document"] | None = "document"
    output_dimension: Count | None = None
    output_dtype: Literal["float", "int8", "uint8", "binary", "ubinary"] | None = "float"
    encoding_format: Literal["base64"] | None = None


def _contextualized_api(body) -> str:
    """Voyage's shape has `inputs`; anything else is read as Perplexity's."""
    return "voyage" if isinstance(body, dict) and "inputs" in body else "perplexity"


ContextualizedRequest = Annotated[Union[Annotated[PerplexityRequest, Tag("perplexity")],  # noqa: UP007
                                        Annotated[VoyageRequest, Tag("voyage")]],
                                  Discriminator(_contextualized_api)]


class Usage(BaseModel):
    prompt_tokens: int | None = None
    total_tokens: int


class Embedding(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str = Field(description="floats, or base64 of the encoding asked for")


class EmbeddingsResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[Embedding]
    model: str
    usage: Usage


class DocumentEmbeddings(BaseModel):
    object: str = Field(description="contextualized_embedding (Perplexity) or list (Voyage)")
    index: int
    data: list[Embedding] = Field(description="one per chunk, in order")


class ContextualizedResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[DocumentEmbeddings]
    model: str
    usage: Usage


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: int


class ErrorResponse(BaseModel):
    """OpenAI's and Perplexity's error shape (Voyage's is `{"detail": message}`)."""

    error: ErrorDetail


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "contextembed"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


def field_name(location: tuple) -> str:
    """A validation error's location as the request names it.

    >>> field_name(("body", "voyage", "inputs", 0, 2))
    'inputs[0][2]'
    >>> field_name(("body",))
    'the body'
    """
    parts = [p for p in location[1:] if p not in ("perplexity", "voyage")]
    if not parts:
        return "the body"
    return str(parts[0]) + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts[1:])


def describe(error: dict, known: list[str] = ()) -> str:
    """One pydantic validation error as the Python API would word it: the field, what it must be, what came.

    >>> describe({"type": "literal_error", "loc": ("body", "encoding_format"), "input": "hex",
    ...           "ctx": {"expected": "'float' or 'base64'"}})
    "encoding_format must be 'float' or 'base64', got 'hex'"
    >>> describe({"type": "string_type", "loc": ("body", "input", 0), "input": [1, 2]})
    'input[0] must be a string, got list (token arrays are not accepted)'
    >>> describe({"type": "extra_forbidden", "loc": ("body", "truncate"), "input": True}, ["inputs", "model"])
    "unknown field 'truncate' (known: ['inputs', 'model'])"
    """
    field, value, kind = field_name(tuple(error["loc"])), error.get("input"), error["type"]
    got = type(value).__name__
    if kind == "missing":
        return f"{field} is required" if field != "the body" else "the body must be a JSON object"
    if kind == "extra_forbidden":
        return f"unknown field {field!r} (known: {sorted(known)})"
    if kind == "literal_error":
        return f"{field} must be {error.get('ctx', {}).get('expected', 'one of the listed values')}, got {value!r}"
    if kind in ("int_type", "int_parsing", "greater_than_equal"):
        return f"{field} must be a positive integer, got {value!r}"
    if kind == "string_type":
        tokens = " (token arrays are not accepted)" if isinstance(value, (int, list)) else ""
        return f"{field} must be a string, got {got}{tokens}"
    if kind == "string_too_short":
        return f"{field} is empty: every chunk needs text"
    if kind == "list_type":
        return f"{field} must be a list, got {got}"
    if kind == "too_short":
        return f"{field} must be a non-empty list"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return f"the body must be a JSON object, got {got}"
    return f"{field}: {error.get('msg', 'is malformed')}"


ERRORS = {400: {"model": ErrorResponse, "description": "a malformed request: the message names the field"},
          401: {"model": ErrorResponse, "description": "no valid API key"},
          404: {"model": ErrorResponse, "description": "the model is not served here"},
          413: {"model": ErrorResponse, "description": "over a limit (documents, chunks, tokens, body size)"},
          503: {"model": ErrorResponse, "description": "the queue is full: retry after the Retry-After header"}}
