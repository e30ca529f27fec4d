"""Quickstart: embed documents as lists of chunks, embed a query, rank documents by their best chunk.

Late chunking embeds every chunk with its whole document in view, so two identical sentences in
two different leases get different vectors: each carries the address its own lease names.
"""

from __future__ import annotations

import contextembed


def main() -> None:
    model = contextembed.load()  # the default model (all-MiniLM-L6-v2 wrapped for late chunking)
    documents = [
        ["This lease is for the apartment at 14 Harbor Street.", "The tenant is Ana Ruiz.",
         "No pets are allowed without written consent."],
        ["This lease is for the apartment at 88 Ocean Drive.", "The tenant is Marcus Bell.",
         "No pets are allowed without written consent."],
    ]
    chunk_vectors = model.encode_documents(documents)  # one (n_chunks, 384) array per document
    queries = model.encode_queries(["Are pets allowed at 88 Ocean Drive?"])
    scores = contextembed.maxsim(queries, chunk_vectors)  # (n_queries, n_documents)
    for doc, score in zip(documents, scores[0]):
        print(f"{score:.4f}  {doc[0]}")
    pet_clause = [float(queries[0] @ vectors[2]) for vectors in chunk_vectors]
    print("the identical pet clause scores", " vs ".join(f"{s:.4f}" for s in pet_clause), "in the two leases")


if __name__ == "__main__":
    main()
