"""Kubernetes' own PodGroups (scheduling.k8s.io/v1beta1, 1.37) as netsched gangs on the real control
plane, with kube-scheduler's own gang scheduling off and on (the GenericWorkload gate on kube-scheduler):
either way the admission webhook gates the pods, the operator releases the group whole when it fits
(sized by the PodGroup's gang minCount), and its members land in one rack. With kube-scheduler's gang
scheduling on, it then binds the released group in one cycle: no half gang, no deadlock between the two.
The packer makes room for such a group as for any gang. Skipped on 1.34, whose API has no native
PodGroups."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from netsched.api.connect import call
from netsched.api.labels import GANG_OPT_IN_LABEL, GANG_OPT_IN_VALUE, MAX_PEER_DISTANCE, RACK_LABEL
from netsched.devcluster.binaries import kubernetes_minor
from netsched.devcluster.devcluster import DevCluster
from netsched.devcluster.features import native_gangs
from netsched.devcluster.pods import gpu_pod
from netsched.devcluster.wait import poll
from netsched.jobs.kinds.native_pod_group import GROUP, VERSION
from netsched.jobs.replica_pods import GANG_GATE
from netsched.testing.cluster import (
    LOW,
    packing_plans,
    plans_deleted,
    priority_classes,
    running,
    scratch_namespace,
)

pytestmark = [pytest.mark.compat, pytest.mark.skipif(
    not native_gangs(kubernetes_minor()),
    reason=f"Kubernetes {kubernetes_minor()} serves no native PodGroups (scheduling.k8s.io/v1beta1: 1.37+)")]


@pytest.fixture(scope="module", params=[False, True], ids=["netsched-gates", "kube-scheduler-gangs-too"])
def cluster(request, tmp_path_factory) -> Iterator[DevCluster]:
    directory = tmp_path_factory.mktemp("native-gangs")
    with running(DevCluster(directory=directory, nodes=8, kube_gang_scheduling=request.param)) as c:
        yield c


@pytest.fixture
def core(cluster) -> client.CoreV1Api:
    return client.CoreV1Api(cluster.api_client())


@pytest.fixture
def namespace(core) -> Iterator[str]:
    """A namespace whose netsched gang pods the admission webhook gates."""
    with scratch_namespace(core, "ng") as name:
        core.patch_namespace(name, {"metadata": {"labels": {GANG_OPT_IN_LABEL: GANG_OPT_IN_VALUE}}})
        yield name


def pod_group(cluster: DevCluster, namespace: str, name: str, min_count: int,
              priority_class: str | None = None) -> None:
    """A PodGroup of `min_count`; kube-scheduler's gang cycle refuses a group whose pods' priority is not
    the group's ("all pods in a single pod group should have the same priority as the pod group's")."""
    body: dict = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PodGroup", "metadata": {"name": name},
                  "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}
    if priority_class:
        body["spec"]["priorityClassName"] = priority_class
    call(cluster.api_client(), "POST", f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/podgroups", body=body)


def member(core: client.CoreV1Api, namespace: str, group: str, index: int, gpus: int,
           priority_class: str | None = None) -> None:
    pod = gpu_pod(f"{group}-{index}", gpus, duration="600s", annotations={MAX_PEER_DISTANCE: "rack"})
    pod["spec"]["schedulingGroup"] = {"podGroupName": group}
    if priority_class:
        pod["spec"]["priorityClassName"] = priority_class
    core.create_namespaced_pod(namespace, pod)


def pods(cluster: DevCluster, namespace: str) -> list[dict]:
    """Plain dicts: the client's V1Pod has no schedulingGroup."""
    return call(cluster.api_client(), "GET", f"/api/v1/namespaces/{namespace}/pods")["items"]


def gated(pod: dict) -> bool:
    return any(g.get("name") == GANG_GATE for g in pod["spec"].get("schedulingGates") or ())


def never_half(cluster: DevCluster, namespace: str, size: int, timeout: float = 120,
               group: str = "") -> dict[str, str]:
    """Polls until all `size` pods (of `group`, by name prefix) are bound, checking at every look that they
    are all gated or none is and that none binds before all are released; pod -> node."""
    def look() -> dict[str, str]:
        seen = [p for p in pods(cluster, namespace) if p["metadata"]["name"].startswith(group)]
        assert len({gated(p) for p in seen}) <= 1, [(p["metadata"]["name"], gated(p)) for p in seen]
        assert not any(p["spec"].get("nodeName") for p in seen if gated(p))
        if len(seen) == size and all(p["spec"].get("nodeName") for p in seen):
            return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in seen}
        return {}
    return poll(look, timeout, f"the {size} pods of the native PodGroup to be bound")


