"""The operator's GPUJob metrics: the phase gauge and oldest wait (JobCensus), the queue-time histogram
after the ticks of a job that waits, starts and runs on, and the packer's evictions."""

from __future__ import annotations

from dataclasses import replace

import pytest

from netsched.api.gpujob import PLURAL, Phase
from netsched.jobs.capacity import node_room
from netsched.operator.cluster_index import ClusterIndex
from netsched.operator.gpujobs.controller import GPUJobController
from netsched.operator.metrics import JobCensus, OperatorMetrics
from netsched.records.writer import JobRecords
from netsched.testing.builders import CLUSTER, make_gpujob
from netsched.testing.kube import FakeKube

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def job(uid: str, phase: str | None, created: str = "2025-12-31T23:00:00Z") -> dict:
    body = make_gpujob(name=uid, uid=uid, created=created)
    body["status"] = {"phase": phase} if phase else {}
    return body


def sample(metrics: OperatorMetrics, name: str, labels: dict | None = None) -> float | None:
    return metrics.registry.get_sample_value(name, labels or {})


def phases(metrics: OperatorMetrics) -> dict[str, float]:
    return {p: sample(metrics, "netsched_gpujobs", {"phase": p}) for p in Phase}


def test_every_phase_is_exported_even_with_no_job():
    metrics = OperatorMetrics()
    assert phases(metrics) == {p: 0 for p in Phase}
    assert sample(metrics, "netsched_gpujob_oldest_waiting_seconds") == 0


def test_jobs_are_counted_by_phase_and_a_deleted_one_leaves_no_count_behind():
    metrics = OperatorMetrics()
    metrics.jobs.clock = lambda: NOW
    for body in (job("a", "Running"), job("b", "Running"), job("c", "Blocked"), job("d", "Succeeded"),
                 job("e", None)):  # no phase yet: the operator has not ticked it, it waits
        metrics.jobs.seen(body)
    assert phases(metrics) == {"Pending": 1, "Blocked": 1, "Scheduling": 0, "Running": 2, "Succeeded": 1,
                               "Failed": 0}
    metrics.jobs.seen(job("a", "Succeeded"))  # a job's next event moves it
    metrics.jobs.gone("d")
    metrics.jobs.gone("never-seen")
    assert phases(metrics) == {"Pending": 1, "Blocked": 1, "Scheduling": 0, "Running": 1, "Succeeded": 1,
                               "Failed": 0}


@pytest.mark.parametrize("jobs, oldest", [
    pytest.param([], 0, id="none"),
    pytest.param([("a", "Pending", "2025-12-31T23:00:00Z"), ("b", "Scheduling", "2025-12-31T22:00:00Z")],
                 7200, id="scheduling-counts-as-waiting"),
    pytest.param([("a", "Pending", "2025-12-31T23:30:00Z"), ("b", "Running", "2025-12-30T00:00:00Z"),
                  ("c", "Blocked", "2025-12-30T00:00:00Z")], 1800, id="running-and-blocked-do-not"),
])
def test_the_oldest_waiting_job_is_the_oldest_not_started_one(jobs, oldest):
    census = JobCensus(clock=lambda: NOW)
    metrics = OperatorMetrics()
    metrics.registry.unregister(metrics.jobs)
    metrics.registry.register(census)
    for uid, phase, created in jobs:
        census.seen(job(uid, phase, created))
    assert sample(metrics, "netsched_gpujob_oldest_waiting_seconds") == oldest


def test_queue_time_is_observed_once_when_the_gang_starts_not_per_tick(tmp_path):
    kube = FakeKube([make_gpujob(created="2026-01-01T00:00:00Z")])  # 2 replicas of 4 GPUs, gang on
    operator = GPUJobController(api=kube, records=JobRecords(tmp_path / "records.jsonl"))
    rooms = [node_room(n) for n in CLUSTER]

    def tick() -> dict:
        index = ClusterIndex()
        index.replace("pods", kube.list("pods", "ml"))
        operator.tick(kube.get(PLURAL, "ml", "train"), rooms, replace(index.indices({}), used={}, pending=[]))
        return kube.get(PLURAL, "ml", "train")["status"]

    def queued() -> tuple[float | None, float | None]:
        return (sample(operator.metrics, "netsched_gpujob_queue_seconds_count"),
                sample(operator.metrics, "netsched_gpujob_queue_seconds_sum"))

    assert tick()["phase"] == "Pending"  # pods made, gated
    assert tick()["phase"] == "Scheduling"  # gate lifted
    assert queued() == (0, 0)
    for n, pod in enumerate(kube.list("pods", "ml")):
        pod["spec"]["nodeName"] = CLUSTER[n]["metadata"]["name"]
        pod["status"] = {"phase": "Running", "startTime": f"2026-01-01T00:0{5 + n}:00Z"}
        kube.add(pod)
    status = tick()
    assert (status["phase"], status["startTime"]) == ("Running", "2026-01-01T00:06:00Z")
    for _ in range(3):
        tick()
    assert queued() == (1, 360)  # created 00:00, the second (last needed) replica started 00:06
    assert sample(operator.metrics, "netsched_gpujob_queue_seconds_bucket", {"le": "600.0"}) == 1
    assert sample(operator.metrics, "netsched_gpujob_queue_seconds_bucket", {"le": "300.0"}) == 0


def test_gangs_of_every_kind_are_counted_by_state_beside_the_gpujobs():
    metrics = OperatorMetrics()
    metrics.jobs.clock = metrics.gangs.clock = lambda: NOW
    assert sample(metrics, "netsched_gangs", {"kind": "Job", "state": "blocked"}) == 0
    assert sample(metrics, "netsched_gangs", {"kind": "PodGroup", "state": "waiting"}) == 0
    assert sample(metrics, "netsched_gang_oldest_waiting_seconds", {"kind": "KubeflowJob"}) == 0
    metrics.jobs.seen(job("a", "Blocked"))
    metrics.jobs.seen(job("b", "Pending", created="2025-12-31T22:00:00Z"))
    metrics.gangs.update([("Job", "blocked", NOW - 50), ("Job", "waiting", NOW - 30),
                          ("Job", "waiting", NOW - 10), ("JobSet", "waiting", NOW - 5)])
    assert sample(metrics, "netsched_gangs", {"kind": "Job", "state": "blocked"}) == 1
    assert sample(metrics, "netsched_gangs", {"kind": "Job", "state": "waiting"}) == 2
    assert sample(metrics, "netsched_gangs", {"kind": "GPUJob", "state": "blocked"}) == 1
    assert sample(metrics, "netsched_gangs", {"kind": "GPUJob", "state": "waiting"}) == 1
    # the oldest that waits, blocked ones left out (they are told on their own)
    assert sample(metrics, "netsched_gang_oldest_waiting_seconds", {"kind": "Job"}) == 30
    assert sample(metrics, "netsched_gang_oldest_waiting_seconds", {"kind": "GPUJob"}) == 7200
    metrics.gangs.update([])  # a pass that found none waiting (or a replica that stands by)
    assert sample(metrics, "netsched_gangs", {"kind": "Job", "state": "waiting"}) == 0
