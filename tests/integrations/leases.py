"""The six example leases: identical clauses, only the opening (address, tenant, dates, amounts) differs.

The integration tests ask "Who pays for electricity at <address>?" through each framework's own retriever and
check that it ranks the six copies of the electricity clause exactly as late chunking does when the same chunks are
encoded directly (`encode_documents`), with no tie, where the flat route (each chunk alone) ties them.
"""

from __future__ import annotations

from pathlib import Path

LEASES = Path(__file__).resolve().parents[2] / "examples" / "data" / "leases"
ADDRESSES = {"harbor-street": "14 Harbor Street", "elm-avenue": "27 Elm Avenue", "mill-lane": "3 Mill Lane",
             "ocean-drive": "88 Ocean Drive", "cedar-road": "140 Cedar Road", "station-square": "9 Station Square"}
QUESTION = "Who pays for electricity at {}?"
CLAUSE = "The Tenant pays for electricity"


def leases() -> dict[str, str]:
    """slug -> lease text, in a fixed order."""
    return {slug: (LEASES / f"lease-{slug}.txt").read_text(encoding="utf-8") for slug in ADDRESSES}


def clause_ranking(hits: list[tuple[str, str, float]]) -> list[tuple[str, float]]:
    """(lease slug, score) of the electricity clause's copies, best first, from a retriever's (slug, text, score)
    hits; exactly one copy per lease must be among them."""
    copies = [(slug, score) for slug, text, score in hits if CLAUSE in text]
    assert sorted(slug for slug, _ in copies) == sorted(ADDRESSES), copies
    return sorted(copies, key=lambda c: -c[1])


def direct_ranking(model, chunks: dict[str, list[str]], question: str) -> list[tuple[str, float]]:
    """The clause copies ranked from the same chunks encoded directly: each lease's chunks (in document order) as one
    document, and the query, through the contextembed API."""
    slugs = list(chunks)
    vectors = model.encode_documents([chunks[s] for s in slugs], empty_chunks="zero")
    query = model.encode_queries([question])[0]
    return sorted(((slug, float(v[next(i for i, c in enumerate(chunks[slug]) if CLAUSE in c)] @ query))
                   for slug, v in zip(slugs, vectors)), key=lambda c: -c[1])


def assert_contextual(ranking: list[tuple[str, float]], direct: list[tuple[str, float]]) -> None:
    """The framework's route ranks the copies as late chunking does, with the same scores, and tells them apart."""
    assert [slug for slug, _ in ranking] == [slug for slug, _ in direct], (ranking, direct)
    for (_, got), (_, want) in zip(ranking, direct):
        assert abs(got - want) < 1e-5, (ranking, direct)
    assert ranking[0][1] > ranking[1][1] + 1e-6, ranking


def assert_tie(ranking: list[tuple[str, float]]) -> None:
    """The flat route: six identical vectors, so six equal scores."""
    scores = [score for _, score in ranking]
    assert max(scores) - min(scores) < 1e-5, ranking
