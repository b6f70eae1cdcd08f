"""The operator's ClusterIndex: room per node, requests per node, released pods and replica pods."""

from __future__ import annotations

from netsched.api.labels import GPU_RESOURCE, JOB_LABEL, PINNED_NODE
from netsched.api.watch import Reflector
from netsched.jobs.gpujob import GPUJob
from netsched.jobs.replica_pods import replica_pod
from netsched.operator.cluster_index import ClusterIndex
from netsched.testing.builders import make_gpujob, make_node, make_pod
from netsched.testing.kube import FakeKube


def rooms_changed(index: ClusterIndex) -> list[None]:
    seen: list[None] = []
    index.on_room_change = lambda: seen.append(None)
    return seen


def test_a_node_heartbeat_changes_nothing_and_a_change_of_room_is_told():
    index = ClusterIndex()
    changed = rooms_changed(index)
    node = make_node("n1")
    index.replace("nodes", [node])
    assert [r.name for r in index.rooms()] == ["n1"] and len(changed) == 1
    node["status"]["conditions"][0]["lastHeartbeatTime"] = "2025-01-01T12:00:10Z"
    index.apply("nodes", "MODIFIED", node)
    assert len(changed) == 1
    index.apply("nodes", "MODIFIED", make_node("n1", gpus=4))
    index.apply("nodes", "MODIFIED", make_node("n1", gpus=4, unschedulable=True))
    index.apply("nodes", "MODIFIED", make_node("n1", gpus=4, unschedulable=True, taints=[
        {"key": "k", "effect": "NoSchedule"}]))
    assert len(changed) == 4
    index.apply("nodes", "DELETED", node)
    index.apply("nodes", "DELETED", node)
    assert len(changed) == 5 and index.rooms() == []


def test_live_bound_pods_count_against_their_node_and_released_ones_before_they_are_bound():
    index = ClusterIndex()
    index.replace("pods", [make_pod("a", "n1", gpus=2, uid="a"), make_pod("b", "n1", gpus=4, uid="b"),
                           make_pod("done", "n1", gpus=8, phase="Succeeded", uid="done"),
                           make_pod("released", gpus=1, uid="released"),
                           make_pod("gated", gpus=8, uid="gated", schedulingGates=[{"name": "g"}])])
    indices = index.indices({})
    assert indices.used == {"n1": {GPU_RESOURCE: 6.0}}
    assert indices.pending == [{GPU_RESOURCE: 1.0}]
    index.apply("pods", "MODIFIED", make_pod("released", "n2", gpus=1, uid="released"))  # bound
    index.apply("pods", "MODIFIED", make_pod("b", "n1", gpus=4, phase="Failed", uid="b"))
    index.apply("pods", "DELETED", make_pod("a", "n1", gpus=2, uid="a"))
    indices = index.indices({})
    assert indices.used == {"n2": {GPU_RESOURCE: 1.0}} and indices.pending == []


def test_replica_pods_are_found_by_their_gpujob_and_a_pod_that_only_carries_the_job_label_is_not():
    job = GPUJob.of(make_gpujob(name="train"))
    replica = replica_pod(job, 0, 0, gated=True)
    lookalike = make_pod("mine", job="train")  # a user's own gang may carry the label
    index = ClusterIndex()
    index.replace("pods", [replica, lookalike])
    assert [p.name for p in index.indices({}).pods_of(job.key)] == [replica["metadata"]["name"]]
    assert lookalike["metadata"]["labels"][JOB_LABEL] == "train"
    index.apply("pods", "DELETED", replica)
    assert index.indices({}).pods_of(job.key) == []


def test_it_is_synced_once_both_kinds_are_listed_through_the_watches():
    kube = FakeKube([make_node("n1"), make_pod("a", "n1", uid="a")])
    index = ClusterIndex()
    Reflector(kube, index, "nodes")._list()
    assert not index.synced
    Reflector(kube, index, "pods")._list()
    assert index.synced and index.indices({}).used == {"n1": {GPU_RESOURCE: 2.0}}
    assert "fieldSelector" not in kube.made("list", "pods")[0].query  # finished replicas matter here


