"""contextembed.jsonl: JSON-lines records read one by one, every error naming the file and line."""

from __future__ import annotations

import pytest

from contextembed.jsonl import field, read_records


def test_records_come_with_their_line_numbers_and_blank_lines_are_skipped(tmp_path):
    file = tmp_path / "a.jsonl"
    file.write_text('{"id": 1}\n\n  \n{"id": 2}\n', encoding="utf-8")
    assert list(read_records(file)) == [(1, {"id": 1}), (4, {"id": 2})]


@pytest.mark.parametrize(("content", "message"), [
    ('{"id": 1}\n{"id": \n', r"a.jsonl:2: not valid JSON"),
    ('{"id": 1}\n[1, 2]\n', r"a.jsonl:2: expected a JSON object, got list"),
])
def test_a_bad_line_is_named(tmp_path, content, message):
    file = tmp_path / "a.jsonl"
    file.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        list(read_records(file))


def test_an_unreadable_file_is_named(tmp_path):
    (tmp_path / "latin1.jsonl").write_bytes('{"text": "caf\xe9"}\n'.encode("latin-1"))
    with pytest.raises(ValueError, match="cannot read .*latin1.jsonl"):
        list(read_records(tmp_path / "latin1.jsonl"))
    with pytest.raises(ValueError, match="cannot read .*missing.jsonl"):
        list(read_records(tmp_path / "missing.jsonl"))


def test_fields_are_checked_by_type_and_a_bool_is_not_an_int():
    record = {"start": 3, "flag": True, "text": "rent", "score": 0.5}
    assert field(record, "start", int, "f:1") == 3 and field(record, "score", (int, float), "f:1") == 0.5
    assert field(record, "flag", bool, "f:1") is True
    with pytest.raises(ValueError, match="f:1: field 'flag' must be int, got bool"):
        field(record, "flag", int, "f:1")
    with pytest.raises(ValueError, match="f:1: field 'text' must be int/float, got str"):
        field(record, "text", (int, float), "f:1")
    with pytest.raises(ValueError, match="f:1: missing field 'end'"):
        field(record, "end", int, "f:1")
