"""Ray Data: embed a dataset whose rows are documents, on an actor pool, into one row per chunk.

    pip install "contextembed[ray]"

Each input row is one document: an `id` and either `chunks` (a list of strings, kept exactly) or `text` (raw
text, split by `chunker`). A document never straddles two batches, so every chunk sees its whole document.
Each output row is one chunk: `doc_id`, `chunk_index`, `start`, `end` (character offsets into `text`; null for
`chunks` rows), `text` and `embedding` (a fixed-size list of floats), ready for `write_parquet`.

    ds = ray.data.read_parquet("s3://bucket/documents/")            # columns: id, text
    embed_dataset(ds, chunker="sentences", num_actors=8).write_parquet("s3://bucket/chunk-vectors/")

On a cluster the same code runs after `ray.init(address="auto")` (or as a job submitted with `ray job submit`);
each actor loads the model once, so size `num_actors` to the workers' CPUs or GPUs (`num_gpus=1` per actor puts
each on its own GPU).
"""

from __future__ import annotations

import numpy as np

try:
    import pyarrow as pa
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError('the Ray Data integration needs ray[data] and pyarrow: pip install "contextembed[ray]"') from error

import contextembed
from contextembed.modeling import normalize_documents
from contextembed.mixing import check_local_mix

COLUMNS = ("doc_id", "chunk_index", "start", "end", "text", "embedding")


class ChunkEmbedder:
    """The callable class `map_batches` runs on each actor: loads the model once, embeds batches of documents.

    Ids must be unique: two rows with one id would give colliding `(doc_id, chunk_index)` keys, so a batch that
    holds an id twice is an error (rows of one id in different batches cannot be seen from one actor: deduplicate
    the dataset by id first if it may hold repeats).
    """

    def __init__(self, model: str = "", chunker=None, output_dim: int | None = None, device: str | None = None,
                 dtype: str | None = None, local_mix: float = 0.0):
        self.model = contextembed.load(model, device=device, dtype=dtype)
        self.chunker, self.output_dim = chunker, output_dim
        self.local_mix = check_local_mix(local_mix)  # encode_documents' local_mix (0: one pass)

    def __call__(self, batch: pa.Table) -> pa.Table:
        names = batch.column_names
        if "id" not in names or ("chunks" in names) == ("text" in names):
            raise ValueError(f"each row is one document: an 'id' and either 'chunks' or 'text' (got columns {names})")
        ids = batch.column("id").to_pylist()
        if any(i is None for i in ids):
            raise ValueError(f"document {ids.index(None)} of the batch has no id")
        seen: dict = {}
        for row, doc_id in enumerate(ids):
            if doc_id in seen:
                raise ValueError(f"rows {seen[doc_id]} and {row} of the batch share the id {doc_id!r}: their chunk "
                                 "rows would collide on (doc_id, chunk_index); give every document its own id")
            seen[doc_id] = row
        starts: list[int | None]
        if "chunks" in names:
            if self.chunker is not None:
                raise ValueError("rows with 'chunks' are already split: a chunker applies to 'text' rows only")
            documents = normalize_documents(batch.column("chunks").to_pylist(), "the 'chunks' column",
                                            strings="error")
            vectors = self.model.encode_documents(documents, output_dim=self.output_dim, local_mix=self.local_mix)
            texts = [chunk for chunks in documents for chunk in chunks]
            starts = ends = [None] * len(texts)
        else:
            if self.chunker is None:
                raise ValueError("rows with raw 'text' need a chunker (for example chunker='sentences')")
            results = self.model.encode_documents(batch.column("text").to_pylist(), chunker=self.chunker,
                                                    output_dim=self.output_dim, local_mix=self.local_mix)
            vectors = [r.embeddings for r in results]
            chunks = [c for r in results for c in r.chunks]
            texts, starts, ends = [c.text for c in chunks], [c.start for c in chunks], [c.end for c in chunks]
        counts = [len(v) for v in vectors]
        matrix = np.concatenate(vectors).astype(np.float32) if vectors else np.zeros((0, 1), np.float32)
        return pa.table({
            "doc_id": pa.array(np.repeat(np.array(ids, dtype=object), counts).tolist()),
            "chunk_index": pa.array([k for n in counts for k in range(n)], pa.int32()),
            "start": pa.array(starts, pa.int64()),
            "end": pa.array(ends, pa.int64()),
            "text": pa.array(texts, pa.string()),
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(matrix.ravel()), matrix.shape[1]),
        })


def embed_dataset(dataset, model: str = "", *, chunker=None, output_dim: int | None = None, num_actors: int = 2,
                  batch_size: int = 16, num_gpus: float = 0, dtype: str | None = None, local_mix: float = 0.0):
    """A lazy Ray `Dataset` of chunk rows (see the module docstring) from a dataset of document rows.

    `batch_size` counts documents per call; within a call the encoder batches by tokens. `local_mix` is
    `encode_documents`' (0: one pass).
    """
    check_local_mix(local_mix)  # before any actor starts
    from ray.data import ActorPoolStrategy

    return dataset.map_batches(
        ChunkEmbedder, fn_constructor_kwargs={"model": model, "chunker": chunker, "output_dim": output_dim,
                                              "device": "cuda" if num_gpus else None, "dtype": dtype,
                                              "local_mix": local_mix},
        compute=ActorPoolStrategy(size=num_actors), batch_size=batch_size, batch_format="pyarrow",
        num_gpus=num_gpus or None)
