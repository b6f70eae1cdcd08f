"""The operator's tick carried out against a fake API server: the pods, status and Events it writes."""

from __future__ import annotations

from dataclasses import replace

import pytest
import urllib3

from netsched.api import conditions as c
from netsched.api.gpujob import PLURAL
from netsched.api.labels import RACK_LABEL
from netsched.jobs.capacity import node_room
from netsched.jobs.gpujob import GPUJob
from netsched.jobs.replica_pods import GANG_GATE, replica_pod
from netsched.operator.cluster_index import ClusterIndex, Indices
from netsched.operator.gpujobs.controller import GPUJobController
from netsched.records.writer import JobRecords
from netsched.testing.builders import CLUSTER, make_gpujob
from netsched.testing.kube import FakeKube

ROOMS = [node_room(n) for n in CLUSTER]


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube([make_gpujob()])  # 2 replicas of 4 GPUs, gang on


@pytest.fixture
def operator(kube, tmp_path) -> GPUJobController:
    return GPUJobController(api=kube, records=JobRecords(tmp_path / "records.jsonl"))


def tick(operator: GPUJobController, kube: FakeKube) -> dict:
    """One tick of the stored job, its replica pods as the ClusterIndex shows them; the job afterwards."""
    operator.tick(kube.get(PLURAL, "ml", "train"), ROOMS, replicas(kube))
    return kube.get(PLURAL, "ml", "train")


def replicas(kube: FakeKube) -> Indices:
    index = ClusterIndex()
    index.replace("pods", kube.list("pods", "ml"))
    return replace(index.indices({}), used={}, pending=[])  # room is the tests' ROOMS, all free


def errors(operator: GPUJobController, action: str) -> float:
    registry = operator.metrics.registry
    return registry.get_sample_value("netsched_operator_api_errors_total", {"action": action}) or 0


def condition(job: dict, type_: str) -> dict:
    return next(x for x in job["status"]["conditions"] if x["type"] == type_)


def test_a_new_gang_gets_gated_pods_then_its_gate_lifted_when_it_fits(operator, kube):
    job = tick(operator, kube)
    pods = kube.list("pods", "ml")
    assert [p["metadata"]["name"] for p in pods] == ["train-0", "train-1"]
    assert all(p["spec"]["schedulingGates"] == [{"name": GANG_GATE}] for p in pods)
    assert job["status"]["phase"] == "Pending" and job["status"]["reason"] == "WaitingForCapacity"
    events = kube.list("events", "ml")
    assert [e["reason"] for e in events] == ["PodsCreated", "Pending"]
    assert all(e["involvedObject"]["name"] == "train" for e in events)

    job = tick(operator, kube)  # the index shows both pods gated; 2 x 4 GPUs fit
    assert all(not p["spec"].get("schedulingGates") for p in kube.list("pods", "ml"))
    assert condition(job, c.ADMITTED)["status"] == "True"
    assert len(kube.made("patch", "pods")) == 2 and errors(operator, "ungate") == 0


def test_a_pod_an_earlier_tick_created_is_not_an_error(operator, kube):
    kube.fail("create", "pods", 409, 'pods "train-0" already exists')
    tick(operator, kube)
    assert [p["metadata"]["name"] for p in kube.list("pods", "ml")] == ["train-1"]
    assert errors(operator, "create") == 0


MISSING_CLASS = 'pods "train-0" is forbidden: no PriorityClass with name urgent was found'


