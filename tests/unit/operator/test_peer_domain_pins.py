"""An admitted GPUJob's pods that join it later (replacements of failed pods, pods whose gate was left
behind) are pinned to the domain its running pods are in, so kube-scheduler keeps maxPeerDistance
without the extender; the pod built for such a replacement carries the pin; and a PackingPlan pins
a GPUJob's pods to its planned node's domain as it pins a pod gang's. The operator creates a GPUJob's
pods with its data limit as required node affinity."""

from dataclasses import replace

import pytest

from netsched.api.gpujob import PLURAL
from netsched.api.labels import JOB_LABEL, RACK_LABEL, ZONE_LABEL
from netsched.jobs.capacity import node_room
from netsched.jobs.replica_pods import GANG_GATE, replica_pod
from netsched.operator.cluster_index import ClusterIndex
from netsched.operator.gpujobs.controller import GPUJobController
from netsched.operator.gpujobs.reconcile import reconcile
from netsched.packer.config import PackerConfig
from netsched.packer.controller import Packer
from netsched.records.writer import JobRecords
from netsched.testing.builders import CLUSTER, LABELS, NOW, FitStub, ago, job, make_gpujob, make_pod
from netsched.testing.builders import pod_view as pod
from netsched.testing.kube import FakeKube

STARTED = {"phase": "Running", "startTime": ago(600),
           "conditions": [{"type": "Admitted", "status": "True", "reason": "GangReleased", "message": "m"}]}


def run(gang, pods):
    return reconcile(gang, STARTED, pods, LABELS, FitStub(), NOW)


@pytest.mark.parametrize("distance, pods, pin", [
    pytest.param("rack", [pod(0, phase="Running", node="a1-0"), pod(1, phase="Failed", node="a1-1")],
                 (RACK_LABEL, "rack-a1"), id="a-replacement-joins-its-peers-rack"),
    pytest.param("zone", [pod(0, phase="Running", node="a2-0"), pod(1, gated=True)],
                 (ZONE_LABEL, "zone-a"), id="a-pod-left-gated-joins-its-peers-zone"),
    pytest.param("rack", [pod(0, phase="Running", node="a1-0"), pod(1, phase="Running", node="b1-0"),
                          pod(2, phase="Failed", node="b1-0")], None, id="peers-in-two-racks-pin-nothing"),
    pytest.param("node", [pod(0, phase="Running", node="a1-0"), pod(1, phase="Failed", node="a1-0")],
                 None, id="node-is-the-extenders"),
    pytest.param(None, [pod(0, phase="Running", node="a1-0"), pod(1, phase="Failed", node="a1-1")],
                 None, id="no-peer-limit"),
])
def test_pods_joining_an_admitted_gang_are_pinned_to_its_peers_domain(distance, pods, pin):
    gang = job(replicas=len(pods), network={"maxPeerDistance": distance} if distance else None)
    out = run(gang, pods)
    assert out.pin == pin
    assert out.create or out.ungate  # something joins


def test_the_replacement_pod_carries_the_pin_and_the_templates_own_selector_wins():
    gang = job(network={"maxPeerDistance": "rack"})
    pinned = replica_pod(gang, 1, 1, gated=False, pin=(RACK_LABEL, "rack-a1"))
    assert pinned["spec"]["nodeSelector"] == {RACK_LABEL: "rack-a1"}
    own = job(template={"spec": {"containers": [{"name": "m", "image": "t:1"}],
                                 "nodeSelector": {RACK_LABEL: "rack-b1"}}})
    assert replica_pod(own, 1, 1, gated=False, pin=(RACK_LABEL, "rack-a1"))["spec"]["nodeSelector"] == {
        RACK_LABEL: "rack-b1"}


@pytest.mark.parametrize("labels", [
    pytest.param({JOB_LABEL: "train"}, id="a-gpujobs-pod"),
    pytest.param({}, id="a-single-pod"),
])
def test_a_plan_releases_a_pod_pinned_to_its_planned_node(labels):
    kube = FakeKube([*CLUSTER, make_pod("train-0", labels=labels, schedulingGates=[{"name": GANG_GATE}],
                                        annotations={"netsched.io/max-peer-distance": "rack"})])
    Packer(kube, PackerConfig())._ungate(kube.get("pods", "ml", "train-0"), "plan-1", "a2-0")
    released = kube.get("pods", "ml", "train-0")
    assert "schedulingGates" not in released["spec"] and "nodeSelector" not in released["spec"]
    required = released["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required == {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["a2-0"]}]}]}


def test_the_operator_creates_a_gpujobs_pods_with_its_data_limit_as_node_affinity(tmp_path):
    kube = FakeKube([make_gpujob(dataSources=[{"name": "d", "kind": "rack", "location": "rack-b1"}],
                                 network={"maxDataDistance": "zone"})])
    index = ClusterIndex()
    operator = GPUJobController(api=kube, records=JobRecords(tmp_path / "records.jsonl"))
    operator.tick(kube.get(PLURAL, "ml", "train"), [node_room(n) for n in CLUSTER],
                  replace(index.indices({}), used={}, pending=[]))
    pods = kube.list("pods", "ml")
    assert len(pods) == 2
    for p in pods:
        required = p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert required == {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": ZONE_LABEL, "operator": "In", "values": ["zone-b"]}]}]}
