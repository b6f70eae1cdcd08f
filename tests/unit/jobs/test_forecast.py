"""Predicted run time, start and completion: learned from finished jobs, played forward over the cluster."""

from __future__ import annotations

from datetime import timedelta

import pytest

from netsched.api.labels import EXPECTED_SECONDS
from netsched.jobs.capacity import node_room
from netsched.jobs.forecast import Forecast, cluster_forecast, estimate_duration
from netsched.jobs.live_gangs import live_gangs
from netsched.jobs.run_time import Estimate, RunTimes
from netsched.testing.builders import (
    CLUSTER,
    NOW,
    ago,
    job,
    make_batch_job,
    make_gpujob,
    make_job_pod,
    make_pod,
)


def at(seconds: float):
    return NOW + timedelta(seconds=seconds)


NODES = [node_room(n) for n in CLUSTER]  # four nodes of 8 GPUs: a1-0, a1-1 (rack-a1), a2-0, b1-0


def row(seconds: float, kind: str = "training", replicas: int = 2, gpus: int = 4, expected: int | None = None,
        outcome: str = "Succeeded") -> dict:
    return {"outcome": outcome, "duration_seconds": seconds, "workload_kind": kind, "replicas": replicas,
            "gpus_per_replica": gpus, "expected_duration_seconds": expected}


def test_a_declared_duration_is_scaled_by_how_far_declarations_were_off_before():
    history = [row(50, expected=100), row(60, expected=120), row(70, expected=140),
               row(999, outcome="Failed")]
    estimate = estimate_duration(RunTimes(history), job(workload={"expectedDurationSeconds": 1000}))
    # every hint was off by exactly 0.5: the blend all but ignores the median run of such jobs (60 s)
    assert estimate.seconds == pytest.approx(500, rel=1e-3)
    assert "× 0.50" in estimate.basis and "3 finished jobs" in estimate.basis and "blended" in estimate.basis
    alone = estimate_duration(RunTimes(history[:2]), job(workload={"expectedDurationSeconds": 1000}))
    assert alone.seconds == 1000 and "too few" in alone.basis


def test_without_a_declaration_the_most_alike_finished_jobs_decide():
    history = [row(100), row(110), row(120), *(row(s, replicas=4) for s in (900, 950, 1000)),
               row(5, kind="etl"), row(7, kind="etl"), row(9, kind="etl")]
    assert estimate_duration(RunTimes(history), job(replicas=2, gpus=4)) == Estimate(
        pytest.approx(110), "the median run of 3 finished training jobs of 2×4 GPUs")
    other_shape = estimate_duration(RunTimes(history), job(replicas=8, gpus=1))
    assert other_shape.basis == "the median run of 6 finished training jobs"
    inference = estimate_duration(RunTimes(history), job(workload={"kind": "inference"}))
    assert inference == Estimate(pytest.approx(110), "the median run of 9 finished jobs")
    nothing = estimate_duration(RunTimes(history[:2]), job())
    assert nothing.seconds is None and "expectedDurationSeconds" in nothing.basis


def gpujob(name: str, replicas: int, gpus: int, phase: str, start: str | None = None, **spec) -> dict:
    body = make_gpujob(name, replicas=replicas, gpus=gpus, created=ago(300 if phase != "Pending" else 60),
                       **spec)
    body["status"] = {"phase": phase} | ({"startTime": start} if start else {})
    return body


def pods_of(name: str, nodes: list[str], gpus: int, priority: int = 0) -> list[dict]:
    return [make_pod(f"{name}-{i}", node, gpus=gpus, job=name, priority=priority)
            for i, node in enumerate(nodes)]


HISTORY = [row(600, replicas=4, gpus=8)] * 3 + [row(300, replicas=2, gpus=8)] * 3


