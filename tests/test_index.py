"""An index is self-contained and written atomically: search reads only the index, never the source files."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import contextembed.index
from contextembed.cli import main
from contextembed.index import document_text, read_index, write_index


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


class TestSelfContained:
    def test_search_reads_no_source_file(self, setup, tmp_path, capsys):
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
        meta = json.loads((index / "index.json").read_text())
        meta.update(root="/", documents=[{"content_hash": "", "metadata": {"path": str(secret)}}] * 2)
        (index / "index.json").write_text(json.dumps(meta))
        records = [json.loads(line) for line in (index / "chunks.jsonl").read_text().splitlines()]
        for record in records:  # every document's id a path to the secret (ids stay distinct: one a document)
            record["path"] = str(secret) + "/.." * record["doc"]
        (index / "chunks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        assert "TOP-SECRET" not in search(index, model, capsys)

    def test_index_json_holds_no_machine_path(self, setup):
        _, corpus, index = setup
        assert str(corpus) not in (index / "index.json").read_text()
        assert str(corpus) not in (index / "chunks.jsonl").read_text()


class TestAtomicWrites:
    def test_an_index_is_replaced_only_with_overwrite(self, setup, tmp_path, capsys):
        model, corpus, index = setup
        other = write_corpus(tmp_path / "other")
        (other / "extra.txt").write_text("A third document about the table row.")
        assert main(["encode", str(other), str(index), "--model", model]) == 2
        assert read_index(index).meta["num_documents"] == 2
        assert main(["encode", str(other), str(index), "--model", model, "--overwrite", "--no-progress"]) == 0
        assert read_index(index).meta["num_documents"] == 3
        assert not [p for p in index.parent.iterdir() if p.name.startswith(".index.")]  # no staging left behind

    def test_a_crash_while_writing_keeps_the_old_index(self, setup, monkeypatch):
        _, _, index = setup
        old = read_index(index)

        def crash(*args, **kwargs):
            raise OSError("disk full")

        monkeypatch.setattr(contextembed.index.json, "dumps", crash)  # after embeddings.npy is written
        with pytest.raises(OSError, match="disk full"):
            write_index(index, old.embeddings[:1], old.chunks[:1], dict(old.meta), overwrite=True)
        again = read_index(index)
        assert np.array_equal(again.embeddings, old.embeddings) and again.chunks == old.chunks
        assert [p.name for p in index.parent.iterdir() if p.name.startswith(".")] == []


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


class TestInterruptedReplace:
    """A process that dies between write_index's two renames (old index aside, new one in) loses nothing."""

    KILL_BETWEEN_RENAMES = """
import os, pathlib, sys
import numpy as np
from contextembed.index import write_index

rename = pathlib.Path.rename
def dying_rename(self, target):
    moved = rename(self, target)
    if ".replaced-" in str(target):
        os._exit(9)  # the old index is aside, the new one not yet in place
    return moved
pathlib.Path.rename = dying_rename
record = {"doc": 0, "path": "b.txt", "chunk": 0, "start": 0, "end": 3, "text": "new"}
write_index(sys.argv[1], np.full((1, 4), 2, np.float32), [record], {"precision": "float32", "output_dim": 4},
            overwrite=True)
"""

    def test_the_old_index_is_restored_by_the_next_read(self, tmp_path):
        import subprocess
        import sys

        target = tmp_path / "index"
        old = [{"doc": 0, "path": "a.txt", "chunk": 0, "start": 0, "end": 3, "text": "old"}]
        write_index(target, np.ones((1, 4), np.float32), old, {"precision": "float32", "output_dim": 4})
        died = subprocess.run([sys.executable, "-c", self.KILL_BETWEEN_RENAMES, str(target)], capture_output=True)
        assert died.returncode == 9, died.stderr.decode()
        assert not target.exists() and len(list(tmp_path.glob(".index.replaced-*"))) == 1  # the state it left
        index = read_index(target)
        assert index.chunks[0]["text"] == "old" and np.array_equal(index.embeddings, np.ones((1, 4)))
        assert not list(tmp_path.glob(".index.replaced-*"))

    def test_encode_and_search_restore_it_too(self, setup, tmp_path, capsys):
        model, corpus, index = setup
        before = search(index, model, capsys)
        index.rename(tmp_path / ".index.replaced-dead0000")  # as a replace that died half way leaves it
        assert search(index, model, capsys) == before
        index.rename(tmp_path / ".index.replaced-dead0001")
        assert main(["encode", str(corpus), str(index), "--model", model, "--no-progress", "--overwrite"]) == 0
        assert search(index, model, capsys) == before and not list(tmp_path.glob(".index.replaced-*"))


