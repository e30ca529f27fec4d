"""Keep a store in step with a corpus, as a stream: embed only what changed, by document id and content hash, and
commit as it goes.

`sync_corpus` reads the corpus once, document by document: a document the store holds with the same content hash is
kept without being embedded again, a new one is added, a changed one replaced; documents the store holds that the
corpus no longer has are deleted once the whole corpus has been read. Documents are embedded and written in commit
batches (bounded by documents and by tokens), each its own unit of work, while the next batch is prepared beside
the model; the texts and vectors of a committed batch are dropped. An interrupted run (`stop` set, Ctrl-C, SIGTERM, a
crash) keeps every batch it committed, and the same call later embeds only the rest, ending in the same store as a
run that never stopped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from contextembed.choices import COMMIT_TOKENS
from contextembed.corpus import Document
from contextembed.pipeline import CorpusEncoder, commit_batches
from contextembed.prefetch import prefetched
from contextembed.stores.base import DocumentVectors, StoreInfo, VectorStore



@dataclass
class SyncReport:
    """What a sync did.

    >>> print(SyncReport(added=2, kept=5, chunks_written=40))
    added 2, replaced 0, deleted 0, kept 5 documents (40 chunk vectors written)
    """

    added: int = 0
    replaced: int = 0
    deleted: int = 0
    kept: int = 0
    chunks_written: int = 0
    tokens: int = 0  # tokens embedded
    interrupted: bool = False  # stopped before the corpus was read to its end (nothing deleted then)

    @property
    def committed(self) -> int:
        """Documents embedded and committed by this run."""
        return self.added + self.replaced

    def __str__(self) -> str:
        return (f"added {self.added}, replaced {self.replaced}, deleted {self.deleted}, kept {self.kept} documents "
                f"({self.chunks_written} chunk vectors written)")


def sync_corpus(store: VectorStore, documents: Iterable[Document], info: StoreInfo, encoder: CorpusEncoder, *,
                commit_documents: int | None = None, commit_tokens: int = COMMIT_TOKENS, total: int | None = None,
                progress: bool = False, stop: threading.Event | None = None) -> SyncReport:
    """Bring `store` in step with `documents` (`contextembed.corpus.Document`s, read as a stream).

    Args:
        encoder: prepares and embeds documents (`CorpusEncoder`: the model, chunker, width and precision).
        commit_documents / commit_tokens: most documents and tokens per commit (default documents: the store's
            `batch_documents`).
        total: how many documents the corpus holds, for the progress bar's ETA (None: unknown).
        progress: show one bar over the whole corpus (documents/s, tokens/s, ETA).
        stop: set it (from a signal handler, another thread) to stop after the batch in flight is committed; the
            report then says `interrupted`, and nothing is deleted.
    """
    store.ensure(info)
    stored = store.document_hashes()
    todo = _Changed(documents, stored)
    report = SyncReport()
    bar = Progress(total, progress)
    batches = prefetched(commit_batches(encoder.prepare, iter(todo), commit_documents or store.batch_documents or 1000,
                                        commit_tokens))
    try:
        for batch in batches:
            vectors = encoder.embed(batch)
            written = [DocumentVectors(p.document.id, p.chunks, v, p.document.metadata, p.document.content_hash)
                       for p, v in zip(batch, vectors)]
            new = [d for d in written if d.id not in stored]  # added as they are: no old chunks to find and drop
            changed = [d for d in written if d.id in stored]
            report.chunks_written += (store.add_documents(new, known_new=True) if new else 0) + (
                store.replace(changed) if changed else 0)
            report.added += len(new)
            report.replaced += len(changed)
            report.tokens += sum(p.tokens for p in batch)
            bar.advance(todo.kept + report.committed, report.tokens)
            if stop is not None and stop.is_set():
                report.kept, report.interrupted = todo.kept, True
                return report
        report.kept = todo.kept
        bar.advance(todo.kept + report.committed, report.tokens)
    finally:
        batches.close()
        bar.close()
    gone = [i for i in stored if i not in todo.seen]
    store.delete(gone)
    report.deleted = len(gone)
    return report


class _Changed:
    """The documents of a stream that the store does not hold as they are; counts those it keeps, and remembers every
    id read (what is left over in the store at the end was deleted from the corpus)."""

    def __init__(self, documents: Iterable[Document], stored: dict[str, str]):
        self.documents, self.stored = documents, stored
        self.seen: set[str] = set()
        self.kept = 0

    def __iter__(self):
        for document in self.documents:
            if document.id in self.seen:
                raise ValueError(f"two documents of the corpus have the id {document.id!r}")
            self.seen.add(document.id)
            if self.stored.get(document.id) == document.content_hash:
                self.kept += 1
                continue
            yield document


class Progress:
    """One bar over the whole corpus: documents done (kept or committed), documents/s, tokens/s and the ETA."""

    def __init__(self, total: int | None, show: bool):
        self.bar, self.start = None, time.monotonic()
        if show:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc="Encoding", unit="doc", smoothing=0.1)

    def advance(self, done: int, tokens: int) -> None:
        if self.bar is not None:
            self.bar.update(done - self.bar.n)
            self.bar.set_postfix_str(f"{tokens / max(time.monotonic() - self.start, 1e-9):,.0f} tokens/s",
                                     refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
