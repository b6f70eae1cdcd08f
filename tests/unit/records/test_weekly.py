"""`netsched report`: per week and priority class from the operator's job records (written here)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

from netsched.records.format import SCHEMA_VERSION
from netsched.records.weekly import by_week_and_class, percentile

MONDAY = datetime(2026, 11, 2, tzinfo=UTC)  # ISO week 2026-W45


def record(uid: str, done: datetime, queued: float | None, ran: float | None, gpus: int = 8,
           cls: str | None = "batch", outcome: str = "Succeeded") -> dict:
    return {"schema_version": SCHEMA_VERSION, "uid": uid, "outcome": outcome, "priority_class": cls,
            "completion_time": done.isoformat().replace("+00:00", "Z"), "queue_seconds": queued,
            "duration_seconds": ran, "gpus": gpus}


def month() -> list[dict]:
    """Four weeks; per week 10 batch jobs (8 GPUs, an hour each, queued 60..600 s) and one high job
    that failed before it started."""
    out = []
    for week in range(4):
        for k in range(10):
            done = MONDAY + timedelta(weeks=week, hours=k)
            out.append(record(f"b{week}-{k}", done, 60.0 * (k + 1), 3600.0))
        out.append(record(f"h{week}", MONDAY + timedelta(weeks=week, days=2), None, None, cls="high",
                          outcome="Failed"))
    return out


def test_per_week_and_class_by_hand():
    rows = by_week_and_class(month())
    assert [(r.week, r.priority_class, r.jobs) for r in rows[:2]] == [("2026-W45", "batch", 10),
                                                                      ("2026-W45", "high", 1)]
    batch = rows[0]
    assert batch.gpu_hours == 80.0 and batch.succeeded == 10
    assert (batch.queue_p50, batch.queue_p95, batch.completion_p50) == (300.0, 600.0, 3600.0)
    assert rows[1].gpu_hours == 0 and rows[1].queue_p50 is None and len(rows) == 8


def test_nearest_rank_percentiles():
    assert percentile([], 0.5) is None
    assert percentile([3.0, 1.0, 2.0, 4.0], 0.5) == 2.0 and percentile([5.0], 0.95) == 5.0


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "netsched", "report", *args], capture_output=True,
                          text=True, timeout=60)


def test_report_on_a_generated_month_as_table_and_json(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in month()) + '{"torn": \n')
    table = run(str(path), "--no-gain")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["WEEK", "PRIORITY", "CLASS", "JOBS", "SUCCEEDED", "GPU-HOURS", "QUEUED",
                                "P50", "QUEUED", "P95", "COMPLETION", "P50", "COMPLETION", "P95"]
    assert lines[1].split() == ["2026-W45", "batch", "10", "10", "80.0", "5.0m", "10.0m", "60.0m", "60.0m"]
    assert len(lines) == 9
    doc = json.loads(run(str(path), "-o", "json", "--no-gain").stdout)
    assert doc["weeks"][0] == {"week": "2026-W45", "priority_class": "batch", "jobs": 10, "succeeded": 10,
                               "gpu_hours": 80.0, "queue_p50": 300.0, "queue_p95": 600.0,
                               "completion_p50": 3600.0, "completion_p95": 3600.0, "gain": None}
    assert doc["gain"] is None


def test_no_records_is_one_line_and_exit_0(tmp_path):
    for path in (tmp_path / "missing.jsonl", tmp_path / "empty.jsonl"):
        if path.name == "empty.jsonl":
            path.write_text("")
        done = run(str(path))
        assert done.returncode == 0 and done.stdout.count("\n") == 1
        assert done.stdout.startswith(f"no finished jobs in {path} yet")


def test_records_of_another_version_are_refused_in_one_line(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps({**month()[0], "schema_version": 99}) + "\n")
    done = run(str(path))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "records schema_version 99, this netsched reads version 1" in done.stderr
