"""Reading a job records file (netsched.records.format): its complete rows, and the check that it
holds records of the version this netsched reads.

A torn line (a crash mid-write) is skipped, as the writer does: its next row starts on a line of
its own. The demo, `netsched whatif` and training read records here; training turns them into
dataset rows (netsched.training.record_rows).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from netsched.models.errors import SchemaError
from netsched.records.format import SCHEMA_VERSION


def read_records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, record) of every complete JSON object line of a records file."""
    out = []
    for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
        try:
            row = orjson.loads(line)  # a year of records is 50,000 lines: `netsched report` reads them in 5 s
        except orjson.JSONDecodeError:
            try:
                row = json.loads(line)  # what orjson refuses and Python's json writes: NaN, Infinity
            except json.JSONDecodeError:
                continue
        if isinstance(row, dict):
            out.append((number, row))
    return out


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Every complete row of a records file (none if it does not exist yet)."""
    if not path.exists():
        return []
    return [row for _, row in read_records(path) if "uid" in row]


def checked_records(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, record) of each record of a records file, in order, `where` naming the file, line and
    uid for messages; SchemaError if the file is not text, or on reaching a record of another version."""
    try:
        records = read_records(path)
    except UnicodeDecodeError as exc:
        raise SchemaError(f"{path}: not a text file ({exc}); want the operator's JSON Lines "
                          "records") from None
    for line, record in records:
        where = f"{path}: line {line} (uid {record.get('uid')!r})"
        if record.get("schema_version") != SCHEMA_VERSION:
            raise SchemaError(f"{where}: records schema_version {record.get('schema_version')!r}, this "
                              f"netsched reads version {SCHEMA_VERSION}; "
                              "convert the file or record it again")
        yield where, record
