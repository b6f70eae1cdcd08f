"""`netsched report`: what the cluster ran, per week and priority class, from the operator's job
records (netsched.records.weekly): a table on the terminal, or JSON with -o json."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from netsched.api.settings import option
from netsched.api.subcommand import Command
from netsched.models.errors import SchemaError
from netsched.records.reader import checked_records
from netsched.records.weekly import as_json, as_table, by_week_and_class


@dataclass(frozen=True, kw_only=True)
class ReportSettings:
    records: str = option(flag="records", required=True,
                          help="the operator's job records file (its --records, JSON Lines)")
    output: str = option("text", flag="--output", short="-o", choices=("text", "json"),
                         help="text (a table, the default) or json")


def report_main(settings: ReportSettings) -> int:
    path = Path(settings.records)
    try:
        records = [record for _, record in checked_records(path)] if path.exists() else []
    except (OSError, SchemaError) as exc:
        print(f"netsched: error: report: {exc}", file=sys.stderr)
        return 2
    rows = by_week_and_class(records)
    if settings.output == "json":
        print(json.dumps({"records": str(path), "weeks": as_json(rows)}, indent=2))
    elif not rows:
        print(f"no finished jobs in {path} yet: the operator writes one record per finished GPUJob "
              "(netsched operator --records)")
    else:
        print(as_table(rows))
    return 0


REPORT = Command(
    "report", "what the cluster ran, per week and priority class, from the operator's job records",
    ReportSettings, report_main,
    "Read the operator's job records (netsched operator --records) and print, per ISO week of completion "
    "and priority class: jobs, jobs succeeded, GPU-hours, time queued (p50 / p95) and completion time "
    "(start to completion, p50 / p95). Reads the file only.")
