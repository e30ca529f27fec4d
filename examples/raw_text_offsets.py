"""Raw text in, chunk hits with character offsets out: show the best sentence in its context.

Pass a raw string and a chunker ("sentences", "paragraphs", "markdown", "tokens", or a callable);
each result carries its chunks' texts and their offsets into the original string.
"""

from __future__ import annotations

from pathlib import Path

import contextembed

LEASE = Path(__file__).parent / "data" / "leases" / "lease-mill-lane.txt"


def main() -> None:
    model = contextembed.load()
    text = LEASE.read_text(encoding="utf-8")
    (document,) = model.encode_documents([text], chunker="sentences")
    query = model.encode_queries(["How much is the late fee?"])
    scores = query[0] @ document.embeddings.T
    best = int(scores.argmax())
    chunk = document.chunks[best]
    assert text[chunk.start : chunk.end] == chunk.text
    print(f"best chunk {best} of {len(document.chunks)}, chars {chunk.start}-{chunk.end}, score {scores[best]:.4f}")
    print("..." + text[max(0, chunk.start - 60) : chunk.start] + "[" + chunk.text + "]"
          + text[chunk.end : chunk.end + 60] + "...")


if __name__ == "__main__":
    main()
