"""sentence-transformers helpers: list-of-chunks documents through the built-in `Transformer` module.

sentence-transformers reads a bare list of 3+ strings as an unsupported input and a list of two as
a text pair; `{"text": [chunks]}` reaches our processor unchanged, so that is the form we hand it.
"""

from __future__ import annotations

from sentence_transformers import SentenceTransformer


def as_chunked(documents):
    """Wrap each list-of-chunks document as `{"text": chunks}`; strings and dicts pass through.

    >>> as_chunked([["c1", "c2", "c3"], "plain", ("a", "b")])
    [{'text': ['c1', 'c2', 'c3']}, 'plain', {'text': ['a', 'b']}]
    """
    if isinstance(documents, (str, dict)):
        return documents
    return [{"text": list(doc)} if isinstance(doc, (list, tuple)) else doc for doc in documents]


class ContextEmbedSentenceTransformer(SentenceTransformer):
    """A `SentenceTransformer` that also takes `list[list[str]]` documents (one list of chunks each).

    Only the public `preprocess` is overridden; checkpoints stay plain sentence-transformers checkpoints.
    """

    def preprocess(self, inputs, prompt: str | None = None, **kwargs):
        return super().preprocess(as_chunked(inputs), prompt=prompt, **kwargs)
