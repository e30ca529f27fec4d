"""The six example leases: identical clauses, only the opening (address, tenant, dates, amounts) differs.

The integration tests ask "Who pays for electricity at <address>?" through each framework's own retriever and
check that the asked lease's copy of the electricity clause outranks the five other copies (no tie).
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


def assert_contextual(ranking: list[tuple[str, float]], slug: str) -> None:
    """The asked lease's copy comes first, strictly above the next copy."""
    assert ranking[0][0] == slug, ranking
    assert ranking[0][1] > ranking[1][1] + 1e-6, ranking


def assert_tie(ranking: list[tuple[str, float]]) -> None:
    """The flat route: six identical vectors, so six equal scores."""
    scores = [score for _, score in ranking]
    assert max(scores) - min(scores) < 1e-5, ranking
