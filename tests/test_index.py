"""The index folder: self-contained (search reads only it), built to grow (a write costs what it adds, a crash leaves
the last manifest), compacted without losing a live document, and indexes of formats 2 and 3 read and upgraded."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from contextembed.chunking import Chunk
from contextembed.cli import main
from contextembed.index import MANIFEST, document_text
from contextembed.stores import DocumentVectors, StoreInfo, open_store
from contextembed.stores.index import IndexStore


def write_corpus(folder):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "lease.txt").write_text("The lease is for one year. Rent is two. She is the tenant.")
    (folder / "company.txt").write_text("The company owns the street. It pays the deposit.")
    return folder


@pytest.fixture
def setup(built, tmp_path):
    model = str(built["bert"][0])
    corpus = write_corpus(tmp_path / "corpus")
    index = tmp_path / "index"
    assert main(["encode", str(corpus), str(index), "--model", model, "--no-progress"]) == 0
    return model, corpus, index


def search(index, model, capsys, query="who is the tenant"):
    capsys.readouterr()
    assert main(["search", str(index), query, "--model", model]) == 0
    return capsys.readouterr().out


def random_document(doc_id: str, chunks: int, width: int, seed: int) -> DocumentVectors:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(chunks, width)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    texts = [f"sentence {k} of {doc_id}." for k in range(chunks)]
    starts = np.cumsum([0] + [len(t) + 1 for t in texts[:-1]])
    return DocumentVectors(doc_id, [Chunk(t, int(s), int(s) + len(t)) for t, s in zip(texts, starts)], vectors,
                           {"n": chunks}, f"hash-{doc_id}-{seed}")


def files(folder) -> dict:
    """Every file under `folder`: its (inode, size, modification time)."""
    return {p: (p.stat().st_ino, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}


def written(before: dict, after: dict) -> int:
    """Bytes of the files that are new or changed."""
    return sum(stat[1] for path, stat in after.items() if before.get(path) != stat)


class TestSelfContained:
    def test_search_reads_no_source_file(self, setup, capsys):
        model, corpus, index = setup
        before = search(index, model, capsys)
        shutil.rmtree(corpus)  # a moved or deleted corpus
        assert search(index, model, capsys) == before
        assert "«She is the tenant.»" in before

    def test_an_edited_source_file_does_not_change_what_search_shows(self, setup, capsys):
        model, corpus, index = setup
        before = search(index, model, capsys)
        (corpus / "lease.txt").write_text("Completely different text now, nothing like before at all.")
        assert search(index, model, capsys) == before

    def test_a_crafted_index_cannot_read_other_files(self, setup, tmp_path, capsys):
        model, _, index = setup
        secret = tmp_path / "secret.txt"
        secret.write_text("TOP-SECRET-CONTENT " * 20)
        for listing in index.glob("segments/*/documents.jsonl"):  # every document's id a path to the secret
            entries = [json.loads(line) for line in listing.read_text().splitlines()]
            ids = sorted(str(secret) + "/.." * i for i in range(len(entries)))
            listing.write_text("".join(json.dumps({**e, "id": i}) + "\n" for e, i in zip(entries, ids)))
        assert "TOP-SECRET" not in search(index, model, capsys)

    def test_the_index_holds_no_machine_path(self, setup):
        _, corpus, index = setup
        for path in index.rglob("*"):
            if path.is_file():
                assert str(corpus).encode() not in path.read_bytes(), path


class TestLayout:
    def test_a_manifest_and_segments_that_numpy_reads(self, setup):
        _, _, index = setup
        manifest = json.loads((index / MANIFEST).read_text())
        assert manifest["format_version"] == 4 and manifest["num_documents"] == 2
        (segment,) = manifest["segments"]
        folder = index / "segments" / segment["name"]
        vectors, chunks = np.load(folder / "vectors.npy"), np.load(folder / "chunks.npy")
        assert len(vectors) == len(chunks) == manifest["num_chunks"] == segment["chunks"]
        assert [json.loads(line)["id"] for line in (folder / "documents.jsonl").read_text().splitlines()] == \
            ["company.txt", "lease.txt"]

    def test_encoding_again_into_an_index_brings_it_in_step_and_overwrite_re_embeds(self, setup, tmp_path, capsys):
        model, corpus, index = setup
        (corpus / "extra.txt").write_text("A third document about the table row.")
        (corpus / "company.txt").unlink()
        capsys.readouterr()
        assert main(["encode", str(corpus), str(index), "--model", model, "--no-progress"]) == 0
        assert "added 1, replaced 0, deleted 1, kept 1" in capsys.readouterr().out
        assert main(["encode", str(corpus), str(index), "--model", model, "--no-progress", "--overwrite"]) == 0
        assert "added 2, replaced 0, deleted 0, kept 0" in capsys.readouterr().out
        with open_store(index) as store:
            assert sorted(store.document_hashes()) == ["extra.txt", "lease.txt"]
        other = tmp_path / "other"
        other.mkdir()
        (other / "README.md").write_text("mine")
        assert main(["encode", str(corpus), str(other), "--model", model]) == 2  # a folder of other things
        assert [p.name for p in other.iterdir()] == ["README.md"]


class TestGrowth:
    WIDTH = 256

    def grown(self, path, documents: int, per_commit: int) -> IndexStore:
        store = IndexStore(path)
        store.ensure(StoreInfo("test", self.WIDTH))
        for first in range(0, documents, per_commit):
            store.replace(random_document(f"d{i:06d}", 1 + i % 5, self.WIDTH, i)
                          for i in range(first, min(first + per_commit, documents)))
        return store

    def test_adding_documents_writes_about_what_is_added(self, tmp_path):
        """Adding 50 documents to an index of 100 or of 1,000 writes the same bytes: those 50 and a manifest."""
        costs = {}
        for size in (100, 1000):
            store = self.grown(tmp_path / str(size), size, per_commit=size)
            before = files(tmp_path / str(size))
            store.replace(random_document(f"new{i:03d}", 3, self.WIDTH, 10_000 + i) for i in range(50))
            costs[size] = written(before, files(tmp_path / str(size)))
        added = 50 * 3 * self.WIDTH * 4  # the vectors alone
        assert added < costs[100] < 1.2 * added and abs(costs[1000] - costs[100]) < 0.01 * added

    def test_replacing_marks_the_old_copy_dead_beside_it(self, tmp_path):
        store = self.grown(tmp_path / "index", 200, per_commit=200)
        before = files(tmp_path / "index")
        store.replace([random_document("d000007", 2, self.WIDTH, 99)])
        cost = written(before, files(tmp_path / "index"))
        assert cost < 2 * 2 * self.WIDTH * 4 + 2048  # its 2 new vectors, a deletion bitmap and the manifest
        assert store.count_documents() == 200 and store.count_chunks("d000007") == 2

    def test_segments_are_merged_as_they_accumulate(self, tmp_path):
        store = self.grown(tmp_path / "index", 300, per_commit=10)
        manifest = json.loads((tmp_path / "index" / MANIFEST).read_text())
        assert len(manifest["segments"]) < 10 and manifest["num_documents"] == 300
        assert len(list((tmp_path / "index" / "segments").iterdir())) == len(manifest["segments"])  # none left over
        assert store.count_chunks() == sum(1 + i % 5 for i in range(300))

    def test_compaction_keeps_every_live_document_and_drops_every_dead_one(self, tmp_path):
        rng = np.random.default_rng(3)
        oracle: dict[str, DocumentVectors] = {}
        store = IndexStore(tmp_path / "index")
        store.ensure(StoreInfo("test", self.WIDTH))
        for step in range(40):  # adds, replacements and deletions in random commits
            ids = [f"d{i:03d}" for i in rng.choice(120, size=6, replace=False)]
            batch = [random_document(i, int(rng.integers(1, 5)), self.WIDTH, step * 1000 + k)
                     for k, i in enumerate(ids[:4])]
            store.replace(batch)
            oracle.update({d.id: d for d in batch})
            store.delete(ids[4:])
            for gone in ids[4:]:
                oracle.pop(gone, None)
        query = random_document("q", 1, self.WIDTH, 7).vectors[0]
        ranked = [(h.document, h.score, h.chunk.index) for h in store.search_documents(query, k=20)]
        store.compact()
        manifest = json.loads((tmp_path / "index" / MANIFEST).read_text())
        assert len(manifest["segments"]) == 1 and manifest["segments"][0]["deleted"] is None
        assert manifest["segments"][0]["documents"] == len(oracle)  # nothing dead is kept
        reopened = IndexStore(tmp_path / "index")
        assert reopened.document_hashes() == {i: d.content_hash for i, d in oracle.items()}
        for document in reopened.fetch_documents(sorted(oracle)):
            expected = oracle[document.id]
            assert document.chunks == expected.chunks and np.array_equal(document.vectors, expected.vectors)
            assert document.metadata == expected.metadata
        assert [(h.document, h.score, h.chunk.index) for h in reopened.search_documents(query, k=20)] == ranked


KILLED_BEFORE_PUBLISHING = """
import os, sys
import numpy as np
import contextembed.index
from contextembed.chunking import Chunk
from contextembed.stores import DocumentVectors
from contextembed.stores.index import IndexStore