def test_search_prints_control_characters_escaped(setup, capsys):
    """An index someone shares is data: its text and paths must not drive the reader's terminal."""
    model, corpus, index = setup
    lines = (index / "chunks.jsonl").read_text().splitlines()
    hostile = []
    for line in lines:
        record = json.loads(line)
        text = "\x1b]0;pwned\x07\x1b[2J" + record["text"][10:]
        hostile.append(json.dumps({**record, "path": record["path"] + "\x1b[31m", "text": text,
                                   "end": record["start"] + len(text)}))
    (index / "chunks.jsonl").write_text("\n".join(hostile) + "\n")
    out = search(index, model, capsys)
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in out and "\\x1b[31m" in out


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


def test_an_index_of_format_2_is_read_as_a_store(setup, capsys):
    """An index written before the index was a store: `documents` lists paths, no hashes, no metadata. It is
    searched as it was, opened as a store, and its documents are kept in order of id; an incremental encode
    into it (a file:// URI) embeds every document again, having no hash to compare."""
    from contextembed.stores import open_store

    model, corpus, index = setup
    before = search(index, model, capsys)
    meta = json.loads((index / "index.json").read_text())
    records = [json.loads(line) for line in (index / "chunks.jsonl").read_text().splitlines()]
    old = {**{k: meta[k] for k in ("model", "output_dim", "precision", "chunker", "num_documents", "num_chunks")},
           "format_version": 2, "int8_clip_sigmas": 5.0, "int8_scheme": "clip",
           "documents": [r["path"] for r in records if r["chunk"] == 0]}
    (index / "index.json").write_text(json.dumps(old))
    assert search(index, model, capsys) == before
    with open_store(index) as store:
        assert store.info.model == meta["model"] and store.count_chunks() == len(records)
        assert store.document_hashes() == {"company.txt": "", "lease.txt": ""}
        assert [d.id for d in store.fetch_documents(["lease.txt"])] == ["lease.txt"]
    capsys.readouterr()
    assert main(["encode", str(corpus), f"file://{index}", "--model", model, "--no-progress"]) == 0
    assert "added 0, replaced 2, deleted 0, kept 0" in capsys.readouterr().out
    assert json.loads((index / "index.json").read_text())["format_version"] == 3
    assert search(index, model, capsys) == before


def test_documents_of_an_old_index_are_searched_in_order_of_id(tmp_path):
    """Format 2 kept the corpus's path order, where `a/b.txt` came before `a-b.txt`; code points put `-` first. Two
    documents with the same vector tie, and the rule (the lower id first) decides, not the folder's row order."""
    from contextembed.stores import open_store

    records = [{"doc": 0, "path": "a/b.txt", "chunk": 0, "start": 0, "end": 4, "text": "rent"},
               {"doc": 1, "path": "a-b.txt", "chunk": 0, "start": 0, "end": 4, "text": "rent"},
               {"doc": 1, "path": "a-b.txt", "chunk": 1, "start": 5, "end": 8, "text": "due"}]
    vectors = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    write_index(tmp_path / "old", vectors, records, {"model": "m", "output_dim": 2, "precision": "float32"})
    meta = json.loads((tmp_path / "old" / "index.json").read_text())
    meta.update(format_version=2, documents=["a/b.txt", "a-b.txt"])
    (tmp_path / "old" / "index.json").write_text(json.dumps(meta))
    with open_store(tmp_path / "old") as store:
        hits = store.search_documents(np.array([1.0, 0.0], dtype=np.float32), k=2)
        assert [h.document for h in hits] == ["a-b.txt", "a/b.txt"]
        assert [d.id for d in store.fetch_documents(["a/b.txt", "a-b.txt"])] == ["a/b.txt", "a-b.txt"]
        assert [c.text for c in store.fetch_documents(["a-b.txt"])[0].chunks] == ["rent", "due"]
