"""The operator's tick carried out against a fake API server: the pods, status and Events it writes."""

from __future__ import annotations

import pytest

from netsched.api import conditions as c
from netsched.api.gpujob import PLURAL, job_spec
from netsched.operator.capacity import node_room
from netsched.operator.handlers import Indices, Operator
from netsched.operator.reconcile import PodView
from netsched.operator.records import JobRecords
from netsched.operator.replica_pods import GANG_GATE
from netsched.testing.builders import CLUSTER, make_gpujob
from netsched.testing.kube import FakeKube

ROOMS = [node_room(n) for n in CLUSTER]


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube([make_gpujob()])  # 2 replicas of 4 GPUs, gang on


@pytest.fixture
def operator(kube, tmp_path) -> Operator:
    return Operator(api=kube, records=JobRecords(tmp_path / "records.jsonl"))


def tick(operator: Operator, kube: FakeKube) -> dict:
    """One tick of the stored job, with indices built from the stored pods; the job afterwards."""
    body = kube.get(PLURAL, "ml", "train")
    views = [PodView.of(p) for p in kube.list("pods", "ml")]
    operator.tick(body, ROOMS, Indices(bound={}, pending={}, job_pods={job_spec(body).key: views}))
    return kube.get(PLURAL, "ml", "train")


def errors(operator: Operator, action: str) -> float:
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


def test_a_refused_pod_says_why_in_the_status_and_an_event(operator, kube):
    kube.fail("create", "pods", 422, 'Pod "train-0" is invalid: spec.containers[0].image: Required value',
              times=2)
    job = tick(operator, kube)
    message = ('cannot create the pod of replica {}: Pod "train-0" is invalid: spec.containers[0].image: '
               "Required value; fix spec.template (or the missing object it names)")
    ready = condition(job, c.PODS_READY)
    assert (ready["status"], ready["reason"]) == ("False", c.POD_CREATE_FAILED)
    assert ready["message"] == message.format(1)  # the condition holds the latest failure
    assert job["status"]["reason"] == c.POD_CREATE_FAILED and errors(operator, "create") == 2
    warnings = [e for e in kube.list("events", "ml") if e["type"] == "Warning"]
    assert [(e["reason"], e["message"]) for e in warnings] == [(c.POD_CREATE_FAILED, message.format(0))]


def test_a_failed_status_write_is_counted_and_the_tick_goes_on(operator, kube):
    kube.fail("patch", PLURAL, 500, "etcdserver: request timed out")
    tick(operator, kube)
    assert errors(operator, "status") == 1 and len(kube.list("pods", "ml")) == 2
    assert [e["reason"] for e in kube.list("events", "ml")] == ["PodsCreated", "Pending"]
