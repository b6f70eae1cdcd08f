"""What a cluster ran, per week and priority class, from the operator's job records (`netsched report`):
jobs, GPU-hours, time queued (p50 / p95), completion time (p50 / p95) and, given the predicted times of
netsched.records.gain, the estimated gain over kube-scheduler's default with its interval.

Weeks are ISO weeks of the job's completion. GPU-hours are the job's GPUs times its run time (start to
completion); a job that never started counts as a job and nothing else. Percentiles are nearest-rank
over the jobs that have the value.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from netsched.records.gain import Gain, JobTimes, gain

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
    gain: Gain | None = None  # estimated against the default (None: no model, or no job to estimate)


def percentile(values: list[float], share: float) -> float | None:
    """Nearest rank: the smallest value with at least `share` of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def week_of(stamp: str) -> str:
    year, week, _ = datetime.fromisoformat(stamp.replace("Z", "+00:00")).isocalendar()
    return f"{year}-W{week:02d}"


def by_week_and_class(records: Sequence[dict[str, Any]], times: JobTimes | None = None) -> list[WeekClass]:
    """One row per week and priority class, in order. A record without a completion time is skipped
    (the operator writes one only for a finished job). `times`: the predicted times of the records'
    jobs, for the gain."""
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, record in enumerate(records):
        if record.get("completion_time"):
            key = week_of(str(record["completion_time"])), record.get("priority_class") or NO_CLASS
            groups[key].append(i)
    position = {} if times is None else {int(i): k for k, i in enumerate(times.index)}
    out = []
    for (week, cls), members in sorted(groups.items()):
        rows = [records[i] for i in members]
        estimated = [position[i] for i in members if i in position]
        won = None if times is None else gain(times.netsched[estimated], times.default[estimated],
                                               times.gpus[estimated])
        ran = [r for r in rows if r.get("duration_seconds") is not None]
        queued = [float(r["queue_seconds"]) for r in rows if r.get("queue_seconds") is not None]
        durations = [float(r["duration_seconds"]) for r in ran]
        out.append(WeekClass(
            week, cls, len(rows), sum(r.get("outcome") == "Succeeded" for r in rows),
            sum(float(r.get("gpus") or 0) * float(r["duration_seconds"]) for r in ran) / 3600,
            percentile(queued, 0.5), percentile(queued, 0.95),
            percentile(durations, 0.5), percentile(durations, 0.95), won))
    return out


def as_json(rows: list[WeekClass]) -> list[dict[str, Any]]:
    return [asdict(r) for r in rows]


def as_table(rows: list[WeekClass], with_gain: bool = False) -> str:
    """with_gain: the estimated gain's columns too (each "-" where no job of the row was estimated)."""
    head: tuple[str, ...] = ("WEEK", "PRIORITY CLASS", "JOBS", "SUCCEEDED", "GPU-HOURS", "QUEUED P50",
                             "QUEUED P95", "COMPLETION P50", "COMPLETION P95")
    if with_gain:
        head += ("ESTIMATED", "GAIN (95% CI)", "GPU-HOURS SAVED (95% CI)")
    body = [(r.week, r.priority_class, str(r.jobs), str(r.succeeded), f"{r.gpu_hours:.1f}",
             _duration(r.queue_p50), _duration(r.queue_p95), _duration(r.completion_p50),
             _duration(r.completion_p95), *(_gain_cells(r.gain) if with_gain else ())) for r in rows]
    widths = [max(len(line[k]) for line in (head, *body)) for k in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
                     for line in (head, *body))


def _gain_cells(won: Gain | None) -> tuple[str, str, str]:
    if won is None:
        return "0", "-", "-"
    return (str(won.jobs), f"{100 * won.gain:+.1f}% ({100 * won.gain_low:+.1f}..{100 * won.gain_high:+.1f})",
            f"{won.gpu_hours_saved:+.1f} ({won.gpu_hours_low:+.1f}..{won.gpu_hours_high:+.1f})")


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"
