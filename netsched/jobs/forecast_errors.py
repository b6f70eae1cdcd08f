"""How far the forecasts made before were off, and the intervals that follow for the next ones.

A GPUJob's first forecast (`status.firstForecast`: when it was made, the predicted start and
completion and their P10-P90 as the cluster was played, before any correction) is kept until the
job ends, and recorded with it (records column `first_forecast`). Played intervals carry only the
spread of run times; a start also moves by scheduling delays and by smaller gangs released into the
room first. So each end of an interval is moved out (or in) by what the recorded forecasts missed
by, conformal style: over the recorded jobs, how far the actual time fell past each end, in units
of how far the forecast looked ahead (`ahead`: from when it was made to the predicted time, plus
FLOOR seconds, so that a "starts now" still has a scale); each end moves by the (n + 1) × HIGH-th
smallest of those, so that each side misses about one time in ten. With fewer than MIN_SCORED
recorded forecasts of a time (start, completion) its intervals stay as played.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from netsched.api.events import parse_rfc3339, rfc3339

MIN_SCORED = 10  # recorded forecasts a correction is read from
HIGH = 0.9  # each end of the interval is past the actual time this often
FLOOR = 60.0  # seconds added to how far a forecast looked ahead: its scale when it said "now"
WINDOW = 1000  # the most recent recorded forecasts: what the cluster does now
ACTUAL = {"start": "start_time", "completion": "completion_time"}  # firstForecast's times: the record's


@dataclass(frozen=True)
class Correction:
    """How far to move each end of an interval, in multiples of `ahead` (negative: inwards)."""
    low: float
    high: float
    count: int  # recorded forecasts it is read from

    def apply(self, now: datetime, point: datetime, played: tuple[datetime, datetime] | None
              ) -> tuple[datetime, datetime]:
        """The interval around `point` (predicted at `now`): `played`'s ends (none: the point) moved."""
        low, high = played or (point, point)
        scale = ahead(now, point)
        low, high = low - timedelta(seconds=self.low * scale), high + timedelta(seconds=self.high * scale)
        return max(now, min(low, point)), max(high, point)


def ahead(made: datetime, point: datetime) -> float:
    return max((point - made).total_seconds(), 0.0) + FLOOR


def corrections(history: Iterable[Mapping[str, Any]]) -> dict[str, Correction]:
    """The correction of each time of ACTUAL with MIN_SCORED recorded forecasts of it at least."""
    misses: dict[str, tuple[list[float], list[float]]] = {f: ([], []) for f in ACTUAL}
    for row in history:
        first = row.get("first_forecast")
        if not isinstance(first, Mapping) or not first.get("at"):
            continue  # recorded before forecasts were kept, or never forecast
        made = parse_rfc3339(first["at"])
        for field, column in ACTUAL.items():
            actual = row.get(column)
            if not first.get(field) or not actual:
                continue
            point, when = parse_rfc3339(first[field]), parse_rfc3339(actual)
            low = parse_rfc3339(first.get(f"{field}P10") or first[field])
            high = parse_rfc3339(first.get(f"{field}P90") or first[field])
            scale = ahead(made, point)
            misses[field][0].append((low - when).total_seconds() / scale)
            misses[field][1].append((when - high).total_seconds() / scale)
    return {field: Correction(_conformal(lows[-WINDOW:]), _conformal(highs[-WINDOW:]), len(lows[-WINDOW:]))
            for field, (lows, highs) in misses.items() if len(lows) >= MIN_SCORED}


def _conformal(scores: list[float]) -> float:
    """The (n + 1) × HIGH-th smallest score (the largest when that is past n): a new one is at most
    this with probability HIGH, if it is like them."""
    ordered = sorted(scores)
    return ordered[min(len(ordered), math.ceil((len(ordered) + 1) * HIGH)) - 1]


def first_forecast(made: datetime, times: Mapping[str, datetime | None]) -> dict[str, str]:
    """`status.firstForecast`: `times` (start, completion and their P10/P90 by ACTUAL's names with
    suffixes; None: not predicted) as made at `made`."""
    return {"at": rfc3339(made)} | {k: rfc3339(v) for k, v in times.items() if v is not None}
