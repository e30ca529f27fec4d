"""The user-input boundary: a request becomes a checked `Job`, or a `RequestError` (4xx) that names the problem.

Everything the server does before a job is queued checks what the client sent: the body's types (its route's schema,
`schemas`, checked by FastAPI before this layer), the served model, the fields of its API (`protocol`), the limits,
the dimension and the tokens (the Python API's own checks, word for
word). A `ValueError` raised there is the client's: it becomes a `RequestError` with its message as is. Past this
layer nothing is the client's fault: any exception is ours, and the application answers it 500 (`app`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from contextembed.serve.protocol import Job, Limits, RequestError, check_model, tokenize_job

try:
    from starlette.concurrency import run_in_threadpool
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("the server needs FastAPI, uvicorn and prometheus-client: pip install 'contextembed[serve]'"
                      ) from error


@contextmanager
def user_input(param: str | None = None) -> Iterator[None]:
    """Checks of what the client sent: a `ValueError` raised inside is a `RequestError` (400) with its message.

    >>> with user_input("dimensions"):
    ...     raise ValueError("output_dim must be one of [8, 32], got 5")
    Traceback (most recent call last):
    ...
    contextembed.serve.protocol.RequestError: output_dim must be one of [8, 32], got 5
    """
    try:
        yield
    except RequestError:
        raise
    except ValueError as problem:
        raise RequestError(str(problem), param=param) from problem


class Validator:
    """Checks requests for one served `model` under `names` and `limits`."""

    def __init__(self, model, names: list[str], limits: Limits):
        self.model, self.names, self.limits = model, set(names), limits

    async def job(self, body: dict, parse: Callable[[dict, str], Job]) -> Job:
        """The checked job of a body its route's schema accepted: the model and fields on the event loop (cheap),
        the limits and the tokenisation in the thread pool (the request's own size)."""
        served = check_model(body, self.names)
        with user_input():
            job = parse(body, served)
        await run_in_threadpool(self.check, job)
        return job

    def check(self, job: Job) -> None:
        """The limits, the dimension, and the tokens: `job` is tokenised here, once, into the rows the model reads."""
        limits = self.limits
        if len(job.documents) > limits.max_documents:
            raise RequestError(f"{len(job.documents)} documents, more than the limit of {limits.max_documents} per "
                               "request", status=413)
        chunks = sum(len(d) for d in job.documents)
        if chunks > limits.max_chunks:
            raise RequestError(f"{chunks} chunks, more than the limit of {limits.max_chunks} per request", status=413)
        for i, document in enumerate(job.documents):
            if len(document) > limits.max_chunks_per_document:
                raise RequestError(f"document {i} has {len(document)} chunks, more than the limit of "
                                   f"{limits.max_chunks_per_document}", status=413)
        from contextembed.modeling import check_output_dim

        field = "output_dimension" if job.api == "voyage" else "dimensions"
        try:
            check_output_dim(self.model.config, job.output_dim)
        except ValueError as problem:  # the Python API's words, the dimension named as the wire names it
            raise RequestError(str(problem).replace("output_dim", "the dimension"), param=field) from None
        with user_input():  # a chunk the tokenizer leaves empty: the processor's own error, naming it
            per_document = tokenize_job(job, self.model.processor)
        for i, tokens in enumerate(per_document):
            if tokens > limits.max_document_tokens:
                raise RequestError(f"document {i} has {tokens} tokens, more than the limit of "
                                   f"{limits.max_document_tokens}", status=413)
        if job.tokens > limits.max_tokens:
            raise RequestError(f"{job.tokens} tokens, more than the limit of {limits.max_tokens} per request",
                               status=413)
