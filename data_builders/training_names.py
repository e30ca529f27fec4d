"""Realistic names for the identities of training families: people, organisations, places, products, aliases.

Families built with invented syllable names ("Kalomer Group") teach a model to notice rare word pieces; real
documents name "Harbor & Finch", "Dr. Elena Park" or "firmware 4.0.1". `Names` draws such names from Faker
(several locales, so surnames and cities vary in shape) and mixes in invented ones, reproducibly: it is seeded from
the caller's `random.Random`, so a family is the same for the same seed (and the same Faker version, which the
training data's manifest records).
"""

from __future__ import annotations

import random
import re

try:
    from faker import Faker
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("the training families need Faker: pip install 'contextembed[train]'") from error

LOCALES = ("en_US", "en_GB", "en_IE", "en_AU", "en_IN", "de_DE", "fr_FR", "es_ES", "it_IT", "nl_NL", "sv_SE",
           "pl_PL")
SYLLABLES = ("ka", "lo", "mer", "vin", "dra", "sel", "tor", "bri", "nam", "qua", "rex", "fol", "gan", "pir", "zu",
             "hal", "ost", "len", "cor", "tia", "bel", "mun", "sar", "ved")
ORG_SUFFIXES = ("Ltd", "Group", "Systems", "Labs", "Foundation", "Institute", "Partners", "Works", "Logistics",
                "Analytics", "Insurance", "Foods", "Textiles", "Couriers", "Engineering", "Media", "Health", "Bank")
ORG_WORDS = ("Northwind", "Harbor", "Kestrel", "Bluewater", "Orchard", "Meridian", "Silverline", "Copperleaf",
             "Tidewater", "Larkspur", "Redfern", "Ashgrove", "Stonebridge", "Fairhaven", "Brightwell", "Oakmont",
             "Greyfield", "Westbrook", "Highmoor", "Clearwater", "Pinecrest", "Marlow", "Sable", "Juniper")
PRODUCT_WORDS = ("Orion", "Atlas", "Nova", "Vega", "Falcon", "Helix", "Summit", "Aurora", "Cobalt", "Zephyr",
                 "Titan", "Echo", "Pulse", "Quartz", "Lumen", "Nimbus", "Raven", "Sierra", "Vertex", "Onyx")
PRODUCT_KINDS = ("router", "printer", "thermostat", "camera", "scanner", "player", "tablet", "server", "app",
                 "library", "engine", "toolkit", "database", "editor")
NICK_ADJECTIVES = ("Blue", "Old", "Green", "Red", "Little", "Crooked", "Silver", "White", "Black", "Golden",
                   "Grey", "Tall", "Round", "Iron", "Stone")
NICK_NOUNS = ("House", "Mill", "Tower", "Door", "Anchor", "Lantern", "Barn", "Bridge", "Yard", "Gate", "Hall",
              "Shed", "Dock", "Bell", "Lodge")
GROUPS = ("contractors", "students", "seasonal staff", "volunteers", "drivers", "tenants", "retirees", "visitors",
          "apprentices", "night staff", "part-time staff", "new members", "suppliers", "landlords", "nurses",
          "teachers", "farmers", "pilots")

_FAKER: Faker | None = None


def _faker() -> Faker:
    global _FAKER
    if _FAKER is None:  # building the locales' providers takes a moment: once per process
        _FAKER = Faker(list(LOCALES))
        # it_IT lists its cities from a set, in an order that changes with PYTHONHASHSEED: sorted, the same seed
        # draws the same city in every process
        for provider in _FAKER["it_IT"].providers:
            if isinstance(getattr(provider, "cities", None), list):
                provider.cities = sorted(provider.cities)
    return _FAKER


def invented(rng: random.Random) -> str:
    """A made-up capitalised word of 2-3 syllables.

    >>> invented(random.Random(0))
    'Pirlonam'
    """
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()


def acronym(name: str) -> str | None:
    """The initials of a name of two or more capitalised words, else None.

    >>> acronym("Northwind Logistics Group"), acronym("Harbor & Finch"), acronym("Kestrel")
    ('NLG', 'HF', None)
    """
    words = [w for w in re.findall(r"[A-Za-z][\w'-]*", name) if w[0].isupper()]
    return "".join(w[0] for w in words) if len(words) >= 2 else None


class Names:
    """Names drawn for one family; `rng` seeds everything, so the same seed gives the same names."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.fake = _faker()
        self.fake.seed_instance(rng.getrandbits(32))

    def _clean(self, text: str) -> str:
        return " ".join(text.replace(",", "").split())

    def organisation(self) -> str:
        pick = self.rng.random()
        if pick < 0.4:
            return self._clean(self.fake.company())
        if pick < 0.8:
            first = self.rng.choice(ORG_WORDS + (self._clean(self.fake.last_name()),))
            return f"{first} {self.rng.choice(ORG_SUFFIXES)}"
        return f"{invented(self.rng)} {self.rng.choice(ORG_SUFFIXES)}"

    def person(self, gender: str) -> tuple[str, str]:
        """(full name, how a text refers to them later: a title and surname, or the surname alone)."""
        first = self.fake.first_name_female() if gender == "female" else self.fake.first_name_male()
        last = self._clean(self.fake.last_name())
        title = self.rng.choice(["", "", "Dr. ", "Prof. ", "Ms. " if gender == "female" else "Mr. "])
        return f"{title}{first} {last}", (f"{title}{last}" if title else last)

    def place(self) -> str:
        return self._clean(self.fake.city()) if self.rng.random() < 0.8 else invented(self.rng)

    def product(self) -> str:
        word = self.rng.choice(PRODUCT_WORDS + (invented(self.rng),))
        if self.rng.random() < 0.5:
            return f"{word} {self.rng.choice('XSMKR')}{self.rng.randint(1, 9)}"
        return f"{word} {self.rng.choice(PRODUCT_KINDS)}"

    def version(self, style: int) -> str:
        major, minor = self.rng.randint(1, 12), self.rng.randint(0, 19)
        return (f"{major}.{minor}", f"{major}.{minor}.{self.rng.randint(0, 9)}", f"v{major}.{minor}",
                f"{self.rng.randint(2015, 2030)}.{self.rng.randint(1, 4)}", f"release {major * 10 + minor}")[style]

    def nickname(self) -> str:
        return f"the {self.rng.choice(NICK_ADJECTIVES)} {self.rng.choice(NICK_NOUNS)}"

    def group(self) -> str:
        place = self.place()
        return self.rng.choice([f"{self.rng.choice(GROUPS)} in {place}", f"the {place} office",
                                f"members in {place}", f"residents of {place}", f"customers in {place}"])

    def distinct(self, make, n: int) -> list[str]:
        """`n` different values of `make()` (none a substring of another, so each names one copy only)."""
        values: list[str] = []
        for _ in range(200 * n):
            value = make()
            if not any(value in v or v in value for v in values):
                values.append(value)
                if len(values) == n:
                    return values
        raise ValueError(f"could not draw {n} distinct names")