@pytest.mark.parametrize("code, said, reason, fix", [
    pytest.param(422, 'Pod "train-0" is invalid: spec.containers[0].image: Required value', "PodsRefused",
                 "correct the field named above in spec.template.spec", id="invalid"),
    pytest.param(403, MISSING_CLASS, "PodsRefused", "create that PriorityClass (`kubectl get "
                 "priorityclass` lists them), or name an existing one in spec.priorityClassName",
                 id="missing-priority-class"),
    pytest.param(403, 'pods "train-0" is forbidden: exceeded quota: gpus, requested: nvidia.com/gpu=4',
                 "PodsRefused", "raise the namespace's ResourceQuota", id="quota"),
    pytest.param(500, "etcdserver: request timed out", "ApiUnavailable", None, id="server-error"),
    pytest.param(429, "too many requests", "ApiUnavailable", None, id="throttled"),
])
def test_a_refused_pod_says_why_once_and_waits_before_trying_again(operator, kube, code, said, reason, fix):
    kube.fail("create", "pods", code, said, times=100)
    job = tick(operator, kube)
    ready = condition(job, c.PODS_READY)
    assert (ready["status"], ready["reason"], job["status"]["reason"]) == ("False", reason, reason)
    assert ready["message"].startswith("cannot create pod ml/train-0: ") and said in ready["message"]
    assert fix is None or f"; fix: {fix}" in ready["message"]
    # refused for good: Blocked, with no predicted times, but tried again so that a fix is found
    assert job["status"]["phase"] == ("Blocked" if fix else "Pending")
    assert fix is None or ready["message"].endswith(
        "; tried again at least every 300 s, so the job goes on by itself once that is fixed")
    assert len(kube.made("create", "pods")) == 1  # the next replica would meet the same refusal
    backoff = job["status"]["podCreateBackoff"]
    assert (backoff["failures"], backoff["permanent"]) == (1, fix is not None)
    for _ in range(5):  # backing off: no create, no Event
        tick(operator, kube)
    assert len(kube.made("create", "pods")) == 1 and errors(operator, "create") == 1
    expire_backoff(kube)
    job = tick(operator, kube)  # the retry is refused the same way: no new Event, a longer wait
    assert len(kube.made("create", "pods")) == 2
    assert job["status"]["podCreateBackoff"]["delaySeconds"] == 2 * backoff["delaySeconds"]
    assert job["status"]["phase"] == ("Blocked" if fix else "Pending")
    events = [(e["type"], e["reason"]) for e in kube.list("events", "ml")]
    assert events == [("Normal", "Pending"), ("Warning", reason)]  # never "PodsCreated", nor "Blocked"


def test_a_restarted_operator_keeps_waiting_out_the_backoff(operator, kube, tmp_path):
    kube.fail("create", "pods", 403, MISSING_CLASS, times=100)
    tick(operator, kube)
    restarted = GPUJobController(api=kube, records=JobRecords(tmp_path / "records.jsonl"))
    for _ in range(3):
        tick(restarted, kube)
    assert len(kube.made("create", "pods")) == 1 and len(kube.list("events", "ml")) == 2


@pytest.mark.parametrize("fixed_by", ["cluster", "spec"])
def test_once_the_refusal_is_fixed_the_pods_are_made_and_said_so_once(operator, kube, fixed_by):
    kube.fail("create", "pods", 403, MISSING_CLASS, times=1)
    tick(operator, kube)
    if fixed_by == "spec":  # a new generation is tried at once, whatever the backoff says
        job = kube.get(PLURAL, "ml", "train")
        job["metadata"]["generation"] += 1
        kube.add(job, PLURAL)
    else:  # the PriorityClass was created: found at the next try
        expire_backoff(kube)
    job = tick(operator, kube)
    assert [p["metadata"]["name"] for p in kube.list("pods", "ml")] == ["train-0", "train-1"]
    assert "podCreateBackoff" not in job["status"] and job["status"]["podsCreated"] == 2
    created = [e["message"] for e in kube.list("events", "ml") if e["reason"] == "PodsCreated"]
    assert created == ["created 2 pod(s) of 4 GPU(s) behind the gang gate until the whole gang fits"]
    job = tick(operator, kube)
    assert condition(job, c.PODS_READY)["reason"] != "PodsRefused"
    assert (job["status"]["phase"], job["status"]["reason"]) == ("Scheduling", "WaitingForPods")  # it fits


def test_a_create_the_api_server_never_answers_is_retried_soon(operator, kube, monkeypatch):
    def unreachable(*_, **__):
        raise urllib3.exceptions.MaxRetryError(None, "/api/v1/namespaces/ml/pods", "connection refused")
    monkeypatch.setattr(operator.core, "create_namespaced_pod", unreachable)
    job = tick(operator, kube)
    assert condition(job, c.PODS_READY)["reason"] == "ApiUnavailable"
    assert job["status"]["podCreateBackoff"]["delaySeconds"] == 1


