"""Search a store for one query: the ranked documents, each with its answer chunk (see `contextembed.retrieval`).

`exact_search` and `SearchResult` live in `contextembed.retrieval` (the retrieval core); they are importable from
here too, where they used to be defined.
"""

from __future__ import annotations

from contextembed.retrieval import SearchResult, exact_search

__all__ = ["SearchResult", "exact_search"]