def die(*args):  # the segment's files are written; the manifest that would publish them is not
    os._exit(9)
contextembed.index.os.replace = die
store = IndexStore(sys.argv[1])
store.replace([DocumentVectors("new", [Chunk("new text", 0, 8)], np.ones((1, 8), np.float32), {}, "h")])
"""


def test_a_crash_between_a_segment_and_the_manifest_keeps_the_old_index(tmp_path):
    path = tmp_path / "index"
    with IndexStore(path) as store:
        store.ensure(StoreInfo("test", 8))
        store.replace([random_document("old", 2, 8, 1)])
    before = json.loads((path / MANIFEST).read_text())
    died = subprocess.run([sys.executable, "-c", KILLED_BEFORE_PUBLISHING, str(path)], capture_output=True)
    assert died.returncode == 9, died.stderr.decode()
    assert len(list((path / "segments").iterdir())) == 2  # the unpublished segment is on disk
    assert json.loads((path / MANIFEST).read_text()) == before
    with IndexStore(path) as store:
        assert store.document_hashes() == {"old": "hash-old-1"}
        store.replace([random_document("next", 1, 8, 2)])  # the next writer removes what nobody published
    names = {s["name"] for s in json.loads((path / MANIFEST).read_text())["segments"]}
    assert {p.name for p in (path / "segments").iterdir()} == names and not list(path.glob(".manifest.json.*"))


@pytest.mark.parametrize("precision", ["int8", "uint8", "binary", "ubinary"])
def test_code_indexes_are_searched_in_their_precision(setup, tmp_path, capsys, precision):
    model, corpus, _ = setup
    index = tmp_path / precision
    assert main(["encode", str(corpus), str(index), "--model", model, "--precision", precision,
                 "--no-progress"]) == 0
    out = search(index, model, capsys)
    assert out.count("chunk ") >= 2 and f"({precision}" in out


def test_document_text_rebuilds_offsets():
    records = [{"start": 4, "end": 8, "text": "rent"}, {"start": 10, "end": 13, "text": "due"}]
    assert document_text(records) == "    rent  due"


def test_search_prints_control_characters_escaped(built, tmp_path, capsys):
    """An index someone shares is data: its text and ids must not drive the reader's terminal."""
    model = contextembed_load(built)
    text = "\x1b]0;pwned\x07\x1b[2J the tenant pays."
    vectors = model.encode_documents([[text]])[0]
    with IndexStore(tmp_path / "index") as store:
        store.ensure(StoreInfo(str(built["bert"][0]), model.dim, chunker="sentences"))
        store.replace([DocumentVectors("lease\x1b[31m.txt", [Chunk(text, 0, len(text))], vectors)])
    out = search(tmp_path / "index", str(built["bert"][0]), capsys)
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in out and "\\x1b[31m" in out


