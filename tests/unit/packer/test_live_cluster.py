"""A packing problem built from API objects: who may move, where pods may go, which PDB covers them."""

import pytest

from netsched.jobs.replica_pods import GANG_GATE
from netsched.packer.live_cluster import problem_of, waits_for_room
from netsched.testing.builders import make_node

TAINT = {"key": "gpu", "value": "reserved", "effect": "NoSchedule"}


def raw_pod(name: str, node_name: str | None = None, owner: str | None = "ReplicaSet", **spec) -> dict:
    meta = {"name": name, "namespace": "ml", "labels": {"app": name}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "x", "controller": True}]
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    status = {"phase": "Running", "conditions": []} if node_name else {"phase": "Pending",
                                                                      "conditions": [unschedulable]}
    container = {"name": "m", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
    return {"metadata": meta, "status": status, "spec": {"schedulerName": "netsched", "nodeName": node_name,
                                                         "priority": 10, **spec, "containers": [container]}}


def test_pods_get_movability_allowed_nodes_and_pdbs():
    nodes = [make_node("a1-0"), make_node("a1-1", taints=[TAINT])]
    pods = [raw_pod("kept", "a1-0", owner=None), raw_pod("web", "a1-0"), raw_pod("waiting")]
    pdbs = [{"metadata": {"name": "all", "namespace": "ml"}, "spec": {"selector": {}},
             "status": {"disruptionsAllowed": 1}}]
    problem = problem_of(nodes, pods, pdbs)
    by = {p.name: p for p in problem.pods}
    assert not by["ml/kept"].movable and by["ml/web"].movable  # only what a controller recreates moves
    assert by["ml/waiting"].allowed == ("a1-0",)  # the tainted node is not tolerated
    assert by["ml/web"].requests == {"cpu": 500, "memory": 2**30, "pods": 1}
    assert {p.pdb for p in problem.pods} == {"ml/all"}  # an empty selector covers every pod
    assert problem.budgets[0].allowed == 1


@pytest.mark.parametrize("owner, extra, stateless", [
    pytest.param("ReplicaSet", {}, True, id="a-deployment-replica"),
    pytest.param("ReplicaSet", {"volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}},
                                            {"name": "conf", "configMap": {"name": "c"}}]}, True,
                 id="replica-with-scratch-and-config"),
    pytest.param("ReplicaSet", {"volumes": [{"name": "d", "hostPath": {"path": "/data"}}]}, False,
                 id="replica-keeping-data-on-its-node"),
    pytest.param("ReplicaSet", {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "d"}}]},
                 False, id="replica-with-its-own-volume"),
    pytest.param("StatefulSet", {}, False, id="statefulset"),
    pytest.param("Job", {}, False, id="batch-job"),
    pytest.param("GPUJob", {}, False, id="gpujob"),
    pytest.param(None, {}, False, id="bare-pod"),
])
def test_only_a_replicaset_pod_with_no_state_of_its_own_is_stateless(owner, extra, stateless):
    [pod] = problem_of([make_node("a1-0")], [raw_pod("p", "a1-0", owner=owner, **extra)], []).pods
    assert pod.stateless is stateless


def test_a_protected_replica_is_neither_movable_nor_stateless():
    pod = raw_pod("p", "a1-0")
    pod["metadata"]["annotations"] = {"netsched.io/protected": "true"}
    [read] = problem_of([make_node("a1-0")], [pod], []).pods
    assert not read.movable and not read.stateless


@pytest.mark.parametrize("said", ["false", "yes", "True", ""])
def test_only_protected_true_keeps_a_pod_in_place(said):
    pod = raw_pod("p", "a1-0")
    pod["metadata"]["annotations"] = {"netsched.io/protected": said}
    [read] = problem_of([make_node("a1-0")], [pod], []).pods
    assert read.movable