def test_a_restart_between_creates_does_not_call_the_missing_pods_recreated(operator, kube):
    kube.fail("create", "pods", 500, "the operator was killed here")
    tick(operator, kube)  # a status without podsCreated, as an older operator wrote it
    job = kube.get(PLURAL, "ml", "train")
    del job["status"]["podsCreated"], job["status"]["podCreateBackoff"]
    kube.add(job, PLURAL)
    kube.add(replica_pod(GPUJob.of(job), 0, 0, gated=True))
    tick(operator, kube)
    reasons = [(e["reason"], e["message"]) for e in kube.list("events", "ml") if e["type"] == "Normal"]
    assert ("PodsCreated", "created 1 pod(s) of 4 GPU(s) behind the gang gate until the whole gang fits") \
        in reasons and "PodRecreated" not in {r for r, _ in reasons}


def expire_backoff(kube: FakeKube) -> None:
    job = kube.get(PLURAL, "ml", "train")
    job["status"]["podCreateBackoff"]["retryAt"] = "2000-01-01T00:00:00Z"
    kube.add(job, PLURAL)


def test_a_failed_status_write_is_counted_and_the_tick_goes_on(operator, kube):
    kube.fail("patch", PLURAL, 500, "etcdserver: request timed out")
    tick(operator, kube)
    assert errors(operator, "status") == 1 and len(kube.list("pods", "ml")) == 2
    assert [e["reason"] for e in kube.list("events", "ml")] == ["PodsCreated", "Pending"]


@pytest.mark.parametrize("container, pod", [
    pytest.param({"env": 5}, {}, id="env-number"),
    pytest.param({"env": "A=1"}, {}, id="env-string"),
    pytest.param({}, {"schedulingGates": 5}, id="gates-number"),
    pytest.param({"resources": {"requests": {"cpu": "lots"}}}, {}, id="cpu-lots"),
])
def test_a_malformed_template_is_said_once_and_makes_no_pod(tmp_path, container, pod):
    template = {"spec": {"containers": [{"name": "main", "image": "trainer:1", **container}], **pod}}
    kube = FakeKube([make_gpujob(template=template)])
    operator = GPUJobController(api=kube, records=JobRecords(tmp_path / "records.jsonl"))
    for _ in range(3):
        job = tick(operator, kube)
    ready = condition(job, c.PODS_READY)
    assert (ready["status"], ready["reason"], job["status"]["phase"]) == ("False", "InvalidSpec", "Blocked")
    assert ready["message"].startswith("spec.template.spec.")
    assert [(e["type"], e["reason"]) for e in kube.list("events", "ml")] == [("Warning", "InvalidSpec")]
    assert kube.made("create", "pods") == []


def test_a_tick_that_raises_is_counted_and_said_once(operator, kube, monkeypatch):
    def broken(*_, **__):
        raise KeyError("surprise")
    monkeypatch.setattr("netsched.operator.gpujobs.controller.reconcile", broken)
    for _ in range(3):
        job = tick(operator, kube)
    ready = condition(job, c.PODS_READY)
    assert ready["reason"] == "ReconcileFailed" and "KeyError: 'surprise'" in ready["message"]
    assert [e["reason"] for e in kube.list("events", "ml")] == ["ReconcileFailed"]
    registry = operator.metrics.registry
    assert registry.get_sample_value("netsched_operator_reconcile_errors_total") == 3


def test_a_gang_that_does_not_fit_says_which_budget_keeps_the_packer_from_helping(kube, tmp_path):
    note = "the packer could make room by evicting lower-priority pods, but PodDisruptionBudget ml/keep ..."
    operator = GPUJobController(api=kube, records=JobRecords(tmp_path / "records.jsonl"),
                        packer_note={"ml/train": note}.get)
    tick(operator, kube)
    operator.tick(kube.get(PLURAL, "ml", "train"), [], replicas(kube))  # no room
    admitted = condition(kube.get(PLURAL, "ml", "train"), c.ADMITTED)
    assert admitted["status"] == "False" and admitted["message"].endswith(f"; {note}")


