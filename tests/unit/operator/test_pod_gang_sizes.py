"""The pod-gang controller reads a gang's size from the object that knows it (a fake API answering as
the real one does), says why when it cannot, releases a gated pod no gang will ever release, and keeps
the rest of a gang released in part with its peers."""

import pytest
from kubernetes import client

from netsched.api.topology import Topology
from netsched.jobs.capacity import node_room
from netsched.jobs.gang_size import read_size
from netsched.jobs.pod_gangs import gang_of
from netsched.jobs.replica_pods import GANG_GATE
from netsched.operator.cluster_index import ClusterIndex
from netsched.operator.pod_gangs.decision import decide
from netsched.testing.builders import make_node, make_pod

PG = ("scheduling.x-k8s.io", "v1alpha1", "podgroups", "pg")
PG_NAMED = "PodGroup ml/pg (podgroups.scheduling.x-k8s.io/v1alpha1)"


class FakeObjects:
    """CustomObjectsApi.get_namespaced_custom_object over a dict of (group, version, plural, name)."""
    def __init__(self, objects=None, status=404):
        self.objects, self.status, self.asked = objects or {}, status, []

    def get_namespaced_custom_object(self, group, version, namespace, plural, name):
        self.asked.append((group, version, namespace, plural, name))
        if (group, version, plural, name) not in self.objects:
            raise client.ApiException(status=self.status, reason="refused")
        return self.objects[(group, version, plural, name)]


def gated_pod(labels, owner=None):
    pod = make_pod("m-0", labels=labels, schedulingGates=[{"name": GANG_GATE}])
    if owner:
        api_version, kind, name = owner
        pod["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": name,
                                               "uid": "u1", "controller": True}]
    return pod


PODGROUP_POD = gated_pod({"scheduling.x-k8s.io/pod-group": "pg"})
PYTORCH_POD = gated_pod({"training.kubeflow.org/job-name": "bert",
                         "training.kubeflow.org/operator-name": "pytorchjob-controller"},
                        ("kubeflow.org/v1", "PyTorchJob", "bert"))
JOB_POD = gated_pod({"batch.kubernetes.io/job-name": "train"}, ("batch/v1", "Job", "train"))


