"""contextembed.corpus: documents read from a file or a folder of .txt/.md files, and each distinct document
encoded once."""

from __future__ import annotations

import numpy as np
import pytest

from contextembed.corpus import encode_once, read_corpus


def test_files_that_are_not_text_are_skipped_with_a_word(tmp_path, caplog):
    from contextembed.corpus import read_corpus

    (tmp_path / "lease.txt").write_text("The rent is due.")
    (tmp_path / "scan.pdf").write_bytes(b"%PDF-1.7 ...")
    (tmp_path / ".DS_Store").write_bytes(b"\x00")
    with caplog.at_level("WARNING"):
        _, documents = read_corpus(tmp_path)
    assert [d.path for d in documents] == ["lease.txt"]
    assert "skipped 1 file(s) that are not .txt/.md (.pdf; e.g. scan.pdf)" in caplog.text
    assert "convert other formats (such as PDF)" in caplog.text


def test_a_folder_is_read_in_order_of_path_and_a_file_alone(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "lease.md").write_text("# Lease\nRent is due.", encoding="utf-8")
    (tmp_path / "a.txt").write_text("The tenant pays.", encoding="utf-8")
    (tmp_path / "empty.txt").write_text("  \n", encoding="utf-8")
    root, documents = read_corpus(tmp_path)
    assert root == tmp_path and [d.path for d in documents] == ["a.txt", "b/lease.md"]  # the empty file skipped
    assert documents[1].text == "# Lease\nRent is due."
    root, (only,) = read_corpus(tmp_path / "a.txt")
    assert root == tmp_path and only.path == "a.txt"


@pytest.mark.parametrize(("make", "message"), [
    (lambda d: d, "no .txt/.md files under"),
    (lambda d: (d / "x.txt").write_text(" ") and d, "every file under .* is empty"),
    (lambda d: d / "missing", "does not exist"),
    (lambda d: (d / "bad.txt").write_bytes(b"caf\xe9") and d, "cannot read .*bad.txt.* as UTF-8"),
])
def test_a_corpus_that_cannot_be_read_is_named(tmp_path, make, message):
    with pytest.raises(ValueError, match=message):
        read_corpus(make(tmp_path))


class Recording:
    """Encodes a chunk as [its length, its first letter]; writes down what it was asked to encode."""

    def __init__(self):
        self.calls = []

    def encode_documents(self, documents, **options):
        self.calls.append((documents, options))
        return [np.array([[len(c), ord(c[0])] for c in d], dtype=np.float32) for d in documents]


def test_each_distinct_document_is_encoded_once_and_copies_share_its_vectors():
    model = Recording()
    documents = [["rent", "due"], ["pets"], ["rent", "due"], ["pets"], ["rent"]]
    vectors = encode_once(model, documents, batch_size=4)
    assert model.calls == [([["rent", "due"], ["pets"], ["rent"]], {"batch_size": 4})]
    assert vectors.shape == (7, 2)
    assert np.array_equal(vectors[:2], vectors[3:5]) and np.array_equal(vectors[2], vectors[5])


def test_a_title_makes_a_document_distinct():
    model = Recording()
    encode_once(model, [["rent"], ["rent"], ["rent"]], titles=["Lease A", "Lease B", "Lease A"])
    ((documents, options),) = model.calls
    assert documents == [["rent"], ["rent"]] and options == {"titles": ["Lease A", "Lease B"]}
