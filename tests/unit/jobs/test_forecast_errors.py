"""Intervals corrected by how far the recorded first forecasts missed: conformal, per end."""

from __future__ import annotations

from datetime import timedelta

import pytest

from netsched.api.events import rfc3339
from netsched.jobs.capacity import node_room
from netsched.jobs.forecast import cluster_forecast
from netsched.jobs.forecast_errors import FLOOR, MIN_SCORED, Correction, Scores
from netsched.testing.builders import CLUSTER, NOW, ago, make_gpujob, make_pod


def at(seconds: float):
    return NOW + timedelta(seconds=seconds)


def recorded(late: float, ahead: float = 100 - FLOOR, start_p90: float | None = None) -> dict:
    """A finished job whose first forecast (made at NOW) said it starts `ahead` s later, within P10-P90
    of ±20 s (P90 `start_p90` if given); it started `late` seconds after its P90 and ran 300 s as said."""
    p90 = ahead + 20 if start_p90 is None else start_p90
    started = at(p90 + late)
    return {"outcome": "Succeeded", "duration_seconds": 300, "workload_kind": "training", "replicas": 2,
            "gpus_per_replica": 8, "start_time": rfc3339(started),
            "completion_time": rfc3339(started + timedelta(seconds=300)),
            "first_forecast": {"at": rfc3339(NOW), "start": rfc3339(at(ahead)),
                               "startP10": rfc3339(at(ahead - 20)), "startP90": rfc3339(at(p90)),
                               "completion": rfc3339(at(ahead + 300))}}


def test_each_end_moves_by_the_conformal_quantile_of_its_misses_in_units_of_how_far_the_forecast_looked():
    history = [recorded(late=10 * i) for i in range(MIN_SCORED)]  # late by 0, 10, ... 90 s; looked 100 s on
    start = Scores(history).corrections()["start"]
    # (10 + 1) × 0.9 rounds up to the 10th of 10: the largest, 90 s late over 100 s ahead
    assert start.high == pytest.approx(0.9) and start.count == MIN_SCORED
    assert start.low == pytest.approx(-0.4)  # the earliest was 40 s after the P10: the low end may move in
    low, high = start.apply(NOW, at(200 - FLOOR), (at(180 - FLOOR), at(220 - FLOOR)))
    assert high == at(220 - FLOOR + 0.9 * 200)
    assert low == at(200 - FLOOR)  # moved in, but never past the predicted time itself


def test_too_few_recorded_forecasts_and_records_from_before_they_were_kept_leave_the_played_intervals():
    history = [recorded(late=5) for _ in range(MIN_SCORED - 1)]
    old = [{k: v for k, v in r.items() if k != "first_forecast"} for r in history]
    assert Scores(history).corrections() == {}
    assert Scores([*old, *old, {"first_forecast": None}]).corrections() == {}


def unfinished(name: str, phase: str, started: float | None = None, made: float = 0.0) -> dict:
    """A GPUJob whose first forecast, made `made` s after NOW, said it starts 40 s later, P10-P90
    20-60 s; started `started` s after NOW (None: not yet)."""
    job = make_gpujob(name, replicas=1, gpus=8, created=ago(10))
    job["status"] = {"phase": phase, "firstForecast": {
        "at": rfc3339(at(made)), "start": rfc3339(at(made + 40)), "startP10": rfc3339(at(made + 20)),
        "startP90": rfc3339(at(made + 60))}}
    if started is not None:
        job["status"]["startTime"] = rfc3339(at(started))
    return job


def test_unfinished_jobs_count_a_start_that_came_and_how_far_past_its_p90_one_still_waits():
    looked = 40 + FLOOR  # how far each forecast looked ahead
    recorded_ = [recorded(late=0, ahead=40, start_p90=60) for _ in range(MIN_SCORED - 3)]
    started = unfinished("started", "Running", started=70)  # 10 s past its P90
    waiting = [unfinished(f"wait-{i}", "Pending") for i in range(2)]  # still waiting at 160 s: 100 s past
    scores = Scores(recorded_)
    assert scores.corrections([started, *waiting]) == {}  # without a time, nothing is scored
    start = scores.corrections([started, *waiting], now=at(160))["start"]
    assert start.count == MIN_SCORED
    assert start.high == pytest.approx(100 / looked)  # the largest of ten: a waiting job's lower bound
    assert start.low == 0.0  # eight starts came: too few for the low end, which stays as played
    # Before their P90, waiting jobs say nothing yet; ended and Blocked jobs are not scored live
    assert scores.corrections([started, *waiting], now=at(50)) == {}
    ended = [unfinished(f"ended-{i}", phase, started=100) for i, phase in enumerate(("Succeeded", "Failed"))]
    blocked = unfinished("blocked", "Blocked")
    assert scores.corrections([started, *ended, blocked], now=at(160)) == {}


def test_a_correction_gives_an_interval_where_none_was_played_and_never_starts_one_before_now():
    correction = Correction(low=1.0, high=0.5, count=MIN_SCORED)
    assert correction.apply(NOW, at(40), None) == (NOW, at(40 + 0.5 * (40 + FLOOR)))


def one_running_one_waiting() -> tuple[list, list, dict, dict]:
    """The cluster's nodes, and ml/big running on 4 of them since 100 s ago (for 300 s, as its
    history says) while ml/next waits for 2 of them: nodes, pods, and the two GPUJobs."""
    running = make_gpujob("big", replicas=4, gpus=8, created=ago(300))
    running["status"] = {"phase": "Running", "startTime": ago(100)}
    waiting = make_gpujob("next", replicas=2, gpus=8, created=ago(60))
    waiting["status"] = {"phase": "Pending"}
    pods = [make_pod(f"big-{i}", n, gpus=8, job="big")
            for i, n in enumerate(("a1-0", "a1-1", "a2-0", "b1-0"))]
    return [node_room(n) for n in CLUSTER], pods, running, waiting


def test_a_waiting_jobs_start_interval_is_widened_by_how_late_past_starts_came():
    history = [recorded(late=60 + i) for i in range(MIN_SCORED)]  # late by 60-69 s over 100 s ahead
    before_kept = [{k: v for k, v in r.items() if k != "first_forecast"} for r in history]
    nodes, pods, running, waiting = one_running_one_waiting()
    played = cluster_forecast(NOW, nodes, pods, [running, waiting], before_kept)["ml/next"]
    corrected = cluster_forecast(NOW, nodes, pods, [running, waiting], history)["ml/next"]
    # every run took its 300 s: the played interval is the running job's end, 200 s on
    assert played.start == corrected.start == at(200) and played.start_range == (at(200), at(200))
    assert corrected.start_played == played.start_range
    assert corrected.start_range == (at(200), at(200 + 0.69 * (200 + FLOOR)))


def test_the_forecast_widens_a_waiting_jobs_start_by_how_late_unfinished_jobs_started():
    nodes, pods, running, waiting = one_running_one_waiting()
    # ten jobs forecast at NOW - 200 s to start 40 s on (P90 60 s), which started 50 s past it
    late = [unfinished(f"late-{i}", "Running", started=-90, made=-200) for i in range(MIN_SCORED)]
    history = [{k: v for k, v in recorded(late=0).items() if k != "first_forecast"}] * MIN_SCORED
    alone = cluster_forecast(NOW, nodes, pods, [running, waiting], history)["ml/next"]
    beside = cluster_forecast(NOW, nodes, pods, [running, waiting, *late], history)["ml/next"]
    assert alone.start_range == (at(200), at(200))
    assert beside.start_range == (at(200), at(200 + 0.5 * (200 + FLOOR)))