def test_a_pod_under_overlapping_budgets_gets_the_tightest():
    pdbs = [{"metadata": {"name": name, "namespace": "ml"}, "spec": {"selector": {}},
             "status": {"disruptionsAllowed": allowed}} for name, allowed in (("loose", 2), ("strict", 0))]
    problem = problem_of([make_node("a1-0")], [raw_pod("web", "a1-0")], pdbs)
    assert [p.pdb for p in problem.pods] == ["ml/strict"]


UNSCHEDULABLE = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
NETSCHED = {"schedulerName": "netsched"}


@pytest.mark.parametrize("meta, spec, status, waits", [
    pytest.param({}, NETSCHED | {"schedulingGates": [{"name": GANG_GATE}]}, {}, True, id="gang-gated"),
    pytest.param({}, NETSCHED | {"schedulingGates": [{"name": GANG_GATE}, {"name": "other"}]}, {}, False,
                 id="someone-elses-gate-too"),
    pytest.param({}, NETSCHED, UNSCHEDULABLE, True, id="unschedulable"),
    pytest.param({}, {"schedulerName": "default-scheduler"}, UNSCHEDULABLE, False, id="other-scheduler"),
    pytest.param({"deletionTimestamp": "2026-11-23T10:00:00Z"}, NETSCHED, UNSCHEDULABLE, False,
                 id="being-deleted"),
    pytest.param({}, NETSCHED | {"nodeName": "n1"}, {}, False, id="bound"),
    pytest.param({}, NETSCHED, {}, False, id="not-tried-yet"),
])
def test_the_packer_wakes_for_exactly_the_pods_it_makes_room_for(meta, spec, status, waits):
    assert waits_for_room(meta, spec, status, "netsched") is waits


def test_a_gangs_pods_carry_their_network_domain_and_running_pods_their_start():
    gang = raw_pod("train-0", owner="GPUJob")
    gang["metadata"]["labels"]["netsched.io/job"] = "train"
    gang["metadata"]["annotations"] = {"netsched.io/max-peer-distance": "rack"}
    web = raw_pod("web", "a1-0")
    web["status"]["startTime"] = "2026-01-01T00:00:10Z"
    problem = problem_of([make_node("a1-0")], [gang, web], [])
    by = {p.name: p for p in problem.pods}
    assert by["ml/train-0"].gang == "ml/train" and by["ml/train-0"].domain == "netsched.io/rack"
    assert by["ml/web"].domain is None  # not a gang: nothing to keep together
    assert by["ml/web"].started == 1767225610.0 and by["ml/train-0"].started is None
    assert problem.taken is not None


@pytest.mark.parametrize("annotations, allowed", [
    pytest.param({"netsched.io/max-data-distance": "rack", "netsched.io/data-source": "node:b1-0"},
                 ("b1-0", "b1-1"), id="within-a-rack-of-a-node"),
    pytest.param({"netsched.io/max-data-distance": "zone", "netsched.io/data-source": "rack:rack-b1"},
                 ("b1-0", "b1-1", "b2-0"), id="within-a-zone-of-a-rack"),
    pytest.param({"netsched.io/max-data-distance": "node", "netsched.io/data-source": "zone:zone-b"},
                 (), id="finer-than-the-data-is-known"),
    pytest.param({"netsched.io/data-source": "node:b1-0"}, None, id="no-limit"),
    pytest.param({"netsched.io/max-data-distance": "rack", "netsched.io/data-source": "bucket"}, None,
                 id="malformed-source-left-to-the-extender"),
])
def test_a_pod_limited_to_its_data_may_use_only_the_nodes_near_it(annotations, allowed):
    nodes = [make_node("a1-0"), make_node("b1-0", zone="zone-b", rack="rack-b1"),
             make_node("b1-1", zone="zone-b", rack="rack-b1"),
             make_node("b2-0", zone="zone-b", rack="rack-b2")]
    pod = raw_pod("reader")
    pod["metadata"]["annotations"] = annotations
    [snapped] = problem_of(nodes, [pod], []).pods
    assert snapped.allowed == allowed
