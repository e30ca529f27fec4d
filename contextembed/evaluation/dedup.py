"""Near-duplicate removal: MinHash-LSH on 5-gram token sets, candidates verified by exact Jaccard.

Q2D-Web removes documents whose 5-gram token sets have Jaccard similarity >= 0.975. LSH only proposes
candidate pairs; with datasketch's default banding for that threshold (2 bands x 64 rows at 128
permutations) a pair at J = 0.975 is proposed only about a third of the time. So the banding here is
chosen for recall (16 bands x 8 rows: a pair at J = 0.975 is proposed with probability ~1, at 0.8 with
0.95), and every candidate is confirmed with the exact Jaccard of the shingle sets. Tokens are
lower-cased whitespace-separated words.

Needs `datasketch` (`pip install 'contextembed[eval]'`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

NUM_PERM = 128
BANDS, ROWS = 16, 8


def shingles(text: str, n: int = 5) -> set[tuple[str, ...]]:
    """The set of n consecutive lower-cased words (the whole text if it is shorter than n words).

    >>> sorted(shingles("A b c d e F", n=5))
    [('a', 'b', 'c', 'd', 'e'), ('b', 'c', 'd', 'e', 'f')]
    """
    words = text.lower().split()
    if len(words) < n:
        return {tuple(words)} if words else set()
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def jaccard(a: set, b: set) -> float:
    """Jaccard similarity of two sets.

    >>> jaccard({1, 2, 3}, {2, 3, 4})
    0.5
    """
    return len(a & b) / len(a | b) if a or b else 1.0


def near_duplicate_groups(documents: Mapping[str, str], threshold: float = 0.975) -> list[list[str]]:
    """Groups (size >= 2) of documents linked by exact 5-gram Jaccard >= `threshold`, ids sorted."""
    try:
        from datasketch import MinHash, MinHashLSH
    except ImportError as error:
        raise ImportError("near-duplicate removal needs datasketch: pip install 'contextembed[eval]'") from error
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")

    sets = {doc_id: shingles(text) for doc_id, text in documents.items()}
    lsh = MinHashLSH(num_perm=NUM_PERM, params=(BANDS, ROWS))
    signatures = {}
    for doc_id, shingle_set in sets.items():
        signature = MinHash(num_perm=NUM_PERM, seed=1)
        signature.update_batch(" ".join(s).encode("utf-8") for s in shingle_set)
        signatures[doc_id] = signature
        lsh.insert(doc_id, signature)

    parent = {doc_id: doc_id for doc_id in documents}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for doc_id, signature in signatures.items():
        for other in lsh.query(signature):
            if other != doc_id and jaccard(sets[doc_id], sets[other]) >= threshold:
                parent[find(doc_id)] = find(other)
    groups: dict[str, list[str]] = {}
    for doc_id in documents:
        groups.setdefault(find(doc_id), []).append(doc_id)
    return sorted(sorted(g) for g in groups.values() if len(g) > 1)


def deduplicate(documents: Mapping[str, str], threshold: float = 0.975, prefer: Iterable[str] = ()) -> list[str]:
    """Ids to keep: one per near-duplicate group (a `prefer`red id such as a judged positive if the group has
    one, else the smallest id), and every document without a near duplicate."""
    prefer = set(prefer)
    dropped = set()
    for group in near_duplicate_groups(documents, threshold):
        keep = next((d for d in group if d in prefer), group[0])
        dropped.update(d for d in group if d != keep)
    return [d for d in documents if d not in dropped]