def test_a_waiting_gang_starts_when_the_running_job_holding_its_room_is_predicted_to_end():
    running = gpujob("big", 4, 8, "Running", start=ago(100))  # predicted to run 600 s: 500 s left
    waiting = gpujob("next", 2, 8, "Pending")
    pods = pods_of("big", ["a1-0", "a1-1", "a2-0", "b1-0"], 8) + [
        make_pod(f"next-{i}", gpus=8, job="next", schedulingGates=[{"name": "g"}]) for i in range(2)]
    out = cluster_forecast(NOW, NODES, pods, [running, waiting], HISTORY)
    assert out["ml/big"] == Forecast(None, at(500), estimate_duration(
        RunTimes(HISTORY), job(replicas=4, gpus=8)))
    assert out["ml/next"].start == at(500) and out["ml/next"].after == ("ml/big",)
    assert out["ml/next"].finish == at(800)


def test_a_higher_priority_gang_goes_first_and_a_lower_one_waits_for_it():
    running = gpujob("big", 4, 8, "Running", start=ago(100))
    low, high = gpujob("low", 4, 8, "Pending"), gpujob("high", 4, 8, "Pending")
    pods = (pods_of("big", ["a1-0", "a1-1", "a2-0", "b1-0"], 8)
            + [make_pod(f"low-{i}", gpus=8, job="low", priority=0) for i in range(4)]
            + [make_pod(f"high-{i}", gpus=8, job="high", priority=100) for i in range(4)])
    out = cluster_forecast(NOW, NODES, pods, [running, low, high], HISTORY)
    assert out["ml/high"].start == at(500)
    assert out["ml/low"].start == at(1100)  # after high's own 600 s


def test_room_held_by_a_pod_with_no_predicted_end_gives_no_start_rather_than_a_made_up_one():
    waiting = gpujob("next", 4, 8, "Pending")
    pods = [make_pod(f"other-{n}", n, gpus=8) for n in ("a1-0", "a1-1", "a2-0", "b1-0")]  # not GPUJob pods
    out = cluster_forecast(NOW, NODES, pods, [waiting], HISTORY)
    assert out["ml/next"] == Forecast(None, None, out["ml/next"].estimate)


def test_a_rack_bound_gang_waits_for_room_within_one_rack():
    running = gpujob("small", 2, 8, "Running", start=ago(100))  # a1-0 and a1-1: rack-a1, 200 s left
    waiting = gpujob("pair", 2, 8, "Pending", network={"maxPeerDistance": "rack"})
    pods = pods_of("small", ["a1-0", "a1-1"], 8)
    out = cluster_forecast(NOW, NODES, pods, [running, waiting], HISTORY)
    assert out["ml/pair"].start == at(200)  # a2-0 and b1-0 are two racks: no room now


def test_a_job_whose_spec_cannot_be_read_costs_only_itself_its_forecast():
    bad = gpujob("bad", 2, 8, "Pending", template={"spec": {"containers": [
        {"name": "main", "image": "t:1", "resources": {"requests": {"cpu": "lots"}}}]}})
    good = gpujob("next", 2, 8, "Pending")
    out = cluster_forecast(NOW, NODES, [], [bad, good], HISTORY)
    assert out["ml/next"].start == NOW and out["ml/next"].finish == at(300)
    assert out["ml/bad"].start is None and out["ml/bad"].finish is None and out["ml/bad"].unreadable
    assert out["ml/bad"].estimate.basis == (
        "no forecast: spec.template.spec.containers[0].resources.requests.cpu: 'lots' is not a Kubernetes "
        "quantity; write e.g. 500m, 2 or 16Gi")


def test_a_blocked_job_has_no_forecast_and_an_evicted_one_no_finish_from_its_cut_run():
    blocked = gpujob("blocked", 2, 8, "Blocked")
    evicted = gpujob("evicted", 2, 8, "Pending", start=ago(100))  # ran, then a PackingPlan evicted it
    pods = [make_pod(f"other-{n}", n, gpus=8) for n in ("a1-0", "a1-1", "a2-0", "b1-0")]  # no predicted end
    out = cluster_forecast(NOW, NODES, pods, [blocked, evicted], HISTORY)
    assert "ml/blocked" not in out
    assert out["ml/evicted"].start is None and out["ml/evicted"].finish is None  # not its old start + 300 s
    assert cluster_forecast(NOW, NODES, [], [evicted], HISTORY)["ml/evicted"].finish == at(300)


