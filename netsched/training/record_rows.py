"""The operator's finished-job records (JSON Lines, netsched.records) as dataset rows.

A record is one job that really ran: it becomes a candidate set of one row, `chosen` = 1,
for the node of its last replica, with the features netsched.records.features reads from it
(where its replicas ran, its data, its `telemetry` at start). Only jobs that Succeeded with a
duration are kept: a failed job's duration says nothing about speed.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from netsched.api.gpujob import Phase
from netsched.models.features import SCHEMA_VERSION, TARGET, SchemaError
from netsched.records.features import record_features
from netsched.records.reader import checked_records


def record_row(record: dict) -> dict | None:
    """The dataset row of one finished-job record, or None if the job never gave a usable duration."""
    nodes = record.get("nodes") or []
    duration = record.get("duration_seconds")
    if record.get("outcome") != Phase.SUCCEEDED or not nodes or not duration or duration <= 0:
        return None
    last = len(nodes) - 1
    return {
        "schema_version": SCHEMA_VERSION, "source": "operator", "job_id": record["uid"],
        "candidate_set": record["uid"], "node": nodes[last], "site": (record.get("zones") or [""])[last],
        "start_unix": datetime.fromisoformat(record["start_time"]).timestamp(), "chosen": 1,
        TARGET: float(duration), **record_features(record),
    }


def rows_from_records(path: Path) -> list[dict]:
    """The dataset rows of the usable records of an operator records file (none before the first job
    succeeds: train and retrain then say how many they need, netsched.training.train.MIN_JOBS)."""
    rows = []
    for where, record in checked_records(path):
        try:
            row = record_row(record)
        except KeyError as exc:
            raise SchemaError(f"{where}: no field {exc}; see netsched.records.format.ROW_FIELDS") from None
        except (TypeError, ValueError) as exc:
            raise SchemaError(f"{where}: {exc}") from None
        if row is not None:
            rows.append(row)
    return rows