@pytest.mark.parametrize("pod, objects, size", [
    pytest.param(PODGROUP_POD, {PG: {"spec": {"minMember": 3}}}, 3, id="podgroup-min-member"),
    pytest.param(PYTORCH_POD, {("kubeflow.org", "v1", "pytorchjobs", "bert"): {"spec": {
        "pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 3}}}}}, 4,
                 id="pytorchjob-replicas"),
    pytest.param(JOB_POD, {("batch", "v1", "jobs", "train"): {
        "spec": {"parallelism": 4, "completions": 4}, "status": {"succeeded": 1}}}, 3, id="job-parallelism"),
])
def test_the_size_is_read_from_the_object_that_knows_it(pod, objects, size):
    fake = FakeObjects(objects)
    assert read_size(fake, pod, gang_of(pod)) == (size, "")
    assert [a[2] for a in fake.asked] == ["ml"]


def test_without_the_crd_the_gang_waits_with_a_warning_naming_the_object():
    size, why = read_size(FakeObjects(), PODGROUP_POD, gang_of(PODGROUP_POD))
    assert size is None and why == f": the API has no {PG_NAMED}"
    d = decide(gang_of(PODGROUP_POD), size, [], [], {}, [], why)
    assert (d.type, d.reason, d.release) == ("Warning", "WaitingForPods", {})
    assert d.message.startswith(f"PodGroup ml/pg: netsched cannot tell how many pods the gang has: the "
                                f"API has no {PG_NAMED}; its pods stay gated.")


def test_a_refused_read_is_said_and_an_object_without_a_size_too():
    assert read_size(FakeObjects(status=403), PYTORCH_POD, gang_of(PYTORCH_POD))[1].startswith(
        ": reading PyTorchJob ml/bert (pytorchjobs.kubeflow.org/v1) failed")
    empty = FakeObjects({PG: {"spec": {}}})
    assert read_size(empty, PODGROUP_POD, gang_of(PODGROUP_POD)) == (None, f": {PG_NAMED} does not say it")


def orphan(**changes):
    """A Job's pod after its Job was deleted with propagationPolicy=Orphan: labels kept, owner gone."""
    pod = gated_pod({"batch.kubernetes.io/job-name": "train"})
    pod["metadata"].update(changes)
    return pod


@pytest.mark.parametrize("pod, stray", [
    pytest.param(orphan(), True, id="orphaned-job-pod"),
    pytest.param(JOB_POD, False, id="job-pod-its-gang-releases-it"),
    pytest.param(gated_pod({"app": "x"}, ("apps/v1", "ReplicaSet", "rs")), False, id="has-a-controller"),
    pytest.param(gated_pod({"netsched.io/job": "t", "netsched.io/replica": "0"}), False, id="gpujob-replica"),
    pytest.param(make_pod("free", labels={"batch.kubernetes.io/job-name": "train"}), False, id="not-gated"),
    pytest.param({**orphan(), "status": {"phase": "Succeeded"}}, False, id="finished"),
    pytest.param(orphan(deletionTimestamp="2025-01-01T00:00:00Z"), False, id="being-deleted"),
])
def test_the_index_knows_the_gated_pods_no_gang_will_release(pod, stray):
    index = ClusterIndex()
    index.replace("pods", [pod])
    assert [p["metadata"]["name"] for p in index.strays()] == ([pod["metadata"]["name"]] if stray else [])
    index.apply("pods", "MODIFIED", {**pod, "spec": {**pod["spec"], "schedulingGates": []}})
    assert index.strays() == []


RACK_NODES = [node_room(make_node(f"n{i}", rack=f"rack-{i // 2}", gpus=8)) for i in range(4)]


def rack_member(i, pinned=None):
    """Member i of a 4-pod Job gang with a rack limit: gated, or released into rack `pinned`."""
    pod = make_pod(f"train-{i}", gpus=4, labels={"batch.kubernetes.io/job-name": "train"},
                   annotations={"netsched.io/max-peer-distance": "rack"},
                   schedulingGates=None if pinned else [{"name": GANG_GATE}])
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                                           "uid": "j1", "controller": True}]
    if pinned:
        pod["spec"]["nodeSelector"] = {"netsched.io/rack": pinned}
    return pod


@pytest.mark.parametrize("used, reason, rack", [
    pytest.param({"n0": {"nvidia.com/gpu": 8}}, "GangReleased", "rack-0", id="room-by-its-peers"),
    pytest.param({"n0": {"nvidia.com/gpu": 8}, "n1": {"nvidia.com/gpu": 8}}, "InsufficientResources", None,
                 id="no-room-by-its-peers-waits"),
])
def test_the_rest_of_a_gang_released_in_part_joins_its_peers_rack(used, reason, rack):
    """The operator stopped between the patches of a release: two members run pinned to rack-0; the two
    still gated go there too (rack-1, roomier, would split the gang), or wait."""
    index = ClusterIndex()
    index.replace("pods", [rack_member(0, "rack-0"), rack_member(1, "rack-0"), *map(rack_member, (2, 3))])
    [members] = index.pod_gangs().values()
    d = decide(gang_of(rack_member(2)), 4, members, RACK_NODES, used, [])
    assert d.reason == reason
    if rack:
        assert set(d.release) == {"train-2", "train-3"}
        assert d.release["train-2"][0] == {"op": "add", "path": "/spec/nodeSelector",
                                           "value": {"netsched.io/rack": rack}}
    else:
        assert d.release == {}


def test_the_pin_of_a_released_member_is_read_by_the_configured_levels_label_nearest_first():
    levels = Topology.parse("block=example.com/block,rack=example.com/rack")
    pod = rack_member(0, "rack-0")
    pod["spec"]["nodeSelector"] = {"example.com/block": "b1", "example.com/rack": "r1"}  # the user's, the pin
    index = ClusterIndex(topology=levels)
    index.replace("pods", [pod])
    [members] = index.pod_gangs().values()
    assert [m.pinned for m in members] == [("example.com/rack", "r1")]
