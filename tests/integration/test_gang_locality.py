"""A job's pods share one node when one has room for the whole job: labelled pods created one at a
time between single pods, with the real kube-scheduler and extender, on a cluster where one node
has room for the job and every other node 2 free GPUs (which packing alone prefers)."""

from __future__ import annotations

import random

import pytest
from kubernetes import client

from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.api.labels import JOB_LABEL
from netsched.devcluster.pods import gpu_pod
from netsched.devcluster.wait import poll
from netsched.testing import extender_http
from netsched.testing.builders import make_gpujob

REPLICAS, GPUS = 4, 2


@pytest.fixture
def one_roomy_node(core: client.CoreV1Api, namespace: str) -> str:
    """Fills every node but one with room for the whole job to 2 free GPUs (pods bound by nodeName, no
    scheduler); returns the node left with room. Free GPUs count the pods other tests left behind on
    the shared cluster (a namespace being deleted still holds its pods' GPUs for a while)."""
    def free_gpus() -> dict[str, int]:
        free = {n.metadata.name: int(n.status.allocatable["nvidia.com/gpu"]) for n in core.list_node().items}
        for p in core.list_pod_for_all_namespaces().items:
            if p.spec.node_name in free and p.status.phase not in ("Succeeded", "Failed"):
                free[p.spec.node_name] -= sum(int((c.resources.limits or {}).get("nvidia.com/gpu", 0))
                                              for c in p.spec.containers)
        return free

    free = poll(lambda: (f := free_gpus()) and max(f.values()) >= REPLICAS * GPUS and f, 120,
                "a node with room for the whole job")
    target = random.Random().choice(sorted(n for n, gpus in free.items() if gpus >= REPLICAS * GPUS))
    for i, (node, gpus) in enumerate(sorted(free.items())):
        if node != target and gpus > 2:
            filler = gpu_pod(f"filler-{i}", gpus - 2, duration="600s")
            filler["spec"]["nodeName"] = node
            core.create_namespaced_pod(namespace, filler)
    poll(lambda: all(p.status.phase == "Running" for p in core.list_namespaced_pod(namespace).items),
         60, "the filler pods to run")
    return target


def _nodes_of(core: client.CoreV1Api, namespace: str, job: str) -> dict[str, str]:
    def bound():
        pods = core.list_namespaced_pod(namespace, label_selector=f"{JOB_LABEL}={job}").items
        return len(pods) == REPLICAS and all(p.spec.node_name for p in pods) and {
            p.metadata.name: p.spec.node_name for p in pods}
    return poll(bound, 60, f"the {REPLICAS} pods of {job} to be bound")


def test_labelled_pods_created_between_single_pods_share_the_node_with_room(core, namespace, one_roomy_node):
    singles = []
    for r in range(REPLICAS):  # one at a time, each bound before the next pod is created
        core.create_namespaced_pod(namespace, gpu_pod(f"ungated-{r}", GPUS, labels={JOB_LABEL: "ungated"}))
        poll(lambda r=r: core.read_namespaced_pod(f"ungated-{r}", namespace).spec.node_name, 60,
             f"ungated-{r} to be bound")
        if r < REPLICAS - 1:
            core.create_namespaced_pod(namespace, gpu_pod(f"single-{r}", 1))
            singles.append(poll(lambda r=r: core.read_namespaced_pod(f"single-{r}", namespace).spec.node_name,
                                60, f"single-{r} to be bound"))
    placed = _nodes_of(core, namespace, "ungated")
    (node,) = set(placed.values())  # one node for the whole job; packing alone would spread it
    assert node not in singles, singles  # its room was held for the job's other replicas


def extender_sees_room_for_the_job_on(dev_cluster, node: str, namespace: str) -> None:
    """Wait until the extender's cache shows the room the API server shows (the fillers bound, other
    tests' pods gone): its answer to where such a gang would go (a dry run, as whatif asks) is that node.
    On a loaded machine its watches may be a few seconds behind the API server."""
    pods = [gpu_pod(f"probe-{i}", GPUS) | {"metadata": {"name": f"probe-{i}", "namespace": namespace}}
            for i in range(REPLICAS)]
    body = {"namespace": namespace, "name": "probe", "pods": pods, "room": {node: REPLICAS}, "dryRun": True}
    poll(lambda: set(extender_http.scheduling_post(dev_cluster, "gang", body)[1].get("nodes", {}).values())
         == {node}, 60, f"the extender to see room for the whole job on {node}")


def test_a_gpujob_lands_on_the_one_node_with_room_and_its_events_say_why(
        dev_cluster, core, jobs, namespace, one_roomy_node):
    extender_sees_room_for_the_job_on(dev_cluster, one_roomy_node, namespace)
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "gang", replicas=REPLICAS, gpus=GPUS, duration="600s", manifest=True))
    placed = _nodes_of(core, namespace, "gang")
    assert set(placed.values()) == {one_roomy_node}, placed

    events = poll(lambda: (e := [e for e in core.list_namespaced_event(
        namespace, field_selector="reason=NetworkPlacement").items
        if e.involved_object.name in placed]) and len(e) == REPLICAS and e,
        60, f"a NetworkPlacement event for each of the {REPLICAS} pods of gang")
    messages = [e.message for e in events]
    assert all(m.startswith(f"netsched placed the pod on {one_roomy_node} ") for m in messages), messages
    # why: the gang's nodes were chosen together as its gate lifted, each pod pinned to its own
    said = "with its gang: its node was decided when the gang was released"
    assert all(said in m for m in messages), messages
