"""Use a contextembed checkpoint through sentence-transformers, with trust_remote_code=False.

`import contextembed` registers the model and processor with transformers; the checkpoint itself
lists only built-in sentence-transformers modules. `as_chunked` turns list-of-chunks documents
into the form sentence-transformers passes through untouched.
"""

from __future__ import annotations

import contextembed  # registers the model: required before loading
from contextembed.default_model import default_model_path
from sentence_transformers import SentenceTransformer


def main() -> None:
    model = SentenceTransformer(str(default_model_path()), trust_remote_code=False, device="cpu")
    docs = [["The lease is for 3 Mill Lane.", "A late fee of fifty dollars is charged.", "Signed by both parties."],
            ["Quiet hours start at ten."]]
    chunk_vectors = model.encode_document(contextembed.as_chunked(docs), output_value="token_embeddings")
    print("chunk vectors per document:", [tuple(v.shape) for v in chunk_vectors])
    query = model.encode_query(["late fee at Mill Lane"])
    print("query:", query.shape, "scores:", [round(float(s), 4) for s in (chunk_vectors[0].cpu().numpy() @ query[0])])


if __name__ == "__main__":
    main()
