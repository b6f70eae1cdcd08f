"""Foresight on the real dev-cluster: `netsched whatif` answers without creating anything, a waiting
gang says why with the best domain's room, and its predicted start is set while it waits and cleared
once it runs; with enough finished jobs recorded, each predicted time has its P10-P90 beside it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

from netsched.api.events import parse_rfc3339
from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.api.gpujob import PREDICTED_FINISH as FINISH
from netsched.api.gpujob import PREDICTED_FINISH_RANGE as FINISH_RANGE
from netsched.api.gpujob import PREDICTED_START as START
from netsched.api.gpujob import PREDICTED_START_RANGE as START_RANGE
from netsched.cli import main
from netsched.devcluster.wait import poll
from netsched.testing.builders import make_gpujob

RUN = {"expectedDurationSeconds": 600}


@pytest.fixture(scope="module")
def urgent(dev_cluster):
    sched = client.SchedulingV1Api(dev_cluster.api_client())
    name = f"test-urgent-{uuid.uuid4().hex[:6]}"
    sched.create_priority_class({"metadata": {"name": name}, "value": 100000})
    yield name
    sched.delete_priority_class(name)


def _fill(custom, core, namespace: str) -> list[str]:
    """2 × 8-GPU jobs on every node, each expected to run 600 s; their names."""
    names = [f"low-{i}" for i in range(len(core.list_node().items) // 2)]
    for name in names:
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
            name, replicas=2, gpus=8, duration="600s", manifest=True, workload=RUN))
    poll(lambda: all(_status(custom, namespace, n).get("phase") == "Running" for n in names), 90,
         "the filler jobs to run on every node")
    return names


def _status(custom, namespace: str, name: str) -> dict:
    return custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name).get("status") or {}


def _schedulable(status: dict) -> dict | None:
    return next((c for c in status.get("conditions") or () if c["type"] == "Schedulable"), None)


def _everything(dev_cluster) -> set[tuple[str, str]]:
    """(kind, uid) of every pod, GPUJob, PackingPlan and Event in the cluster."""
    api = dev_cluster.api_client()
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    found = {("Pod", p.metadata.uid) for p in core.list_pod_for_all_namespaces().items}
    found |= {("Event", e.metadata.uid) for e in core.list_event_for_all_namespaces().items}
    for group, plural in ((GROUP, PLURAL), (GROUP, "packingplans")):
        found |= {(plural, o["metadata"]["uid"]) for o in custom.list_cluster_custom_object(
            group, VERSION, plural)["items"]}
    return found


def test_whatif_on_a_full_cluster_names_the_blocking_job_and_the_plan_and_creates_nothing(
        dev_cluster, core, jobs, namespace, urgent, tmp_path, capsys):
    fillers = _fill(jobs, core, namespace)
    job = make_gpujob("urgent", replicas=2, gpus=8, duration="600s", manifest=True, priorityClassName=urgent)
    path = tmp_path / "urgent.json"
    path.write_text(json.dumps(job))
    before = _everything(dev_cluster)
    capsys.readouterr()
    assert main(["whatif", "-f", str(path), "-n", namespace, "-o", "json",
                 f"--kubeconfig={dev_cluster.kubeconfig}"]) == 0
    answer = json.loads(capsys.readouterr().out)
    events_after = _everything(dev_cluster)
    # nothing made; the filler jobs' own life (status Events of the running cluster) may go on meanwhile
    assert {k for k in events_after - before if k[0] != "Event"} == set()
    assert not jobs.list_cluster_custom_object(GROUP, VERSION, "packingplans")["items"]

    assert answer["schedulable"]["fits"] is False and answer["priority"] == 100000
    assert answer["waitsFor"] and set(answer["waitsFor"]) <= {f"{namespace}/{n}" for n in fillers}
    assert answer["predictedStartTime"] and answer["estimate"]["seconds"] is None  # no history: said so
    plan = answer["packer"]
    assert plan["wouldPlan"] is True and len(plan["evictions"]) == 2
    victims = {e["pod"].split("/")[1].rsplit("-", 1)[0] for e in plan["evictions"]}
    assert len(victims) == 1 and victims <= set(fillers)  # one whole low-priority gang
    assert sorted(p["pod"] for p in plan["placements"]) == [f"{namespace}/urgent-0", f"{namespace}/urgent-1"]


def test_a_waiting_gang_names_the_best_domain_and_has_a_predicted_start_until_it_runs(
        dev_cluster, core, jobs, namespace, capsys):
    fillers = _fill(jobs, core, namespace)
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "waiter", replicas=2, gpus=8, duration="600s", manifest=True, network={"maxPeerDistance": "rack"},
        workload=RUN))
    waiting = poll(lambda: (s := _status(jobs, namespace, "waiter")).get("predictedStartTime")
                   and _schedulable(s) and s, 60, "the waiting gang's reason and predicted start")
    assert waiting["phase"] == "Pending"
    assert waiting["predictedCompletionTime"] > waiting["predictedStartTime"]
    after = waiting["predictedAfter"]
    assert after and set(after) <= {f"{namespace}/{n}" for n in fillers}
    schedulable = _schedulable(waiting)
    assert schedulable["reason"] == "InsufficientResources"
    assert "the best rack, rack-" in schedulable["message"] and "has 0 free GPUs" in schedulable["message"]
    capsys.readouterr()
    assert main(["why", "waiter", "-n", namespace, f"--kubeconfig={dev_cluster.kubeconfig}"]) == 0
    said = capsys.readouterr().out
    assert "InsufficientResources" in said and "Predicted start:" in said and "Room per rack now" in said

    for name in fillers:  # every rack frees
        jobs.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    running = poll(lambda: (s := _status(jobs, namespace, "waiter")).get("phase") == "Running" and s, 90,
                   "the gang to run once the fillers are gone")
    poll(lambda: not {"predictedStartTime", "predictedAfter"} & set(_status(jobs, namespace, "waiter")), 30,
         "the predicted start to be cleared")
    assert running["startTime"]


@pytest.fixture
def recorded(dev_cluster) -> Iterator[None]:
    """12 finished 2 × 8-GPU training jobs in the operator's records, hinted at 600 s, that ran 420 to 900
    s; taken out again afterwards (the operator may have added rows of its own meanwhile)."""
    path = dev_cluster.records_file
    runs = (420, 480, 540, 570, 600, 600, 630, 660, 700, 750, 820, 900)
    with path.open("a") as f:
        for i, seconds in enumerate(runs):
            f.write(json.dumps({"schema_version": 1, "uid": f"interval-history-{i}", "outcome": "Succeeded",
                                "duration_seconds": seconds, "workload_kind": "training", "replicas": 2,
                                "gpus_per_replica": 8, "gpus": 16, "expected_duration_seconds": 600}) + "\n")
    yield
    kept = [line for line in path.read_text().splitlines(keepends=True) if "interval-history-" not in line]
    path.write_text("".join(kept))


def test_with_finished_jobs_recorded_each_predicted_time_has_its_80_percent_interval(
        dev_cluster, core, jobs, namespace, recorded, capsys):
    _fill(jobs, core, namespace)
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "planned", replicas=2, gpus=8, duration="600s", manifest=True, workload=RUN))
    fields = (*START_RANGE, *FINISH_RANGE)
    status = poll(lambda: (s := _status(jobs, namespace, "planned")).get(START)
                  and all(s.get(f) for f in fields) and s, 60, "the waiting job's times and intervals")
    for low, mid, high in ((START_RANGE[0], START, START_RANGE[1]),
                           (FINISH_RANGE[0], FINISH, FINISH_RANGE[1])):
        times = [parse_rfc3339(status[f]) for f in (low, mid, high)]
        assert times[0] < times[1] < times[2], (low, mid, high, status)
    # it waits for a filler that runs 420-900 s like the recorded ones: its start is that uncertain
    early, late = (parse_rfc3339(status[f]) for f in START_RANGE)
    assert (late - early).total_seconds() > 60
    assert "blended from" in status["predictionBasis"]
    capsys.readouterr()
    assert main(["why", "planned", "-n", namespace, f"--kubeconfig={dev_cluster.kubeconfig}"]) == 0
    said = capsys.readouterr().out
    assert f"Predicted completion: {status[FINISH]} (80% between " in said


@pytest.fixture
def late_starts(dev_cluster) -> Iterator[None]:
    """12 finished jobs in the operator's records whose first forecast said "starts now, no doubt about
    it" and which started 600 s later; taken out again afterwards."""
    path = dev_cluster.records_file
    said, began = "2026-01-01T10:00:00Z", "2026-01-01T10:10:00Z"
    with path.open("a") as f:
        for i in range(12):
            f.write(json.dumps({"schema_version": 1, "uid": f"late-start-{i}", "outcome": "Succeeded",
                                "duration_seconds": 600, "workload_kind": "training", "replicas": 2,
                                "gpus_per_replica": 8, "gpus": 16, "expected_duration_seconds": 600,
                                "start_time": began, "completion_time": "2026-01-01T10:20:00Z",
                                "first_forecast": {"at": said, "start": said, "startP10": said,
                                                   "startP90": said}}) + "\n")
    yield
    kept = [line for line in path.read_text().splitlines(keepends=True) if "late-start-" not in line]
    path.write_text("".join(kept))


