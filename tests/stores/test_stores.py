"""Every store, in its real database: exact parity with `exact_search`, documents changed as units (replace,
delete, a writer killed part way), concurrent writers, filters and the errors a careless caller meets."""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest

from contextembed.chunking import Chunk
from contextembed.retrieval import exact_search
from contextembed.stores import DocumentVectors, StoreInfo, content_hash, open_store
from tests.stores.conftest import store_uri

DIM = 8


def document(doc_id: str, texts: list[str], seed: int, **metadata) -> DocumentVectors:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(len(texts), DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    chunks, start = [], 0
    for text in texts:
        chunks.append(Chunk(text, start, start + len(text)))
        start += len(text) + 1
    return DocumentVectors(doc_id, chunks, vectors, metadata, content_hash(" ".join(texts)))


@pytest.fixture
def store(kind, tmp_path, pg_folder):
    with open_store(store_uri(kind, tmp_path, pg_folder)) as opened:
        opened.ensure(StoreInfo("test", DIM))
        yield opened


def assert_same_ranking(ids_a, scores_a, ids_b, scores_b, tolerance=1e-5, exact=None):
    """Identical order, except that items whose scores are within `tolerance` may swap. With `exact` (every item's
    exact score), an item outside `ids_b` may stand where its score ties the one there: a tie at the cut-off
    (int8 scores are integers and tie often) lets either side keep either item."""
    assert len(ids_a) == len(ids_b)
    np.testing.assert_allclose(scores_a, scores_b, atol=tolerance)
    for a, b, score in zip(ids_a, ids_b, scores_b):
        if a != b:
            tied = [i for i, s in zip(ids_b, scores_b) if abs(s - score) <= tolerance]
            at_cut = exact is not None and a not in ids_b and abs(exact[a] - scores_b[-1]) <= tolerance
            assert a in tied or at_cut and abs(exact[a] - score) <= tolerance, (
                f"{a} ranks where {b} does, and their scores are not tied")


def test_a_tie_at_the_cut_off_may_bring_either_item_but_nothing_else():
    exact = {"a": 3.0, "b": 2.0, "c": 2.0, "d": 1.0}
    assert_same_ranking(["a", "c"], [3.0, 2.0], ["a", "b"], [3.0, 2.0], exact=exact)  # b and c tie at the cut
    with pytest.raises(AssertionError, match="not tied"):
        assert_same_ranking(["a", "d"], [3.0, 2.0], ["a", "b"], [3.0, 2.0], exact=exact)  # d scores 1, not 2
    with pytest.raises(AssertionError, match="not tied"):
        assert_same_ranking(["a", "c"], [3.0, 2.0], ["a", "b"], [3.0, 2.0])  # without exact scores, no outsider


# int8 codes: the index and Qdrant (LanceDB and pgvector keep float32 and refuse codes: test_stores_without_int8_say_so)
@pytest.mark.slow  # encodes the recipes set with the packaged model
@pytest.mark.parametrize("kind, precision", [("index", "float32"), ("lancedb", "float32"), ("qdrant", "float32"),
                                             ("pgserver", "float32"), ("index", "int8"), ("qdrant", "int8")])
def test_the_recipes_set_through_a_store_ranks_as_exact_search(kind, recipes, tmp_path, pg_folder, precision):
    vectors = recipes.vectors if precision == "float32" else recipes.codes
    queries = recipes.queries if precision == "float32" else recipes.query_codes
    with open_store(store_uri(kind, tmp_path, pg_folder)) as store:
        store.ensure(StoreInfo("default", 384, precision))
        store.add_documents(DocumentVectors(i, c, v) for i, c, v in zip(recipes.ids, recipes.chunks, vectors))
        flat = np.concatenate(vectors)
        doc_of_row = np.repeat(np.arange(len(vectors)), [len(v) for v in vectors])
        row_names = [(i, j) for i, v in zip(recipes.ids, vectors) for j in range(len(v))]
        found = exact_search(queries, flat, doc_of_row, top_k_documents=10, top_k_chunks=10, precision=precision)
        wide = np.int64 if precision == "int8" else np.float64
        for q, query in enumerate(queries):
            row_scores = flat.astype(wide) @ np.asarray(query).astype(wide)  # every chunk's exact score
            doc_scores = {i: float(row_scores[doc_of_row == d].max()) for d, i in enumerate(recipes.ids)}
            documents = store.search_documents(query, k=10)
            assert_same_ranking([h.document for h in documents], [h.score for h in documents],
                                [recipes.ids[d] for d in found.doc_ids[q]], found.doc_scores[q].astype(float),
                                exact=doc_scores)
            for hit in documents:  # each document's best chunk comes back with its text (any chunk tied for best)
                d = recipes.ids.index(hit.document)
                row = np.flatnonzero(doc_of_row == d)[hit.chunk.index]
                assert row_scores[row] >= doc_scores[hit.document] - (0 if precision == "int8" else 1e-5)
                assert hit.chunk.text == recipes.chunks[d][hit.chunk.index].text
            chunks = store.search_chunks(query, k=10)
            assert_same_ranking([(h.document, h.index) for h in chunks], [h.score for h in chunks],
                                [row_names[r] for r in found.chunk_rows[q]], found.chunk_scores[q].astype(float),
                                exact=dict(zip(row_names, row_scores.astype(float))))


@pytest.mark.slow
def test_qdrant_document_search_by_groups_and_by_multivector_maxsim_agree(recipes, tmp_path):
    pytest.importorskip("qdrant_client")
    results = {}
    for mode in ("groups", "multivector"):
        with open_store(f"qdrant://{tmp_path / mode}?document_search={mode}") as store:
            store.ensure(StoreInfo("default", 384))
            store.add_documents(DocumentVectors(i, c, v) for i, c, v in zip(recipes.ids, recipes.chunks,
                                                                           recipes.vectors))
            results[mode] = [[(h.document, h.chunk.index) for h in store.search_documents(q, k=10)]
                             for q in recipes.queries[:60]]
    assert results["groups"] == results["multivector"]


def test_replace_leaves_no_old_chunk_and_delete_leaves_nothing(store):
    store.add_documents([document("lease-a", ["old one", "old two", "old three"], 0),
                         document("lease-b", ["other"], 1)])
    new = document("lease-a", ["new one", "new two"], 2)
    store.replace([new])
    assert store.count_chunks("lease-a") == 2 and store.count_chunks() == 3
    for vector in new.vectors:  # the new chunks are found; no old text comes back, even at depth
        hits = store.search_chunks(vector, k=10)
        assert hits[0].text.startswith("new") and not any(h.text.startswith("old") for h in hits)
    assert store.document_hashes()["lease-a"] == new.content_hash
    assert store.document_hashes(["lease-a", "missing"]) == {"lease-a": new.content_hash}  # only the ids asked
    store.delete(["lease-a"])
    assert store.count_chunks("lease-a") == 0 and set(store.document_hashes()) == {"lease-b"}
    assert all(h.document == "lease-b" for h in store.search_chunks(new.vectors[0], k=10))


def test_search_documents_returns_the_best_chunk_with_offsets(store):
    a = document("a", ["alpha", "beta", "gamma"], 3)
    store.add_documents([a, document("b", ["delta"], 4)])
    (hit, *_) = store.search_documents(a.vectors[1], k=2)
    assert (hit.document, hit.chunk.index, hit.chunk.text) == ("a", 1, "beta")
    assert (hit.chunk.start, hit.chunk.end) == (6, 10) and hit.score == pytest.approx(1.0, abs=1e-5)


def test_metadata_filters(store):
    store.add_documents([document(f"d{i}", [f"text {i}"], i, lang=["en", "de"][i % 2], year=2020 + i % 3)
                         for i in range(12)])
    query = document("q", ["q"], 99).vectors[0]
    german = store.search_documents(query, k=12, where={"lang": "de"})
    assert {h.document for h in german} == {f"d{i}" for i in range(12) if i % 2}
    both = store.search_documents(query, k=12, where={"lang": ["en", "de"], "year": 2021})
    assert {h.document for h in both} == {f"d{i}" for i in range(12) if i % 3 == 1}
    assert store.search_chunks(query, k=5, where={"lang": "fr"}) == []


def test_concurrent_writers_of_different_documents_lose_nothing(kind, tmp_path, pg_folder):
    uri = store_uri(kind, tmp_path, pg_folder)
    with open_store(uri) as first:
        first.ensure(StoreInfo("test", DIM))
    shared = open_store(uri) if kind == "qdrant" else None  # local Qdrant: one client per folder, shared by threads
    errors = []

    def writer(w: int) -> None:
        try:
            store = shared or open_store(uri)
            for i in range(8):
                store.replace([document(f"w{w}-{i}", [f"chunk {k}" for k in range(1 + i % 3)], 10 * w + i)])
            if shared is None:
                store.close()
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    with shared or open_store(uri) as store:
        assert len(store.document_hashes()) == 32
        assert store.count_chunks() == 4 * sum(1 + i % 3 for i in range(8))


WRITER = """
import sys
import numpy as np
from contextembed.chunking import Chunk
from contextembed.stores import DocumentVectors, open_store

uri, mode = sys.argv[1], sys.argv[2]
store = open_store(uri)
if mode == "die-before-visible":  # Qdrant: new chunks written (hidden), old ones deleted, then the writer dies
    import os
    store.client.set_payload = lambda *a, **k: os._exit(9)
elif mode == "die-while-writing":  # Qdrant: the journal entry is written, the writer dies in the first chunk batch
    import os
    upsert, calls = store.client.upsert, []
    def dying(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            os._exit(9)
        return upsert(*args, **kwargs)
    store.client.upsert = dying
k = 1
while True:  # replace "lease" (stored as version A, 3 chunks) with B (5 chunks), A, B, ... until killed
    version, n = ("A", 3) if k % 2 == 0 else ("B", 5)
    chunks = [Chunk(f"{version}{i}", 3 * i, 3 * i + 2) for i in range(n)]
    store.replace([DocumentVectors("lease", chunks, np.full((n, 8), 0.1 + k % 7, np.float32), {}, version)])
    print(version, flush=True)
    k += 1
    if mode != "loop":
        break
"""


def versions_of(store) -> tuple[set[str], int]:
    """The versions the stored chunks of "lease" come from, and how many there are."""
    hits = store.search_chunks(np.ones(DIM, np.float32), k=20)
    lease = [h.text for h in hits if h.document == "lease"]
    return {t[0] for t in lease}, len(lease)


@pytest.mark.parametrize("delay", [1.3, pytest.param(0.4, marks=pytest.mark.slow),
                                   pytest.param(2.2, marks=pytest.mark.slow)])
def test_a_writer_killed_at_any_moment_leaves_each_document_before_or_after(kind, tmp_path, pg_folder, delay):
    uri = store_uri(kind, tmp_path, pg_folder)
    with open_store(uri) as store:
        store.ensure(StoreInfo("test", DIM))
        store.add_documents([document("other", ["kept"], 5)])
        store.replace([DocumentVectors("lease", [Chunk(f"A{i}", 3 * i, 3 * i + 2) for i in range(3)],
                                       np.full((3, DIM), 0.1, np.float32), {}, "A")])
    writer = subprocess.Popen([sys.executable, "-c", WRITER, uri, "loop"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "B", writer.stderr.read()  # it writes; kill it in a later write
        threading.Event().wait(delay)
        assert writer.poll() is None, writer.stderr.read()  # still writing when it is killed
    finally:
        writer.kill()
        writer.wait()
    assert writer.returncode == -9
    with open_store(uri) as store:
        letters, count = versions_of(store)
        assert (letters, count) in (({"A"}, 3), ({"B"}, 5)), (letters, count)
        assert store.count_chunks() == count + 1 and store.count_chunks("other") == 1


@pytest.mark.parametrize("mode, expected", [("die-before-visible", ({"B"}, 5)), ("die-while-writing", ({"A"}, 3))])
def test_qdrant_finishes_or_undoes_a_dead_writers_journal_entry(tmp_path, mode, expected):
    pytest.importorskip("qdrant_client")
    uri = f"qdrant://{tmp_path / 'q'}"
    with open_store(uri) as store:
        store.ensure(StoreInfo("test", DIM))
        store.replace([DocumentVectors("lease", [Chunk(f"A{i}", 3 * i, 3 * i + 2) for i in range(3)],
                                       np.full((3, DIM), 0.1, np.float32), {}, "A")])
    died = subprocess.run([sys.executable, "-c", WRITER, uri, mode], capture_output=True, text=True)
    assert died.returncode == 9, died.stderr
    with open_store(uri) as store:  # opening finishes (all new chunks present) or undoes (some missing) the write
        assert versions_of(store) == expected
        assert store.client.count(store.journal_name).count == 0


def test_int8_into_a_float_store_is_refused(store):
    codes = np.ones((1, DIM), np.int8)
    with pytest.raises(ValueError, match="int8 codes, but precision=.float32"):
        store.add_documents([DocumentVectors("a", [Chunk("x", 0, 1)], codes)])


@pytest.mark.parametrize("kind_only", ["lancedb", "pgserver"])
def test_stores_without_int8_say_so(kind_only, tmp_path, pg_folder):
    pytest.importorskip("lancedb" if kind_only == "lancedb" else "psycopg")
    with open_store(store_uri(kind_only, tmp_path, pg_folder)) as store:
        with pytest.raises(ValueError, match="keeps float32 vectors"):
            store.ensure(StoreInfo("test", DIM, "int8"))


def test_errors_name_the_problem(store):
    with pytest.raises(ValueError, match="have 4 dimensions, but the store holds 8-d vectors"):
        store.add_documents([DocumentVectors("a", [Chunk("x", 0, 1)], np.ones((1, 4), np.float32))])
    with pytest.raises(ValueError, match="2 chunks but vectors of shape"):
        store.add_documents([DocumentVectors("a", [Chunk("x", 0, 1), Chunk("y", 2, 3)], np.ones((1, DIM)))])
    with pytest.raises(ValueError, match="document id must be a non-empty string"):
        store.add_documents([DocumentVectors("", [Chunk("x", 0, 1)], np.ones((1, DIM), np.float32))])
    store.add_documents([document("a", ["x"], 0)])
    with pytest.raises(ValueError, match="already holds 1 of these documents"):
        store.add_documents([document("a", ["x"], 0)])
    with pytest.raises(ValueError, match="ids repeat in one write"):
        store.replace([document("b", ["x"], 0), document("b", ["y"], 1)])
    with pytest.raises(ValueError, match="holds dim=8 vectors, these are dim=16"):
        store.ensure(StoreInfo("test", 16))
    with pytest.raises(ValueError, match="metadata values are strings, numbers or booleans"):
        store.replace([document("c", ["x"], 0, tags=["a"])])
    with pytest.raises(ValueError, match="NaN or infinite"):
        store.replace([DocumentVectors("d", [Chunk("x", 0, 1)], np.full((1, DIM), np.nan, np.float32))])
    with pytest.raises(ValueError, match="k must be a positive integer"):
        store.search_documents(np.ones(DIM, np.float32), k=0)
    with pytest.raises(ValueError, match=r"where\['lang'\] must be"):
        store.search_chunks(np.ones(DIM, np.float32), where={"lang": []})
    with pytest.raises(ValueError, match="search takes one query vector"):
        store.search_chunks(np.ones((2, DIM), np.float32))


def test_a_store_with_no_vectors_says_so(kind, tmp_path, pg_folder):
    with open_store(store_uri(kind, tmp_path, pg_folder)) as store:
        with pytest.raises(ValueError, match="holds no vectors yet"):
            store.search_documents(np.ones(DIM, np.float32))
        assert store.document_hashes() == {} and store.count_chunks() == 0


def test_a_store_written_under_the_token_chunkers_former_name_takes_more_of_the_same(kind, tmp_path, pg_folder):
    """Stores written before TokenWindows became TokenChunks name the chunker by its former name; it is the same one."""
    with open_store(store_uri(kind, tmp_path, pg_folder)) as store:
        _check_former_chunker_name(store)


def _check_former_chunker_name(store):
    store.ensure(StoreInfo("test", DIM, chunker="TokenWindows(size=64, overlap=8)"))
    assert store.ensure(StoreInfo("test", DIM, chunker="TokenChunks(size=64, overlap=8)")).dim == DIM
    with pytest.raises(ValueError, match=r"holds chunker='TokenChunks\(size=64, overlap=8\)' vectors"):
        store.ensure(StoreInfo("test", DIM, chunker="TokenChunks(size=32, overlap=8)"))


def test_readers_of_the_own_index_never_see_half_a_write(tmp_path):
    """Readers search while writers commit: each read sees the index before or after a write, whole."""
    uri = f"file://{tmp_path / 'index'}"
    with open_store(uri) as first:
        first.ensure(StoreInfo("test", DIM))
        first.replace([document("seed", ["chunk"], 0)])
    errors, done = [], threading.Event()

    def writer(w: int) -> None:
        try:
            with open_store(uri) as store:
                for i in range(12):
                    store.replace([document(f"w{w}-{i}", [f"chunk {k}" for k in range(1 + i % 3)], 10 * w + i)])
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    def reader() -> None:
        try:
            with open_store(uri) as store:
                while not done.is_set():
                    store.search_documents(np.ones(DIM, np.float32), k=100)  # must not fail, nor read a mix
                    snapshot = store.snapshot()  # every segment it lists whole, its documents counted once
                    assert all(len(p.segment.vectors) == len(p.segment.chunks) for p in snapshot.parts)
                    assert snapshot.num_documents == len(snapshot.hashes())
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    writers = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for thread in readers + writers:
        thread.start()
    for thread in writers:
        thread.join()
    done.set()
    for thread in readers:
        thread.join()
    assert not errors
    with open_store(uri) as store:
        assert len(store.document_hashes()) == 1 + 3 * 12