def contextembed_load(built):
    import contextembed

    return contextembed.load(str(built["bert"][0]))


def test_search_json_is_one_ranked_object(setup, capsys):
    model, corpus, index = setup
    capsys.readouterr()
    assert main(["search", str(index), "who is the tenant", "--model", model, "--json", "--top-k", "2"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["query"] == "who is the tenant" and found["precision"] == "float32"
    assert len(found["documents"]) == 2
    scores = [d["score"] for d in found["documents"]]
    assert scores == sorted(scores, reverse=True)
    text = (corpus / found["documents"][0]["document"]).read_text()
    chunk = found["documents"][0]["chunk"]
    assert text[chunk["start"] : chunk["end"]] == chunk["text"] and isinstance(chunk["index"], int)
    assert main(["search", str(corpus), "who is the tenant", "--model", model, "--json", "--compare"]) == 2


def legacy_meta(info: StoreInfo) -> dict:
    """A store's info as releases before format 4 wrote it in index.json (the width as `output_dim`)."""
    return {"model": info.model, "output_dim": info.dim, "precision": info.precision, "chunker": info.chunker}


def write_legacy_index(folder, vectors, records, meta, version=3, documents=None):
    """An index as releases before format 4 wrote it: embeddings.npy, chunks.jsonl and index.json."""
    folder.mkdir(parents=True)
    np.save(folder / "embeddings.npy", vectors)
    (folder / "chunks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    count = max(r["doc"] for r in records) + 1
    if documents is None:
        documents = [{"content_hash": "", "metadata": {}}] * count if version == 3 else \
            [next(r["path"] for r in records if r["doc"] == d) for d in range(count)]
    (folder / "index.json").write_text(json.dumps({**meta, "format_version": version, "num_documents": count,
                                                   "num_chunks": len(records), "documents": documents}))


def legacy_copy(index, folder, version: int):
    """The documents of `index` written into `folder` as format `version` (2 or 3) wrote them: (folder, its chunk
    records, the store's info)."""
    with open_store(index) as store:
        documents = store.fetch_documents(sorted(store.document_hashes()))
        info = store.info
    records = [{"doc": d, "path": doc.id, "chunk": j, "start": c.start, "end": c.end, "text": c.text}
               for d, doc in enumerate(documents) for j, c in enumerate(doc.chunks)]
    meta = legacy_meta(info) if version == 3 else {**legacy_meta(info), "int8_clip_sigmas": 5.0, "int8_scheme": "clip"}
    listed = [{"content_hash": d.content_hash, "metadata": d.metadata} for d in documents] if version == 3 else None
    write_legacy_index(folder, np.concatenate([d.vectors for d in documents]), records, meta, version=version,
                       documents=listed)
    return folder, records, info


class TestFormerFormats:
    def test_format_3_is_searched_as_before_and_upgraded_by_its_first_write(self, setup, tmp_path, capsys):
        model, corpus, index = setup
        before = search(index, model, capsys)
        old, records, _ = legacy_copy(index, tmp_path / "old", version=3)
        assert search(old, model, capsys).replace(str(old), str(index)) == before
        capsys.readouterr()
        assert main(["encode", str(corpus), str(old), "--model", model, "--no-progress"]) == 0
        assert "added 0, replaced 0, deleted 0, kept 2" in capsys.readouterr().out  # its hashes are compared
        assert not (old / MANIFEST).exists()  # nothing written: nothing upgraded
        (corpus / "extra.txt").write_text("A third document about the table row.")
        assert main(["encode", str(corpus), str(old), "--model", model, "--no-progress"]) == 0
        assert "added 1, replaced 0, deleted 0, kept 2" in capsys.readouterr().out
        assert json.loads((old / MANIFEST).read_text())["format_version"] == 4
        assert sorted(p.name for p in old.iterdir()) == [MANIFEST, "segments"]  # the format 3 files are gone
        (corpus / "extra.txt").unlink()
        assert main(["encode", str(corpus), str(old), "--model", model, "--no-progress"]) == 0
        assert search(old, model, capsys).replace(str(old), str(index)) == before

    def test_format_2_has_no_hashes_so_an_encode_embeds_it_again(self, setup, tmp_path, capsys):
        model, corpus, index = setup
        old, records, info = legacy_copy(index, tmp_path / "old", version=2)
        with open_store(old) as store:
            assert store.info.model == info.model and store.count_chunks() == len(records)
            assert store.document_hashes() == {"company.txt": "", "lease.txt": ""}
        capsys.readouterr()
        assert main(["encode", str(corpus), f"file://{old}", "--model", model, "--no-progress"]) == 0
        assert "added 0, replaced 2, deleted 0, kept 0" in capsys.readouterr().out

    def test_documents_of_format_2_are_searched_in_order_of_id(self, tmp_path):
        """Format 2 kept the corpus's path order, where `a/b.txt` came before `a-b.txt`; code points put `-` first.
        Two documents with the same vector tie, and the rule (the lower id first) decides, not the row order."""
        records = [{"doc": 0, "path": "a/b.txt", "chunk": 0, "start": 0, "end": 4, "text": "rent"},
                   {"doc": 1, "path": "a-b.txt", "chunk": 0, "start": 0, "end": 4, "text": "rent"},
                   {"doc": 1, "path": "a-b.txt", "chunk": 1, "start": 5, "end": 8, "text": "due"}]
        vectors = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
        write_legacy_index(tmp_path / "old", vectors, records, {"model": "m", "output_dim": 2,
                                                                "precision": "float32"}, version=2)
        with open_store(tmp_path / "old") as store:
            hits = store.search_documents(np.array([1.0, 0.0], dtype=np.float32), k=2)
            assert [h.document for h in hits] == ["a-b.txt", "a/b.txt"]
            assert [d.id for d in store.fetch_documents(["a/b.txt", "a-b.txt"])] == ["a/b.txt", "a-b.txt"]
            assert [c.text for c in store.fetch_documents(["a-b.txt"])[0].chunks] == ["rent", "due"]

    def test_an_index_an_older_release_was_replacing_when_it_died_is_restored(self, setup, tmp_path, capsys):
        model, corpus, index = setup
        records = [{"doc": 0, "path": "a.txt", "chunk": 0, "start": 0, "end": 3, "text": "old"}]
        aside = tmp_path / ".legacy.replaced-dead0000"  # as a replace that died between its two renames left it
        write_legacy_index(aside, np.ones((1, 16), np.float32), records, {"model": "m", "output_dim": 16,
                                                                          "precision": "float32"})
        with open_store(tmp_path / "legacy") as store:
            assert store.document_hashes() == {"a.txt": ""}
        assert not aside.exists()


LEGACY_RECORDS = [{"doc": 0, "path": "a.txt", "chunk": 0, "start": 0, "end": 4, "text": "rent"},
                  {"doc": 0, "path": "a.txt", "chunk": 1, "start": 5, "end": 8, "text": "due"}]


@pytest.mark.parametrize(("damage", "message"), [
    (lambda f: (f / "chunks.jsonl").write_text('{"doc": 0\n'), r"chunks.jsonl:1: not valid JSON"),
    (lambda f: (f / "chunks.jsonl").write_text(json.dumps({**LEGACY_RECORDS[0], "text": 1}) + "\n"),
     r"chunks.jsonl:1: field 'text' must be str, got int"),
    (lambda f: (f / "chunks.jsonl").write_text(json.dumps({**LEGACY_RECORDS[0], "end": 99}) + "\n"),
     r"chunks.jsonl:1: start/end \(0, 99\)"),
    (lambda f: (f / "embeddings.npy").unlink(), "embeddings.npy is missing"),
    (lambda f: (f / "index.json").write_text(json.dumps({"format_version": 1})), "format_version must be 2 or 3"),
])
def test_a_damaged_index_of_an_earlier_format_is_named(tmp_path, damage, message):
    folder = tmp_path / "old"
    write_legacy_index(folder, np.ones((2, 4), np.float32), LEGACY_RECORDS, {"model": "m", "output_dim": 4,
                                                                             "precision": "float32"})
    damage(folder)
    with pytest.raises(ValueError, match=message):
        IndexStore(folder).document_hashes()
