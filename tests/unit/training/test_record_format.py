from pathlib import Path

from netsched.models.features import SCHEMA_VERSION
from netsched.records.format import ROW_FIELDS
from netsched.records.format import SCHEMA_VERSION as RECORDS_VERSION
from netsched.training.dataset import COLUMNS

DOC = (Path(__file__).resolve().parents[3] / "docs" / "record-format.md").read_text()


def test_the_record_format_page_names_every_column_and_field_and_both_versions():
    assert f"## Dataset CSV (schema {SCHEMA_VERSION})" in DOC
    assert f"records version {RECORDS_VERSION}" in DOC
    assert [c for c in COLUMNS if f"| `{c}` |" not in DOC] == []
    assert [f for f in ROW_FIELDS if f"| `{f}` |" not in DOC] == []
