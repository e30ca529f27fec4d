"""Store URIs: which database, where, and the options contextembed reads from the query string."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit

SCHEMES = ("file", "lancedb", "qdrant", "pgserver", "postgresql", "postgres")
OPTIONS = {"file": (), "lancedb": ("table", "exact"), "qdrant": ("collection", "exact", "document_search"),
           "pgserver": ("table", "exact"), "postgresql": ("table", "exact"), "postgres": ("table", "exact")}


@dataclass
class StoreURI:
    scheme: str
    location: str  # a folder, HOST:PORT, or a PostgreSQL connection URI without our own options
    options: dict = field(default_factory=dict)


def is_store_uri(text: str) -> bool:
    """Whether `text` is a store URI rather than a path (a folder index is a store too, opened by its path).

    >>> is_store_uri("qdrant://localhost:6333"), is_store_uri("file:///srv/index"), is_store_uri("indexes/leases")
    (True, True, False)
    """
    return any(text.startswith(f"{scheme}://") for scheme in SCHEMES)


def parse_store_uri(uri: str) -> StoreURI:
    """Split a store URI into its scheme, location and options; a malformed one is a `ValueError` naming it.

    >>> parse_store_uri("lancedb:///srv/docs?table=leases")
    StoreURI(scheme='lancedb', location='/srv/docs', options={'table': 'leases'})
    >>> parse_store_uri("file:///srv/index").location
    '/srv/index'
    >>> parse_store_uri("qdrant://localhost:6333?exact=0").options
    {'exact': False}
    >>> parse_store_uri("postgresql://me:pw@db:5432/app?table=chunks&sslmode=require").location
    'postgresql://me:pw@db:5432/app?sslmode=require'
    """
    if not isinstance(uri, str) or not is_store_uri(uri):
        raise ValueError(f"a store URI starts with one of {[s + '://' for s in SCHEMES]}, got {uri!r}")
    scheme, rest = uri.split("://", 1)
    where, _, query = rest.partition("?")
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError as error:
        raise ValueError(f"cannot read the options of {uri!r}: {error}") from error
    ours = {k: v for k, v in pairs if k in OPTIONS[scheme]}
    if scheme not in ("postgresql", "postgres"):
        unknown = sorted({k for k, _ in pairs} - set(OPTIONS[scheme]))
        if unknown:
            raise ValueError(f"unknown option(s) {unknown} in {uri!r}: {scheme}:// takes {list(OPTIONS[scheme])}")
        if not where:
            raise ValueError(f"{uri!r} names no {'folder or HOST:PORT' if scheme == 'qdrant' else 'folder'}")
        location = where
        if scheme == "qdrant" and re.fullmatch(r"[A-Za-z0-9.-]+:[^/]*", where) and not re.fullmatch(r".+:\d+", where):
            raise ValueError(f"{uri!r}: a Qdrant server is qdrant://HOST:PORT with a numeric port (a local folder "
                             "has no colon: qdrant:///path/to/folder)")
    else:
        rest_query = urlencode([(k, v) for k, v in pairs if k not in ours])
        location = f"{scheme}://{where}" + (f"?{rest_query}" if rest_query else "")
        urlsplit(location)  # a malformed netloc raises here
    if "exact" in ours:
        if ours["exact"] not in ("0", "1", "true", "false"):
            raise ValueError(f"exact must be 0 or 1 in {uri!r}, got {ours['exact']!r}")
        ours["exact"] = ours["exact"] in ("1", "true")
    for name in ("table", "collection"):
        if name in ours and not ours[name]:
            raise ValueError(f"{name} is empty in {uri!r}")
    return StoreURI(scheme, location, ours)


def redact(uri: str) -> str:
    """The URI with any password replaced, for messages and result files.

    >>> redact("postgresql://me:secret@db:5432/app?table=t")
    'postgresql://me:***@db:5432/app?table=t'
    """
    return re.sub(r"^([a-z]+://[^:/@?]*):[^@/?]*@", r"\1:***@", uri)
