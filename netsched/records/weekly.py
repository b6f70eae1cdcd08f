"""What a cluster ran, per week and priority class, from the operator's job records (`netsched report`):
jobs, GPU-hours, time queued (p50 / p95) and completion time (p50 / p95).

Weeks are ISO weeks of the job's completion. GPU-hours are the job's GPUs times its run time (start to
completion); a job that never started counts as a job and nothing else. Percentiles are nearest-rank
over the jobs that have the value.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

NO_CLASS = "(none)"  # jobs without a priority class


@dataclass(frozen=True)
class WeekClass:
    week: str  # ISO week, 2026-W49
    priority_class: str
    jobs: int
    succeeded: int
    gpu_hours: float
    queue_p50: float | None  # seconds
    queue_p95: float | None
    completion_p50: float | None  # seconds from start to completion
    completion_p95: float | None


def percentile(values: list[float], share: float) -> float | None:
    """Nearest rank: the smallest value with at least `share` of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def week_of(stamp: str) -> str:
    year, week, _ = datetime.fromisoformat(stamp.replace("Z", "+00:00")).isocalendar()
    return f"{year}-W{week:02d}"


def by_week_and_class(records: Iterable[dict[str, Any]]) -> list[WeekClass]:
    """One row per week and priority class, in order. A record without a completion time is skipped
    (the operator writes one only for a finished job)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        if record.get("completion_time"):
            key = week_of(str(record["completion_time"])), record.get("priority_class") or NO_CLASS
            groups[key].append(record)
    out = []
    for (week, cls), rows in sorted(groups.items()):
        ran = [r for r in rows if r.get("duration_seconds") is not None]
        queued = [float(r["queue_seconds"]) for r in rows if r.get("queue_seconds") is not None]
        durations = [float(r["duration_seconds"]) for r in ran]
        out.append(WeekClass(
            week, cls, len(rows), sum(r.get("outcome") == "Succeeded" for r in rows),
            sum(float(r.get("gpus") or 0) * float(r["duration_seconds"]) for r in ran) / 3600,
            percentile(queued, 0.5), percentile(queued, 0.95),
            percentile(durations, 0.5), percentile(durations, 0.95)))
    return out


def as_json(rows: list[WeekClass]) -> list[dict[str, Any]]:
    return [asdict(r) for r in rows]


def as_table(rows: list[WeekClass]) -> str:
    head = ("WEEK", "PRIORITY CLASS", "JOBS", "SUCCEEDED", "GPU-HOURS", "QUEUED P50", "QUEUED P95",
            "COMPLETION P50", "COMPLETION P95")
    body = [(r.week, r.priority_class, str(r.jobs), str(r.succeeded), f"{r.gpu_hours:.1f}",
             _duration(r.queue_p50), _duration(r.queue_p95), _duration(r.completion_p50),
             _duration(r.completion_p95)) for r in rows]
    widths = [max(len(line[k]) for line in (head, *body)) for k in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
                     for line in (head, *body))


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"