def test_a_record_that_cannot_be_written_waits_while_the_job_says_why_once(tmp_path):
    job = make_gpujob()
    job["status"] = {"phase": "Succeeded", "startTime": "2026-01-01T00:00:00Z",
                     "completionTime": "2026-01-01T00:10:00Z", "conditions": []}
    kube = FakeKube([job])
    blocked = tmp_path / "volume"
    blocked.write_text("a file where the records directory should be")
    operator = GPUJobController(api=kube, records=JobRecords(blocked / "records.jsonl"))  # starts anyway
    for _ in range(3):
        stored = tick(operator, kube)
    recorded = condition(stored, c.RECORDED)
    assert (recorded["status"], recorded["reason"]) == ("False", "RecordsUnavailable")
    assert f"cannot be read from {blocked / 'records.jsonl'}" in recorded["message"]
    assert stored["status"]["phase"] == "Succeeded"
    said = [(e["type"], e["reason"]) for e in kube.list("events", "ml")]
    assert said == [("Warning", "RecordsUnavailable")]
    assert operator.metrics.registry.get_sample_value("netsched_operator_record_errors_total") == 3

    blocked.unlink()  # the volume is back
    for _ in range(2):
        stored = tick(operator, kube)
    assert condition(stored, c.RECORDED)["status"] == "True"
    assert [row["uid"] for row in operator.records.rows()] == ["uid-1"]


def test_a_gang_kept_within_a_rack_is_released_with_that_rack_in_its_pods_node_selector(tmp_path):
    kube = FakeKube([make_gpujob(network={"maxPeerDistance": "rack"})])
    operator = GPUJobController(api=kube, records=JobRecords(tmp_path / "records.jsonl"))
    tick(operator, kube)
    job = tick(operator, kube)
    pods = kube.list("pods", "ml")
    assert all(not p["spec"].get("schedulingGates") for p in pods)
    assert [p["spec"]["nodeSelector"] for p in pods] == [{RACK_LABEL: "rack-a1"}] * 2
    assert condition(job, c.ADMITTED)["message"].endswith(f"its pods keep to {RACK_LABEL}=rack-a1")
    assert len(kube.made("patch", "pods")) == 2  # the pin and the gate in one patch per pod


@pytest.mark.parametrize(("finalizers", "left"), [
    pytest.param([], set(), id="its-pods-deleted-at-once"),
    pytest.param(["orphan"], {"train-0", "train-1"}, id="kept-when-the-user-orphans-them"),
])
def test_a_gpujob_being_deleted_has_its_pods_deleted_with_it(operator, kube, finalizers, left):
    tick(operator, kube)
    job = kube.get(PLURAL, "ml", "train")
    job["metadata"].update(deletionTimestamp="2025-01-01T12:00:00Z", finalizers=finalizers)
    operator.deleted(job, replicas(kube))
    assert {p["metadata"]["name"] for p in kube.list("pods", "ml")} == left


def test_a_gang_whose_pod_a_plan_moves_is_left_to_the_plan_and_room_plans_hold_is_not_counted_free(
        operator, kube):
    tick(operator, kube)  # its pods made, gated
    moving = replace(replicas(kube), planned={"ml/uid-1": ["pack-1"]})  # a plan moves a pod of this job
    operator.tick(kube.get(PLURAL, "ml", "train"), ROOMS, moving)
    admitted = condition(kube.get(PLURAL, "ml", "train"), c.SCHEDULABLE)
    assert (admitted["reason"], all(p["spec"].get("schedulingGates") for p in kube.list("pods", "ml"))) == (
        "WaitingForPlan", True)
    held = replace(replicas(kube), plan_room={n.name: 8 for n in ROOMS})  # every GPU held by a plan
    operator.tick(kube.get(PLURAL, "ml", "train"), ROOMS, held)
    assert condition(kube.get(PLURAL, "ml", "train"), c.SCHEDULABLE)["reason"] == "InsufficientResources"
    assert all(p["spec"].get("schedulingGates") for p in kube.list("pods", "ml"))
