"""How often does the default model (and its untrained baseline) put the right lease's clause first among
identical clauses?

Six leases share every clause word for word; only the address, tenant, dates and amounts at the
top differ. For 5 clauses x 6 addresses we ask "<clause question> at <address>?" and check
whether the asked lease's copy of the clause scores highest among the six copies. Encoded alone,
the six copies are identical (a six-way tie: 1 in 6 by chance). With late chunking each copy has
seen its own lease. We also measure smaller windows with the lease's opening carried into every
window (`window_head_tokens`).
"""

from __future__ import annotations

from pathlib import Path

import contextembed
from contextembed.corpus import read_corpus
from contextembed.default_model import BASELINE_MODEL_NAME

LEASES = Path(__file__).parent / "data" / "leases"
ADDRESSES = {"harbor-street": "14 Harbor Street", "elm-avenue": "27 Elm Avenue", "mill-lane": "3 Mill Lane",
             "ocean-drive": "88 Ocean Drive", "cedar-road": "140 Cedar Road", "station-square": "9 Station Square"}
QUESTIONS = [
    ("Are pets allowed in the apartment at {}?", "No pets are allowed"),
    ("What is the late fee for the apartment at {}?", "A late fee of fifty dollars"),
    ("Who pays for electricity at {}?", "The Tenant pays for electricity"),
    ("When can the landlord enter the apartment at {}?", "The Landlord may enter"),
    ("How many parking spaces does {} have?", "One parking space"),
]
SETTINGS = [(512, 0), (256, 0), (256, 48), (128, 48)]  # (tokens per window, opening tokens carried)


def hits(model, documents) -> int:
    results = model.encode_documents([d.text for d in documents], chunker="sentences")
    count = 0
    for question, clause in QUESTIONS:
        copies = [next(v for c, v in zip(r.chunks, r.embeddings) if clause in c.text) for r in results]
        for slug, address in ADDRESSES.items():
            query = model.encode_queries([question.format(address)])[0]
            scores = [float(query @ v) for v in copies]
            best = max(range(len(scores)), key=scores.__getitem__)
            count += documents[best].id == f"lease-{slug}.txt"
    return count


def main() -> None:
    documents = list(read_corpus(LEASES))
    total = len(QUESTIONS) * len(ADDRESSES)
    print(f"chunks encoded alone: six identical copies, a six-way tie ({total / 6:.0f}/{total} expected by chance)")
    for name, label in ((None, "default model"), (BASELINE_MODEL_NAME, "untrained baseline")):
        model = contextembed.load(name)
        for window, head in SETTINGS:
            model.config.max_seq_length, model.config.window_head_tokens = window, head
            print(f"{label}, late chunking, {window}-token windows, {head} opening tokens carried: "
                  f"{hits(model, documents)}/{total} right clause first")


if __name__ == "__main__":
    main()
