"""What the forecast writes: a GPUJob's status fields and a pod gang's annotations, as patches that leave
out any predicted time that moved too little to be worth a write."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from netsched.api.events import parse_rfc3339, rfc3339
from netsched.api.gpujob import FIRST_FORECAST
from netsched.api.gpujob import PREDICTED_AFTER as AFTER
from netsched.api.gpujob import PREDICTED_FINISH as FINISH
from netsched.api.gpujob import PREDICTED_FINISH_RANGE as FINISH_RANGE
from netsched.api.gpujob import PREDICTED_SECONDS as SECONDS
from netsched.api.gpujob import PREDICTED_START as START
from netsched.api.gpujob import PREDICTED_START_RANGE as START_RANGE
from netsched.api.gpujob import PREDICTION_BASIS as BASIS
from netsched.jobs.forecast import Forecast
from netsched.jobs.forecast_errors import first_forecast

MIN_MOVE = 30.0  # seconds a predicted time must move before it is written again


def status_patch(status: dict[str, Any], forecast: Forecast, now: datetime) -> dict[str, Any]:
    """The status fields to write (None deletes one), or {} when what is there is close enough."""
    times = wanted_times(forecast, START, START_RANGE, FINISH, FINISH_RANGE)
    patch: dict[str, Any] = times_patch(status, times, now)
    seconds = None if forecast.estimate.seconds is None else round(forecast.estimate.seconds)
    if status.get(SECONDS) != seconds and (patch or status.get(SECONDS) is None or seconds is None
                                           or abs(seconds - status[SECONDS]) > MIN_MOVE):
        patch[SECONDS] = seconds
    after = list(forecast.after) if forecast.start is not None else []
    if (status.get(AFTER) or []) != after:
        patch[AFTER] = after or None
    if status.get(BASIS) != forecast.estimate.basis:
        patch[BASIS] = forecast.estimate.basis
    if FIRST_FORECAST not in status and (forecast.start or forecast.finish):
        played = {"start": forecast.start, "completion": forecast.finish}
        for name, interval in (("start", forecast.start_played), ("completion", forecast.finish_played)):
            played.update(zip((f"{name}P10", f"{name}P90"), interval or (None, None), strict=True))
        patch[FIRST_FORECAST] = first_forecast(now, played)
    return patch


def times_patch(have: Mapping[str, Any], wanted: Mapping[str, datetime | None], now: datetime
                ) -> dict[str, str | None]:
    """The predicted times in `wanted` to write over those in `have` (RFC 3339; None deletes one),
    leaving out any that moved too little to be worth a write."""
    patch: dict[str, str | None] = {}
    for name, when in wanted.items():
        old = have.get(name)
        if when is None:
            if old is not None:
                patch[name] = None
        elif old is None or _moved(parse_rfc3339(old), when, now):
            patch[name] = rfc3339(when)
    return patch


def wanted_times(forecast: Forecast | None, start: str, start_range: tuple[str, str], finish: str,
           finish_range: tuple[str, str]) -> dict[str, datetime | None]:
    """The predicted times of `forecast` (None: none) by the names they are written under."""
    times = {start: forecast.start if forecast else None, finish: forecast.finish if forecast else None}
    for names, interval in ((start_range, forecast.start_range if forecast else None),
                            (finish_range, forecast.finish_range if forecast else None)):
        times.update(zip(names, interval or (None, None), strict=True))
    return times


def no_times(status: dict[str, Any]) -> dict[str, Any]:
    return {name: None for name in (START, AFTER, FINISH, *START_RANGE, *FINISH_RANGE)
            if status.get(name) is not None}


def _moved(old: datetime, new: datetime, now: datetime) -> bool:
    left = max((new - now).total_seconds(), 0.0)
    return abs((new - old).total_seconds()) > max(MIN_MOVE, 0.1 * left)