def test_a_native_podgroup_of_4_is_released_whole_into_one_rack(cluster, core, namespace):
    pod_group(cluster, namespace, "train", 4)
    for i in range(3):  # 4 GPUs each: two nodes of one rack hold the gang
        member(core, namespace, "train", i, 4)
    seen = pods(cluster, namespace)
    assert len(seen) == 3 and all(gated(p) for p in seen), "the webhook gates a native PodGroup's pods"
    member(core, namespace, "train", 3, 4)
    placed = never_half(cluster, namespace, 4)
    racks = {n.metadata.name: n.metadata.labels[RACK_LABEL] for n in core.list_node().items}
    assert len({racks[node] for node in placed.values()}) == 1, placed
    assert all(p["spec"]["schedulingGroup"] == {"podGroupName": "train"} for p in pods(cluster, namespace))
    # kube-scheduler says it placed the group in its own cycle only when its gang scheduling is on
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/podgroups/train"
    def scheduled() -> str | None:
        conditions = call(cluster.api_client(), "GET", path).get("status", {}).get("conditions") or []
        return next((c["status"] for c in conditions if c["type"] == "PodGroupInitiallyScheduled"), None)
    if cluster.kube_gang_scheduling:
        assert poll(lambda: scheduled() == "True", 30, "the PodGroup's PodGroupInitiallyScheduled condition")
    else:
        assert scheduled() is None


def test_a_native_podgroup_that_cannot_fit_stays_whole_and_gated(cluster, core, namespace):
    """5 pods of 8 GPUs in one rack (2 nodes): never fits; none released, none bound."""
    pod_group(cluster, namespace, "big", 5)
    for i in range(5):
        member(core, namespace, "big", i, 8)
    def said() -> str | None:
        events = core.list_namespaced_event(namespace).items
        return next((e.reason for e in events if e.reason in ("NoDomainLargeEnough", "NeverFits")), None)
    assert poll(said, 60, "the operator to say why the gang waits")
    assert all(gated(p) and not p["spec"].get("nodeName") for p in pods(cluster, namespace))


def test_the_packer_makes_room_for_a_native_podgroup_in_one_rack(cluster, core, namespace):
    """Low-priority pods leave 3 GPUs free on every node: a high-priority group of 4 x 4 GPUs within a rack
    fits nowhere until a PackingPlan evicts some of them, in one rack; then the group binds there whole."""
    racks = {n.metadata.name: n.metadata.labels[RACK_LABEL] for n in core.list_node().items}
    with plans_deleted(client.CustomObjectsApi(cluster.api_client())) as custom, \
            priority_classes(cluster.api_client()) as priorities:
        batch = client.BatchV1Api(cluster.api_client())
        for node in sorted(racks):  # as test_pod_gang_packing.py: a Job makes an evicted pod again
            low = gpu_pod("x", 5, duration="600s")
            low["spec"].update(nodeSelector={"kubernetes.io/hostname": node},
                               priorityClassName=priorities["low"])
            batch.create_namespaced_job(namespace, {
                "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"low-{node}"},
                "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 6, "template": {
                    "metadata": {"annotations": low["metadata"]["annotations"]}, "spec": low["spec"]}}})
        poll(lambda: sum(1 for p in pods(cluster, namespace) if p["status"].get("phase") == "Running")
             == len(racks), 90, "every low-priority pod to run")
        pod_group(cluster, namespace, "urgent", 4, priorities["high"])
        for i in range(4):
            member(core, namespace, "urgent", i, 4, priorities["high"])
        placed = never_half(cluster, namespace, 4, timeout=180, group="urgent-")
        [plan] = [p for p in packing_plans(custom)
                  if any(x["pod"].startswith(f"{namespace}/urgent-") for x in p["spec"]["placements"])]
        victims = plan["spec"]["evictions"] + plan["spec"]["moves"]
        assert victims and all(v["priority"] == LOW for v in victims), victims
        assert len({racks[node] for node in placed.values()}) == 1, placed
