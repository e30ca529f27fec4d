"""The batches of a run: which documents each step sees (`PlannedBatches`) and how they become model inputs and
teacher targets (`BatchCollator`). Both are seeded per batch, so a resumed run sees the same batches.
"""

from __future__ import annotations

import random

import numpy as np
import torch

from contextembed.training.config import TrainConfig
from contextembed.training.data import (
    TRAINING_CHUNKERS,
    TOKEN_WINDOW_SIZES,
    TrainingDocument,
    chunk_document,
    family_batches,
    word_labels,
)
from contextembed.training.losses import chunk_relevance


class PlannedBatches(torch.utils.data.Dataset):
    """Step i's batch: document indices of one family, and a seed for its chunking and queries."""

    def __init__(self, documents: list[TrainingDocument], config: TrainConfig):
        keys = [(d.source, d.family.split("/", 1)[0]) for d in documents]  # a source, or a family's generator
        sources, generators = {s for s, _ in keys}, {g for _, g in keys}
        unknown = sorted(set(config.data.source_repeats) - sources - generators)
        if unknown:
            raise ValueError(f"source_repeats names sources {unknown} that no training document has "
                             f"(sources: {sorted(sources)}; family generators: {sorted(generators - sources)})")
        repeated = {key: [i for i, d in enumerate(documents) if key in keys[i]] for key in config.data.source_repeats}
        self.batches: list[list[int]] = []
        epoch = 0
        while len(self.batches) < config.schedule.max_steps:
            seed = config.seed * 1000 + epoch
            batches = family_batches(documents, config.data.batch_size, seed=seed)
            if not batches:  # every epoch would be as empty: refuse instead of looping forever
                raise ValueError(
                    f"no batch can be formed from {len(documents)} training documents: a batch holds documents of "
                    f"one family (the others are its negatives), and no family has 2 or more documents (families: "
                    f"{len({d.family for d in documents})})")
            for source, members in repeated.items():  # extra passes over one source, reshuffled
                subset = [documents[i] for i in members]
                for k in range(1, config.data.source_repeats[source]):
                    batches += [[members[j] for j in b] for b in family_batches(subset, config.data.batch_size, seed + k)]
            random.Random(seed).shuffle(batches)
            self.batches += batches
            epoch += 1
        self.seed = config.seed

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, index: int) -> dict:
        return {"documents": self.batches[index], "seed": self.seed * 1_000_003 + index}


class BatchCollator:
    """Turns one planned batch (document indices) into model inputs and teacher targets.

    One chunker is drawn per batch; each document contributes one of its queries. Randomness comes
    from the batch's own seed, so a resumed run sees the same batches.
    """

    def __init__(self, documents: list[TrainingDocument], processor, config: TrainConfig):
        self.documents, self.processor, self.config = documents, processor, config
        names = [n for n in TRAINING_CHUNKERS if config.data.chunking_weights.get(n, 0) > 0]
        self.chunkers, self.weights = names, [config.data.chunking_weights[n] for n in names]

    def __call__(self, items: list[dict]) -> dict:
        (item,) = items
        rng = random.Random(item["seed"])
        chunker = rng.choices(self.chunkers, self.weights)[0]
        window = rng.choice(TOKEN_WINDOW_SIZES)
        docs = [self.documents[i] for i in item["documents"]]
        chunk_lists = [chunk_document(d, chunker, self.processor.tokenizer, window, rng) for d in docs]
        queries = [rng.choice(d.queries) for d in docs]
        documents = self.processor([[c.text for c in chunks] for chunks in chunk_lists], task="document")
        query_inputs = self.processor([q.text for q in queries], task="query")
        num_chunks = documents["attention_mask"].shape[1]
        owners = [self._word_owners(d, q, chunks) for d, q, chunks in zip(docs, queries, chunk_lists)]
        relevance = torch.stack([chunk_relevance(torch.tensor(labels[:, 2], dtype=torch.float32),
                                                 torch.from_numpy(owner), num_chunks, self.config.losses.top_n)
                                 for labels, owner in owners])
        batch = {"documents": dict(documents), "queries": dict(query_inputs),
                 "positives": torch.arange(len(docs)), "relevance": relevance}
        if self.config.data.window_head_choices:
            batch["window_head_tokens"] = rng.choice(self.config.data.window_head_choices)
        if self.config.losses.mix_weight > 0:  # every chunk by itself, in document order: L_mix's teacher reads them alone
            batch["alone"] = dict(self.processor([[c.text] for chunks in chunk_lists for c in chunks],
                                                 task="document"))
        if self.config.losses.keep_weight > 0:
            batch["plain"] = dict(self.processor([[_opening(d, self.config.losses.keep_chars)] for d in docs],
                                                 task="document"))
        return batch

    def _word_owners(self, document, query, chunks) -> tuple[np.ndarray, np.ndarray]:
        """The query's word labels, (W, 3) rows of (start, end, score), and each word's chunk, (W,) (-1: none)."""
        labels = np.array(word_labels(document.text, query, self.config.losses.evidence_weight)).reshape(-1, 3)
        starts = np.array([c.start for c in chunks])
        ends = np.array([c.end for c in chunks])
        # Chunks are in document order: a word belongs to the last chunk starting at or before it, if it fits.
        owner = np.searchsorted(starts, labels[:, 0], side="right") - 1
        inside = (owner >= 0) & (labels[:, 1] <= ends[owner.clip(min=0)])
        return labels, np.where(inside, owner, -1)


def _opening(document: TrainingDocument, max_chars: int) -> str:
    """The document's first sentences, up to `max_chars` characters (at least its first sentence)."""
    end = document.sentences[0][1]
    for _, sentence_end in document.sentences[1:]:
        if sentence_end > max_chars:
            break
        end = sentence_end
    return document.text[:end]
