"""contextembed.corpus: a corpus read as a stream (a folder of .txt/.md files, JSON lines, Parquet), every bad record
named by its file and line; and each distinct document encoded once."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from contextembed.corpus import Document, encode_once, read_corpus


def write_jsonl(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


class TestFolders:
    def test_files_that_are_not_text_are_skipped_with_a_word(self, tmp_path, caplog):
        (tmp_path / "lease.txt").write_text("The rent is due.")
        (tmp_path / "scan.pdf").write_bytes(b"%PDF-1.7 ...")
        (tmp_path / ".DS_Store").write_bytes(b"\x00")
        with caplog.at_level("WARNING"):
            documents = list(read_corpus(tmp_path))
        assert [d.id for d in documents] == ["lease.txt"]
        assert "skipped 1 file(s) that are not .txt/.md (.pdf; e.g. scan.pdf)" in caplog.text
        assert "convert other formats (such as PDF)" in caplog.text

    def test_a_folder_is_read_in_order_of_path_and_a_file_alone(self, tmp_path, caplog):
        (tmp_path / "b").mkdir()
        (tmp_path / "b" / "lease.md").write_text("# Lease\nRent is due.", encoding="utf-8")
        (tmp_path / "a.txt").write_text("The tenant pays.", encoding="utf-8")
        (tmp_path / "empty.txt").write_text("  \n", encoding="utf-8")
        corpus = read_corpus(tmp_path)
        with caplog.at_level("WARNING"):
            documents = list(corpus)
        assert [d.id for d in documents] == ["a.txt", "b/lease.md"]  # the empty file skipped, with a word
        assert "skipped 1 empty document(s)" in caplog.text and "empty.txt" in caplog.text
        assert documents[1].text == "# Lease\nRent is due." and documents[1].metadata == {"path": "b/lease.md"}
        assert corpus.count() == 3
        (only,) = read_corpus(tmp_path / "a.txt")
        assert only.id == "a.txt"

    @pytest.mark.parametrize(("make", "message"), [
        (lambda d: d, "no .txt/.md files"),
        (lambda d: d / "missing", "does not exist"),
        (lambda d: (d / "notes.json").write_text("{}") and d / "notes.json", "a corpus is JSON lines"),
        (lambda d: (d / "corpus.jsonl").write_text("{}") and (d / "queries.jsonl").write_text("{}") and d,
         r"holds JSON-lines files \(corpus.jsonl, queries.jsonl\): pass the corpus file itself"),
    ])
    def test_a_path_that_is_no_corpus_is_named(self, tmp_path, make, message):
        with pytest.raises(ValueError, match=message):
            read_corpus(make(tmp_path))

    @pytest.mark.parametrize(("make", "message"), [
        (lambda d: (d / "x.txt").write_text(" ") and d, "holds no document with text: the corpus is empty"),
        (lambda d: (d / "bad.txt").write_bytes(b"caf\xe9") and d, "cannot read .*bad.txt.* as UTF-8"),
    ])
    def test_a_corpus_that_cannot_be_read_is_named(self, tmp_path, make, message):
        with pytest.raises(ValueError, match=message):
            list(read_corpus(make(tmp_path)))


class TestJsonLines:
    def test_the_layouts_people_have_read_as_they_are(self, tmp_path):
        beir = write_jsonl(tmp_path / "corpus.jsonl", [
            {"_id": "d1", "title": "Lease", "text": "Rent is due.", "metadata": {"lang": "en"}},
            {"_id": "d2", "title": "", "text": "The tenant pays."}])
        bench = write_jsonl(tmp_path / "documents.jsonl", [{"id": "x", "sentences": ["Rent.", "Due."]},
                                                           {"id": 7, "chunks": ["It pays."]}])
        d1, d2 = read_corpus(beir)
        assert (d1.id, d1.title, d1.text, d1.metadata) == ("d1", "Lease", "Rent is due.", {"lang": "en"})
        assert d2.title is None  # BEIR's empty title: none
        x, seven = read_corpus(bench)
        assert x.chunks == ["Rent.", "Due."] and x.text is None and seven.id == "7"
        assert read_corpus(bench).count() == 2

    def test_gzip_and_blank_lines(self, tmp_path):
        with gzip.open(tmp_path / "c.jsonl.gz", "wt", encoding="utf-8") as f:
            f.write('{"id": "a", "text": "rent"}\n\n{"id": "b", "text": "due"}\n')
        assert [d.id for d in read_corpus(tmp_path / "c.jsonl.gz")] == ["a", "b"]
        assert read_corpus(tmp_path / "c.jsonl.gz").count() is None  # unknown without reading it all

    @pytest.mark.parametrize(("line", "message"), [
        ("not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"text": "rent"}', r"missing the document's id \(field 'id', or '_id'\)"),
        ('{"id": "", "text": "rent"}', "'id' must be a non-empty string"),
        ('{"id": true, "text": "rent"}', "'id' must be a non-empty string"),
        ('{"id": "b"}', "and this one has neither"),
        ('{"id": "b", "text": "rent", "sentences": ["rent"]}', "not both"),
        ('{"id": "b", "text": 3}', "'text' must be a string, got int"),
        ('{"id": "b", "chunks": "rent"}', "'chunks' must be a list of strings"),
        ('{"id": "b", "sentences": ["rent", " "]}', r"sentences\[1\] is empty"),
        ('{"id": "b", "text": "rent", "title": 5}', "'title' must be a string"),
        ('{"id": "b", "text": "rent", "metadata": [1]}', "'metadata' must be an object"),
        ('{"id": "b", "text": "rent", "metadata": {"a b": 1}}', "metadata keys are identifiers"),
        ('{"id": "b", "text": "rent", "metadata": {"k": [1]}}', "metadata values are strings, numbers or booleans"),
        ('{"id": "a", "text": "again"}', "duplicate document id 'a'"),
    ])
    def test_a_bad_line_is_named_by_its_number(self, tmp_path, line, message):
        path = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "text": "rent"}, "", line])
        with pytest.raises(ValueError, match=rf"c\.jsonl:3: .*{message}"):
            list(read_corpus(path))

    def test_it_is_read_as_a_stream(self, tmp_path):
        """The first document comes before the file is read further: a bad line later is met only when reached."""
        path = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "text": "rent"}, "broken"])
        documents = iter(read_corpus(path))
        assert next(documents).id == "a"
        with pytest.raises(ValueError, match=r"c\.jsonl:2: not valid JSON"):
            next(documents)

    def test_a_jsonl_file_is_never_read_as_text(self, tmp_path):
        """Every line is a document: 3 lines are 3 documents, not one document of JSON text."""
        path = write_jsonl(tmp_path / "c.jsonl", [{"id": str(i), "text": f"document {i}."} for i in range(3)])
        assert [d.text for d in read_corpus(path)] == ["document 0.", "document 1.", "document 2."]

    def test_documents_with_nothing_to_embed_are_skipped_with_a_word(self, tmp_path, caplog):
        path = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "text": "rent"}, {"_id": "b", "title": "T", "text": ""},
                                                  {"id": "c", "sentences": []}])
        with caplog.at_level("WARNING"):
            assert [d.id for d in read_corpus(path)] == ["a"]
        assert "skipped 2 empty document(s) with nothing to embed (e.g. " in caplog.text and "c.jsonl:2" in caplog.text


class TestParquet:
    def test_a_file_or_a_folder_with_the_same_columns(self, tmp_path):
        pq = pytest.importorskip("pyarrow.parquet")
        import pyarrow as pa

        (tmp_path / "parts").mkdir()
        pq.write_table(pa.table({"id": ["a", "b"], "text": ["Rent is due.", "It pays."]}),
                       tmp_path / "parts" / "0.parquet")
        pq.write_table(pa.table({"id": ["c"], "sentences": [["One.", "Two."]], "title": ["T"]}),
                       tmp_path / "parts" / "1.parquet")
        documents = list(read_corpus(tmp_path / "parts"))
        assert [d.id for d in documents] == ["a", "b", "c"]
        assert documents[2].chunks == ["One.", "Two."] and documents[2].title == "T"
        assert read_corpus(tmp_path / "parts").count() == 3
        pq.write_table(pa.table({"id": ["a", "a"], "text": ["x", "y"]}), tmp_path / "dup.parquet")
        with pytest.raises(ValueError, match=r"dup\.parquet row 2: duplicate document id 'a'"):
            list(read_corpus(tmp_path / "dup.parquet"))


def test_the_content_hash_changes_with_what_the_vectors_or_the_entry_depend_on():
    base = Document("a", "rent")
    assert base.content_hash == Document("a", "rent", metadata={"path": "a"}).content_hash
    others = [Document("a", "rent "), Document("a", "rent", title="T"), Document("a", chunks=["rent"]),
              Document("a", "rent", metadata={"lang": "en"})]
    assert len({base.content_hash, *(d.content_hash for d in others)}) == 5


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