# ---- pod gangs (batch Jobs) in the same queue as GPUJobs ---------------------------------------------

def job_pods(name: str, nodes: list[str | None], expected: int | None = None, **kwargs) -> list:
    notes = {EXPECTED_SECONDS: str(expected)} if expected else {}
    return [make_job_pod(name, i, node, gpus=8, annotations=notes, **kwargs) for i, node in enumerate(nodes)]


def forecast_with_gangs(pods: list, gpujobs: list, batch_jobs: list, history=HISTORY) -> dict:
    gangs = live_gangs(pods, {(j["metadata"]["namespace"], j["metadata"]["name"]): j for j in batch_jobs})
    return cluster_forecast(NOW, NODES, pods, gpujobs, history, gangs.values())


def test_a_job_waiting_behind_a_running_gpujob_starts_when_that_job_is_predicted_to_end():
    running = gpujob("big", 4, 8, "Running", start=ago(100))  # 500 s left
    pods = pods_of("big", ["a1-0", "a1-1", "a2-0", "b1-0"], 8) + job_pods("train", [None, None], expected=900,
                                                                          gated=True)
    out = forecast_with_gangs(pods, [running], [make_batch_job("train", 2)])
    assert out["Job ml/train"].start == at(500) and out["Job ml/train"].after == ("ml/big",)
    assert out["Job ml/train"].finish == at(1400)
    assert "netsched.io/expected-duration-seconds annotation" in out["Job ml/train"].estimate.basis


def test_a_gpujob_waiting_behind_a_running_job_starts_when_the_job_is_predicted_to_end():
    pods = job_pods("train", ["a1-0", "a1-1", "a2-0", "b1-0"], expected=400, started=ago(100)) + [
        make_pod(f"next-{i}", gpus=8, job="next", schedulingGates=[{"name": "g"}]) for i in range(2)]
    out = forecast_with_gangs(pods, [gpujob("next", 2, 8, "Pending")], [make_batch_job("train", 4)])
    assert out["Job ml/train"] == Forecast(None, at(300), Estimate(
        400, "the pods' netsched.io/expected-duration-seconds annotation (too few finished jobs to check it "
             "against)"))
    assert out["ml/next"].start == at(300) and out["ml/next"].after == ("Job ml/train",)


def test_a_higher_priority_job_goes_before_a_waiting_gpujob_and_a_lower_one_after_it():
    running = gpujob("big", 4, 8, "Running", start=ago(100))  # ends at 500
    gpu_waiting = gpujob("mid", 4, 8, "Pending")  # runs 600 s once started
    pods = (pods_of("big", ["a1-0", "a1-1", "a2-0", "b1-0"], 8)
            + [make_pod(f"mid-{i}", gpus=8, job="mid", priority=50) for i in range(4)]
            + job_pods("urgent", [None] * 4, expected=100, gated=True, priority=100)
            + job_pods("later", [None] * 4, expected=100, gated=True, priority=0))
    out = forecast_with_gangs(pods, [running, gpu_waiting], [make_batch_job("urgent", 4),
                                                             make_batch_job("later", 4)])
    assert out["Job ml/urgent"].start == at(500)
    assert out["ml/mid"].start == at(600) and out["ml/mid"].after == ("Job ml/urgent",)
    assert out["Job ml/later"].start == at(1200) and out["Job ml/later"].after == ("ml/mid",)


def test_a_job_without_a_hint_or_history_gets_a_start_but_no_finish_and_one_of_unknown_size_no_forecast():
    pods = job_pods("plain", [None, None], gated=True) + job_pods("orphan", [None], gated=True)
    out = forecast_with_gangs(pods, [], [make_batch_job("plain", 2)], history=[])
    assert out["Job ml/plain"].start == NOW and out["Job ml/plain"].finish is None
    basis = out["Job ml/plain"].estimate.basis
    assert "set the pods' netsched.io/expected-duration-seconds annotation" in basis
    assert "Job ml/orphan" not in out  # its Job was not read: how many pods it runs is not known
