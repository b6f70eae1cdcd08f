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
scored forecasts of a time (start, completion) its intervals stay as played.

Ended jobs alone would tell late: a job that waits past its P90 is recorded only once it has run,
so while the cluster falls behind its forecasts the misses that say so are the ones not yet in the
records. The unfinished GPUJobs count too: a job that has started scores its start as a recorded one
does, and a time whose P90 has passed without it scores at least how far past it now is (a lower
bound, taken as the score: the correction it gives is still at most the true one).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from netsched.api.events import parse_rfc3339, rfc3339
from netsched.api.gpujob import FIRST_FORECAST, TERMINAL, Phase

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


Misses = dict[str, tuple[list[float], list[float]]]  # per time of ACTUAL: its low ends' and high ends' scores


class Scores:
    """The misses of the recorded first forecasts (records rows), scored once; `corrections` adds
    those of the unfinished GPUJobs as they are at each pass."""

    def __init__(self, history: Iterable[Mapping[str, Any]]):
        self.recorded: Misses = {f: ([], []) for f in ACTUAL}
        for row in history:
            _score(self.recorded, row.get("first_forecast"), {f: row.get(c) for f, c in ACTUAL.items()})

    def corrections(self, jobs: Iterable[Mapping[str, Any]] = (), now: datetime | None = None
                    ) -> dict[str, Correction]:
        """The correction of each time of ACTUAL with MIN_SCORED scored forecasts of it at least: the
        recorded ones and, as of `now`, those of the unfinished GPUJob bodies in `jobs`."""
        misses = {f: (lows[-WINDOW:], highs[-WINDOW:]) for f, (lows, highs) in self.recorded.items()}
        if now is not None:
            live: Misses = {f: ([], []) for f in ACTUAL}
            for body in jobs:
                status = body.get("status") or {}
                # an ended job is scored from its record; a Blocked one waits for a person, not for room
                if status.get("phase") not in (*TERMINAL, Phase.BLOCKED):
                    _score(live, status.get(FIRST_FORECAST), {"start": status.get("startTime")}, now)
            misses = {f: (lows + live[f][0], highs + live[f][1]) for f, (lows, highs) in misses.items()}
        # a time not yet come scores only its high end: the low one stays as played until enough came
        return {field: Correction(_conformal(lows) if len(lows) >= MIN_SCORED else 0.0, _conformal(highs),
                                  len(highs))
                for field, (lows, highs) in misses.items() if len(highs) >= MIN_SCORED}


def _score(misses: Misses, first: Any, actual: Mapping[str, str | None], now: datetime | None = None) -> None:
    """Add the misses of one first forecast whose actual times (RFC 3339 by ACTUAL's keys; None: not
    yet) are `actual`. With `now`, a time not yet come whose P90 has passed scores its high end by
    how far past it `now` is."""
    if not isinstance(first, Mapping) or not first.get("at"):
        return  # recorded before forecasts were kept, or never forecast
    made = parse_rfc3339(first["at"])
    for field in ACTUAL:
        if not first.get(field):
            continue
        point = parse_rfc3339(first[field])
        low = parse_rfc3339(first.get(f"{field}P10") or first[field])
        high = parse_rfc3339(first.get(f"{field}P90") or first[field])
        scale = ahead(made, point)
        if actual.get(field):
            when = parse_rfc3339(str(actual[field]))
            misses[field][0].append((low - when).total_seconds() / scale)
            misses[field][1].append((when - high).total_seconds() / scale)
        elif now is not None and now > high:
            misses[field][1].append((now - high).total_seconds() / scale)


def _conformal(scores: list[float]) -> float:
    """The (n + 1) × HIGH-th smallest score (the largest when that is past n): a new one is at most
    this with probability HIGH, if it is like them."""
    ordered = sorted(scores)
    return ordered[min(len(ordered), math.ceil((len(ordered) + 1) * HIGH)) - 1]


def first_forecast(made: datetime, times: Mapping[str, datetime | None]) -> dict[str, str]:
    """`status.firstForecast`: `times` (start, completion and their P10/P90 by ACTUAL's names with
    suffixes; None: not predicted) as made at `made`."""
    return {"at": rfc3339(made)} | {k: rfc3339(v) for k, v in times.items() if v is not None}