def test_a_start_interval_is_widened_by_how_late_recorded_first_forecasts_were(
        dev_cluster, core, jobs, namespace, late_starts):
    _fill(jobs, core, namespace)
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "late", replicas=2, gpus=8, duration="600s", manifest=True, workload=RUN))
    status = poll(lambda: (s := _status(jobs, namespace, "late")).get(START_RANGE[1])
                  and s.get("firstForecast") and s, 60, "the waiting job's start interval and first forecast")
    first = status["firstForecast"]
    played = parse_rfc3339(first.get("startP90") or first["start"])  # as played: no correction in it
    # every recorded start came 600 s after a forecast that looked 0 s ahead: the late end moves by
    # 10 × (how far this one looks ahead + 60 s), 600 s at least
    assert (parse_rfc3339(status[START_RANGE[1]]) - played).total_seconds() >= 590, (first, status)


def test_a_finished_jobs_record_carries_its_first_forecast(dev_cluster, jobs, namespace):
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "brief", replicas=1, gpus=8, duration="30s", manifest=True, workload={"expectedDurationSeconds": 30}))
    first = poll(lambda: _status(jobs, namespace, "brief").get("firstForecast"), 60, "a first forecast")
    uid = jobs.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "brief")["metadata"]["uid"]
    row = poll(lambda: next((r for line in dev_cluster.records_file.read_text().splitlines() if line.strip()
                             and (r := json.loads(line)).get("uid") == uid), None), 120, "the job's record")
    assert row["first_forecast"] == first and first["completion"]