def test_every_pod_is_kept_for_the_forecaster_finished_ones_too_and_a_deleted_one_is_let_go():
    index = ClusterIndex()
    running = make_pod("a", "n1", uid="a")
    running["metadata"]["managedFields"] = [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]
    finished = make_pod("b", "n1", uid="b") | {"status": {"phase": "Succeeded"}}
    index.replace("pods", [running, finished])
    assert sorted(p["metadata"]["name"] for p in index.pods()) == ["a", "b"]
    assert "managedFields" not in index.pods()[0]["metadata"]  # nothing reads them; they are much of a pod
    index.apply("pods", "MODIFIED", running | {"status": {"phase": "Failed"}})
    assert {p["metadata"]["name"]: p["status"]["phase"] for p in index.pods()} == {"a": "Failed",
                                                                                "b": "Succeeded"}
    index.apply("pods", "DELETED", finished)
    assert [p["metadata"]["name"] for p in index.pods()] == ["a"]
    index.replace("pods", [])
    assert index.pods() == []


def test_a_released_pod_pinned_to_a_node_takes_room_there_and_nowhere_else():
    """A gang's member on its way to the node its placement chose holds that node's room: counted
    wherever it would fit first, another gang could be released into it (and on two extender replicas
    the second split a gang over the room the first had promised)."""
    index = ClusterIndex()
    pinned = make_pod("m0", gpus=4, uid="m0", annotations={PINNED_NODE: "n2"})
    index.replace("pods", [make_pod("a", "n1", gpus=2, uid="a"), pinned,
                           make_pod("loose", gpus=1, uid="loose")])
    indices = index.indices({})
    assert indices.used == {"n1": {GPU_RESOURCE: 2.0}}  # bound only: what a stale pin is judged by
    assert indices.pinned == {"n2": {GPU_RESOURCE: 4.0}} and indices.pending == [{GPU_RESOURCE: 1.0}]
    taken = indices.taken({"n1": {GPU_RESOURCE: 1.0}})
    assert taken == {"n1": {GPU_RESOURCE: 3.0}, "n2": {GPU_RESOURCE: 4.0}}
    index.apply("pods", "MODIFIED", make_pod("m0", "n2", gpus=4, uid="m0", annotations={PINNED_NODE: "n2"}))
    indices = index.indices({})
    assert indices.pinned == {} and indices.taken() == {"n1": {GPU_RESOURCE: 2.0}, "n2": {GPU_RESOURCE: 4.0}}


def test_a_nodes_room_counts_the_gpus_a_dra_driver_publishes_and_a_change_is_told():
    from netsched.testing.builders import make_dra_node, make_resource_claim, make_resource_slice

    index = ClusterIndex(dra_gpu_drivers=("gpu.example.com",))
    assert index.kinds == ("nodes", "pods", "resourceslices", "resourceclaims")
    assert ClusterIndex().kinds == ("nodes", "pods")
    changed = rooms_changed(index)
    index.replace("nodes", [make_dra_node("n1"), make_node("n2")])
    index.replace("resourceslices", [make_resource_slice("n1")])
    rooms = {r.name: r for r in index.rooms()}
    assert rooms["n1"].allocatable[GPU_RESOURCE] == 8.0 and rooms["n2"].allocatable[GPU_RESOURCE] == 8.0
    assert rooms["n1"].labels["nvidia.com/gpu.product"] == "LATEST-GPU-MODEL"
    assert len(changed) == 2
    index.apply("resourceclaims", "ADDED", make_resource_claim("c", "n1", range(2)))
    assert {r.name: r for r in index.rooms()}["n1"].allocatable[GPU_RESOURCE] == 6.0 and len(changed) == 3
    index.apply("nodes", "MODIFIED", make_dra_node("n1"))  # a heartbeat keeps the DRA GPUs
    assert {r.name: r for r in index.rooms()}["n1"].allocatable[GPU_RESOURCE] == 6.0 and len(changed) == 3
    index.absent("resourceslices")
    assert GPU_RESOURCE not in {r.name: r for r in index.rooms()}["n1"].allocatable and len(changed) == 4
    index.replace("resourceslices", [make_resource_slice("n1")])
    assert {r.name: r for r in index.rooms()}["n1"].held == {GPU_RESOURCE: 2.0}  # never_fits counts it
