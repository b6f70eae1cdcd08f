"""The forecast loop: what it writes into a GPUJob's status, and what it reads to do so."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path

from kubernetes import client

from netsched.api.connect import items
from netsched.api.events import rfc3339
from netsched.api.labels import (
    EXPECTED_SECONDS,
    PREDICTED_FINISH,
    PREDICTED_FINISH_RANGE,
    PREDICTED_START,
    PREDICTED_START_RANGE,
)
from netsched.devcluster.wait import poll
from netsched.jobs.capacity import node_room
from netsched.jobs.forecast import Estimate, Forecast
from netsched.jobs.kinds.kueue_pod_group import KUEUE_POD_GROUP
from netsched.jobs.kinds.leaderworkerset import LEADER_WORKER_SET
from netsched.jobs.kinds.pod_group import POD_GROUP
from netsched.jobs.replica_pods import GANG_GATE
from netsched.operator.cluster_index import ClusterIndex
from netsched.operator.forecaster import loop as forecaster_module
from netsched.operator.forecaster.loop import Forecaster
from netsched.operator.forecaster.patches import status_patch
from netsched.operator.metrics import OperatorMetrics
from netsched.records.writer import JobRecords, job_record
from netsched.testing.builders import (
    CLUSTER,
    H100,
    NOW,
    ago,
    job,
    make_batch_job,
    make_gpujob,
    make_job_pod,
    make_pod,
)
from netsched.testing.kube import FakeKube

MODELS = Path(__file__).resolve().parents[3] / "models"  # the model the image ships


class Listed:
    """The nodes and pods the operator's watches hold, here listed from the fake API server at each
    read: the tests change them between passes, and what a pass read shows in `kube.calls`."""
    synced = True

    def __init__(self, kube: FakeKube):
        self.core = client.CoreV1Api(kube)

    def rooms(self):
        return [node_room(n) for n in items(self.core.list_node)]

    def pods(self):
        return items(self.core.list_pod_for_all_namespaces)


def at(seconds: float):
    return NOW + timedelta(seconds=seconds)


def test_a_forecast_is_written_when_new_and_again_only_when_it_moved_by_more_than_a_tenth_of_what_is_left():
    estimate = Estimate(600, "basis")
    first = status_patch({}, Forecast(at(100), at(700), estimate), NOW)
    assert first == {"predictedStartTime": rfc3339(at(100)),
                     "predictedCompletionTime": rfc3339(at(700)),
                     "predictedDurationSeconds": 600, "predictionBasis": "basis",
                     "firstForecast": {"at": rfc3339(NOW), "start": rfc3339(at(100)),
                                       "completion": rfc3339(at(700))}}
    moved_a_bit = Forecast(at(120), at(760), estimate)
    assert status_patch(first, moved_a_bit, NOW) == {}
    moved_far = Forecast(at(400), at(1000), estimate)
    assert status_patch(first, moved_far, NOW) == {"predictedStartTime": rfc3339(at(400)),
                                                   "predictedCompletionTime": rfc3339(at(1000))}
    running = Forecast(None, at(700), estimate)
    assert status_patch(first, running, NOW) == {"predictedStartTime": None}
    behind = Forecast(at(100), at(700), estimate, after=("ml/big",))
    assert status_patch(first, behind, NOW) == {"predictedAfter": ["ml/big"]}
    assert status_patch(first | {"predictedAfter": ["ml/big"]}, running, NOW) == {
        "predictedStartTime": None, "predictedAfter": None}


def test_the_interval_is_written_beside_each_predicted_time_and_taken_off_with_it():
    estimate = Estimate(600, "basis", (0.8, 1.3))
    waiting = Forecast(at(100), at(700), estimate, start_range=(at(50), at(200)),
                       finish_range=(at(600), at(900)))
    first = status_patch({}, waiting, NOW)
    assert {k: first[k] for k in first if k.endswith(("P10", "P90"))} == {
        "predictedStartTimeP10": rfc3339(at(50)), "predictedStartTimeP90": rfc3339(at(200)),
        "predictedCompletionTimeP10": rfc3339(at(600)), "predictedCompletionTimeP90": rfc3339(at(900))}
    running = Forecast(None, at(700), estimate, finish_range=(at(600), at(900)))
    assert status_patch(first, running, NOW) == {"predictedStartTime": None, "predictedStartTimeP10": None,
                                                 "predictedStartTimeP90": None}


def _forecaster(kube, tmp_path, gangs_live=lambda: True, model=None):
    return Forecaster(kube, JobRecords(tmp_path / "records.jsonl"), OperatorMetrics(), Listed(kube),
                      gangs_live=gangs_live, model=model)


def test_the_shipped_model_prices_a_job_by_its_gpu_and_an_unusable_one_is_done_without(tmp_path, caplog):
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps(
        {"uid": f"u{i}", "outcome": "Succeeded", "duration_seconds": 300 + 10 * i, "replicas": 1,
         "workload_kind": "training", "gpus_per_replica": 8, "expected_duration_seconds": 300,
         "gpu_models": [H100]}) + "\n" for i in range(12)))
    hint = {"expectedDurationSeconds": 300}
    waiting = make_gpujob("wait", replicas=1, gpus=8, created=ago(60), workload=hint)
    kube = FakeKube([*CLUSTER, waiting])
    forecaster = Forecaster(kube, JobRecords(records), OperatorMetrics(), Listed(kube),
                            model=MODELS / "current.json")
    forecaster.run_once(NOW)
    status = kube.get("gpujobs", "ml", "wait")["status"]
    assert f"the completion-time model on {H100}" in status["predictionBasis"]
    assert status["predictedCompletionTimeP10"] < status["predictedCompletionTime"] < (
        status["predictedCompletionTimeP90"])
    broken = tmp_path / "broken"
    broken.mkdir()
    kube = FakeKube([*CLUSTER, waiting])
    Forecaster(kube, JobRecords(records), OperatorMetrics(), Listed(kube), model=broken).run_once(NOW)
    basis = kube.get("gpujobs", "ml", "wait")["status"]["predictionBasis"]
    assert "model" not in basis and "spec.workload.expectedDurationSeconds" in basis
    assert f"model {broken} not used" in caplog.text


def test_with_no_unfinished_gpujob_and_no_live_pod_gang_the_forecaster_reads_no_node_and_no_pod(tmp_path):
    done = make_gpujob("old")
    done["status"] = {"phase": "Succeeded"}
    kube = FakeKube([*CLUSTER, make_pod("busy", "a1-0", gpus=8), done])
    forecaster = _forecaster(kube, tmp_path, gangs_live=lambda: False)
    forecaster.run_once(NOW)  # the first pass looks for predicted times left on Jobs and pods
    calls = len(kube.calls)
    forecaster.run_once(NOW)
    assert [c.plural for c in kube.calls[calls:]] == ["gpujobs"]
    assert not kube.made("list", "nodes")


def test_a_waiting_gpujob_is_forecast_from_the_nodes_and_pods(tmp_path):
    waiting = make_gpujob("wait", replicas=1, gpus=8, created=ago(60))
    kube = FakeKube([*CLUSTER, *(make_pod(f"busy-{n['metadata']['name']}", n["metadata"]["name"], gpus=8)
                                 for n in CLUSTER), waiting])
    _forecaster(kube, tmp_path).run_once(NOW)
    assert kube.made("list", "nodes") and kube.made("list", "pods")
    status = kube.get("gpujobs", "ml", "wait")["status"]
    assert "predictionBasis" in status


def lots_of_cpu(name: str) -> dict:
    return make_gpujob(name, replicas=1, gpus=8, created=ago(60), template={"spec": {"containers": [
        {"name": "main", "image": "t:1", "resources": {"requests": {"cpu": "lots"}}}]}})


def test_one_job_that_cannot_be_read_costs_only_itself_its_forecast_and_is_logged_once(tmp_path, caplog):
    kube = FakeKube([*CLUSTER, lots_of_cpu("bad"), make_gpujob("good", replicas=1, gpus=8, created=ago(60))])
    forecaster = _forecaster(kube, tmp_path)
    for _ in range(3):
        forecaster.run_once(NOW)
    good, bad = kube.get("gpujobs", "ml", "good")["status"], kube.get("gpujobs", "ml", "bad")["status"]
    assert "predictionBasis" in good and good["predictedStartTime"] == rfc3339(NOW)
    assert "predictedStartTime" not in bad and bad["predictionBasis"].startswith(
        "no forecast: spec.template.spec.containers[0].resources.requests.cpu: 'lots'")
    assert [r.getMessage() for r in caplog.records] == [f"GPUJob ml/bad: {bad['predictionBasis']}"]


def test_a_blocked_job_loses_its_predicted_times_and_a_refused_write_stops_no_other(tmp_path):
    blocked = make_gpujob("blocked", replicas=1, gpus=8, created=ago(60))
    blocked["status"] = {"phase": "Blocked", "predictedStartTime": ago(30),
                         "predictedCompletionTime": ago(10), "predictedAfter": ["ml/x"]}
    kube = FakeKube([*CLUSTER, blocked, *(make_gpujob(n, replicas=1, gpus=8, created=ago(60)) for n in "ab")])
    kube.fail("patch", "gpujobs", 422, "refused")  # the first job's write
    _forecaster(kube, tmp_path).run_once(NOW)
    status = kube.get("gpujobs", "ml", "blocked")["status"]
    assert {"predictedStartTime", "predictedCompletionTime", "predictedAfter"}.isdisjoint(status)
    written = [n for n in "ab" if "predictionBasis" in (kube.get("gpujobs", "ml", n).get("status") or {})]
    assert len(written) == 1  # one write was refused, the other still made


def test_a_jobs_predicted_times_are_annotations_written_when_they_move_and_taken_off_when_it_ends(tmp_path):
    hint = {EXPECTED_SECONDS: "500"}
    running = [make_job_pod("big", i, n["metadata"]["name"], gpus=8, annotations=hint, started=ago(100))
               for i, n in enumerate(CLUSTER)]  # every GPU, until 400 s from now
    waiting = [make_job_pod("train", i, gpus=8, annotations={EXPECTED_SECONDS: "900"}, gated=True)
               for i in range(2)]
    kube = FakeKube([*CLUSTER, *running, *waiting, make_batch_job("big", 4), make_batch_job("train", 2),
                     make_batch_job("other", 1, annotations={"keep": "me"})])
    forecaster = _forecaster(kube, tmp_path)
    forecaster.run_once(NOW)
    assert annotations(kube, "train") == {PREDICTED_START: rfc3339(at(400)),
                                          PREDICTED_FINISH: rfc3339(at(1300))}
    assert annotations(kube, "big") == {PREDICTED_FINISH: rfc3339(at(400))}  # running: no start
    assert annotations(kube, "other") == {"keep": "me"}  # not a gang: untouched
    assert len(kube.made("patch", "jobs")) == 2 and not kube.made("patch", "gpujobs")

    forecaster.run_once(NOW + timedelta(seconds=20))  # the same forecast: nothing written
    assert len(kube.made("patch", "jobs")) == 2

    for pod in running:  # big ends early: train starts now
        kube.add(pod | {"status": {"phase": "Succeeded"}})
    forecaster.run_once(NOW + timedelta(seconds=60))
    assert annotations(kube, "big") == {}
    assert annotations(kube, "train") == {PREDICTED_START: rfc3339(at(60)),
                                          PREDICTED_FINISH: rfc3339(at(960))}

    for pod in waiting:  # train ends without ever being released here (its pods deleted)
        kube.delete("pods", "ml", pod["metadata"]["name"])
    quiet = _forecaster(kube, tmp_path, gangs_live=lambda: False)  # a restarted operator: nothing live
    calls = len(kube.calls)
    quiet.run_once(NOW + timedelta(seconds=90))
    assert annotations(kube, "train") == {} and annotations(kube, "other") == {"keep": "me"}
    listed = [c.plural for c in kube.calls[calls:] if c.verb == "list"]
    assert listed == ["gpujobs", "jobs", "pods"]  # no node: nothing to forecast, only times to take off
    calls = len(kube.calls)
    quiet.run_once(NOW + timedelta(seconds=120))  # no Job carries a predicted time any more: not even listed
    assert [c.plural for c in kube.calls[calls:]] == ["gpujobs"]


def annotations(kube: FakeKube, job: str) -> dict:
    return kube.get("jobs", "ml", job)["metadata"].get("annotations") or {}


def test_with_enough_finished_jobs_a_jobs_annotations_carry_the_interval_and_lose_it_when_it_ends(tmp_path):
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(
        {"uid": f"u{i}", "outcome": "Succeeded", "duration_seconds": 900 * r, "workload_kind": "training",
         "expected_duration_seconds": 900}) + "\n" for i, r in enumerate([0.8, 0.9, 1.0, 1.1, 1.2] * 2)))
    hint = {EXPECTED_SECONDS: "900"}
    running = [make_job_pod("big", i, n["metadata"]["name"], gpus=8, annotations=hint, started=ago(100))
               for i, n in enumerate(CLUSTER)]
    waiting = [make_job_pod("train", i, gpus=8, annotations=hint, gated=True) for i in range(2)]
    kube = FakeKube([*CLUSTER, *running, *waiting, make_batch_job("big", 4), make_batch_job("train", 2)])
    _forecaster(kube, tmp_path).run_once(NOW)
    train, big = annotations(kube, "train"), annotations(kube, "big")
    assert set(train) == {PREDICTED_START, *PREDICTED_START_RANGE, PREDICTED_FINISH, *PREDICTED_FINISH_RANGE}
    assert train[PREDICTED_START_RANGE[0]] < train[PREDICTED_START] < train[PREDICTED_START_RANGE[1]]
    assert set(big) == {PREDICTED_FINISH, *PREDICTED_FINISH_RANGE}  # running: no start, nor its interval
    for pod in running:
        kube.add(pod | {"status": {"phase": "Succeeded"}})
    _forecaster(kube, tmp_path).run_once(NOW + timedelta(seconds=60))
    assert annotations(kube, "big") == {}


def test_a_gang_no_batch_job_owns_carries_its_times_on_its_first_pod(tmp_path):
    group = {"labels": {KUEUE_POD_GROUP.name_labels[0]: "g"},
             "annotations": {KUEUE_POD_GROUP.size_annotation: "2", EXPECTED_SECONDS: "300"}}
    pods = [make_pod(f"g-{i}", gpus=8, schedulingGates=[{"name": GANG_GATE}], **group) for i in range(2)]
    lws = {"labels": dict.fromkeys(LEADER_WORKER_SET.name_labels, "0"),
           "annotations": {LEADER_WORKER_SET.size_annotation: "1", EXPECTED_SECONDS: "300"}}
    kube = FakeKube([*CLUSTER, *pods, make_pod("w-0", gpus=8, owner="StatefulSet", **lws)])
    forecaster = _forecaster(kube, tmp_path)
    forecaster.run_once(NOW)
    first = kube.get("pods", "ml", "g-0")["metadata"]["annotations"]
    assert first[PREDICTED_START] == rfc3339(NOW) and first[PREDICTED_FINISH] == rfc3339(at(300))
    assert PREDICTED_START not in kube.get("pods", "ml", "g-1")["metadata"]["annotations"]
    assert kube.get("pods", "ml", "w-0")["metadata"]["annotations"][PREDICTED_FINISH] == rfc3339(at(300))

    for i in range(2):  # released, ran and ended
        kube.add(kube.get("pods", "ml", f"g-{i}") | {"status": {"phase": "Succeeded"}})
    forecaster.run_once(NOW + timedelta(seconds=400))
    assert PREDICTED_FINISH not in kube.get("pods", "ml", "g-0")["metadata"]["annotations"]


def test_only_a_leading_forecaster_runs_its_passes_and_each_is_timed(tmp_path):
    metrics = OperatorMetrics()
    leading = {"now": False}
    kube = FakeKube([*CLUSTER, make_gpujob("waits")])
    forecaster = Forecaster(kube, JobRecords(tmp_path / "records.jsonl"), metrics, Listed(kube),
                            interval=0.01,
                            leads=lambda: leading["now"])

    def passes() -> float:
        return metrics.registry.get_sample_value("netsched_operator_forecast_pass_seconds_count") or 0.0

    forecaster.start()
    try:
        time.sleep(0.2)  # many intervals: a replica that stands by passes on each
        assert passes() == 0 and not kube.made("list", "gpujobs")
        leading["now"] = True
        poll(lambda: passes() >= 2, 30, "two timed passes once it leads", interval=0.01)
        assert kube.made("list", "gpujobs")
    finally:
        forecaster.stop()


def test_what_the_records_teach_is_learned_again_only_when_they_change(tmp_path, monkeypatch):
    learned = []

    class Counted(forecaster_module.Learned):
        def __init__(self, *args, **kwargs):
            learned.append(1)
            super().__init__(*args, **kwargs)
    monkeypatch.setattr(forecaster_module, "Learned", Counted)
    records = JobRecords(tmp_path / "records.jsonl")
    kube = FakeKube([*CLUSTER, make_gpujob("wait", replicas=1, gpus=8, created=ago(60))])
    forecaster = Forecaster(kube, records, OperatorMetrics(), Listed(kube))
    forecaster.run_once(NOW)
    forecaster.run_once(NOW + timedelta(seconds=15))
    assert len(learned) == 1
    records.append({"uid": "u1", "outcome": "Succeeded", "duration_seconds": 300})
    forecaster.run_once(NOW + timedelta(seconds=30))
    assert len(learned) == 2


def test_a_jobs_first_forecast_is_kept_as_played_until_it_ends_and_recorded_with_it():
    estimate = Estimate(600, "basis", (0.8, 1.3))
    waiting = Forecast(at(100), at(700), estimate, start_range=(at(50), at(300)),
                       finish_range=(at(600), at(990)), start_played=(at(80), at(200)),
                       finish_played=(at(600), at(900)))
    status = status_patch({}, waiting, NOW)
    assert status["firstForecast"] == {
        "at": rfc3339(NOW), "start": rfc3339(at(100)), "startP10": rfc3339(at(80)),
        "startP90": rfc3339(at(200)), "completion": rfc3339(at(700)), "completionP10": rfc3339(at(600)),
        "completionP90": rfc3339(at(900))}
    later = Forecast(at(500), at(1100), estimate)
    assert "firstForecast" not in status_patch(status, later, at(60))
    finished = status | {"phase": "Succeeded", "startTime": rfc3339(at(120)),
                         "completionTime": rfc3339(at(800))}
    assert job_record(job(), finished, {})["first_forecast"] == status["firstForecast"]


def test_before_the_operators_watches_have_listed_nodes_and_pods_nothing_is_forecast_or_written(tmp_path):
    kube = FakeKube([*CLUSTER, make_gpujob("wait", replicas=1, gpus=8, created=ago(60))])
    index = ClusterIndex()
    forecaster = Forecaster(kube, JobRecords(tmp_path / "records.jsonl"), OperatorMetrics(), index)
    index.replace("nodes", CLUSTER)  # pods not listed yet: the job would look as if every GPU were free
    forecaster.run_once(NOW)
    assert not kube.calls
    index.replace("pods", [make_pod("busy", "a1-0", gpus=8)])
    forecaster.run_once(NOW)
    assert "predictionBasis" in kube.get("gpujobs", "ml", "wait")["status"]
    assert not kube.made("list", "nodes") and not kube.made("list", "pods")  # the watches' view, not lists


def test_a_podgroups_gang_is_sized_by_its_podgroup_and_forecast_on_its_first_pod(tmp_path):
    group = {"labels": {POD_GROUP.name_labels[0]: "pg"}, "annotations": {EXPECTED_SECONDS: "300"}}
    pods = [make_pod(f"pg-{i}", gpus=8, schedulingGates=[{"name": GANG_GATE}], **group) for i in range(2)]
    podgroup = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                "metadata": {"name": "pg", "namespace": "ml"}, "spec": {"minMember": 2}}
    kube = FakeKube([*CLUSTER, *pods, podgroup])
    _forecaster(kube, tmp_path).run_once(NOW)
    first = kube.get("pods", "ml", "pg-0")["metadata"]["annotations"]
    assert first[PREDICTED_START] == rfc3339(NOW) and first[PREDICTED_FINISH] == rfc3339(at(300))
