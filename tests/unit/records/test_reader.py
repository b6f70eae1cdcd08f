"""Reading a records file: complete rows only, and a file of another version or not text refused."""

from __future__ import annotations

import pytest

from netsched.models.features import SchemaError
from netsched.records.reader import checked_records, read_records, read_rows


def test_torn_lines_and_non_objects_are_skipped_and_a_missing_file_has_no_rows(tmp_path):
    path = tmp_path / "r.jsonl"
    assert read_rows(path) == []
    path.write_text('{"uid": "u1", "schema_version": 1}\n{"uid": "u2", "sch\n[1]\n{"schema_version": 1}\n')
    assert [n for n, _ in read_records(path)] == [1, 4]
    assert read_rows(path) == [{"uid": "u1", "schema_version": 1}]  # a row without a uid is no job's


@pytest.mark.parametrize(("content", "message"), [
    pytest.param(b'{"uid": "u1", "schema_version": 2}\n',
                 r"r.jsonl: line 1 \(uid 'u1'\): records schema_version 2, this netsched reads version 1",
                 id="other-version"),
    pytest.param(b"\xff\xfe\x00", "r.jsonl: not a text file", id="not-text"),
])
def test_a_file_this_netsched_cannot_read_is_refused_with_where(tmp_path, content, message):
    path = tmp_path / "r.jsonl"
    path.write_bytes(content)
    with pytest.raises(SchemaError, match=message):
        list(checked_records(path))
