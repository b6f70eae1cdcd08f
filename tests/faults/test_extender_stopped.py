"""The extender stopped (SIGSTOP: it takes connections and never answers; kube-scheduler times out and
skips it, since it is ignorable): the data limits of a GPUJob, of a batch Job's gang and of a bare pod
hold all the same, kept by kube-scheduler itself from the node affinity netsched wrote on the pods;
nothing is lost once it goes on."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager

from kubernetes import client

from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.api.labels import DATA_SOURCE, JOB_LABEL, MAX_DATA_DISTANCE, ZONE_LABEL
from netsched.devcluster.devcluster import EXTENDER, DevCluster
from netsched.devcluster.pods import gated_job, gpu_pod
from netsched.devcluster.wait import poll
from netsched.testing.builders import make_gpujob

DATA_ZONE = "zone-a"


@contextmanager
def stopped(cluster: DevCluster, component: str) -> Iterator[int]:
    """The component's processes (its process group: the extender's watch child too) stopped while
    inside, as a hung process is: its sockets still take connections. Its pid is yielded."""
    pid = cluster.status()["components"][component]["pid"]
    group = os.getpgid(pid)
    os.killpg(group, signal.SIGSTOP)
    try:
        yield pid
    finally:
        os.killpg(group, signal.SIGCONT)


def is_stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def _name(pod: client.V1Pod) -> str:
    """A pod's name, a batch Job's pods by their index: gang-0, gang-1."""
    index = (pod.metadata.annotations or {}).get("batch.kubernetes.io/job-completion-index")
    job = (pod.metadata.labels or {}).get("batch.kubernetes.io/job-name")
    return f"{job}-{index}" if job and index is not None else pod.metadata.name


BUSY_GPUS = 6  # of each far node's 8: the limited pods would fit beside them


def busy_pod(node: str) -> dict:
    """A pod bound straight to `node` that takes most of its GPUs: kube-scheduler's own scoring (the
    netsched profile scores GPUs most-allocated) then prefers that node to an empty one."""
    pod = gpu_pod(f"busy-{node}", BUSY_GPUS, duration="600s")
    pod["spec"]["nodeName"] = node
    return pod


def test_data_limits_hold_while_the_extender_is_stopped_and_nothing_is_lost(fault_cluster, core, custom,
                                                                               namespace):
    zone_of = {n.metadata.name: n.metadata.labels[ZONE_LABEL] for n in core.list_node().items}
    far = sorted(n for n, z in zone_of.items() if z != DATA_ZONE)
    assert far and len(far) < len(zone_of)
    for node in far:
        core.create_namespaced_pod(namespace, busy_pod(node))
    poll(lambda: sum(p.status.phase == "Running" for p in core.list_namespaced_pod(namespace).items)
         == len(far), 120, "the busy pods to run")

    limit = {DATA_SOURCE: f"zone:{DATA_ZONE}", MAX_DATA_DISTANCE: "zone"}
    with stopped(fault_cluster, EXTENDER) as pid:
        # no limit, placed first so the data zone is still empty: where kube-scheduler alone puts a
        # pod, and so where the limited ones would go without their affinity (this test could fail)
        core.create_namespaced_pod(namespace, gpu_pod("free", 1, duration="600s"))
        poll(lambda: core.read_namespaced_pod("free", namespace).spec.node_name, 120,
             "the pod without a limit to be bound")
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
            "near-data", replicas=2, gpus=2, duration="600s", manifest=True,
            dataSources=[{"name": "corpus", "kind": "zone", "location": DATA_ZONE}],
            network={"maxDataDistance": "zone"}))
        core.create_namespaced_pod(namespace, gpu_pod("bare", 1, duration="600s", annotations=limit))
        client.BatchV1Api(fault_cluster.api_client()).create_namespaced_job(
            namespace, gated_job("gang", 2, 1, "600s", annotations=limit))
        wanted = {"near-data-0", "near-data-1", "bare", "free", "gang-0", "gang-1"}
        pods = poll(lambda: (found := {name: p for p in core.list_namespaced_pod(namespace).items
                                       if (name := _name(p)) in wanted and p.spec.node_name})
                    and len(found) == len(wanted) and found, 180,
                    "the pods to be bound with the extender stopped")
        assert is_stopped(pid)  # bound without the extender's word

    placed = {name: zone_of[p.spec.node_name] for name, p in pods.items()}
    assert placed["free"] != DATA_ZONE, placed
    assert {placed[n] for n in wanted - {"free"}} == {DATA_ZONE}, placed
    required = pods["bare"].spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    written = [(e.key, e.operator, e.values)
               for t in required.node_selector_terms for e in t.match_expressions]
    assert written == [(ZONE_LABEL, "In", [DATA_ZONE])]

    # going on, the extender is consulted again and nothing was lost or made twice
    core.create_namespaced_pod(namespace, gpu_pod("after", 1, duration="600s", annotations=limit))
    poll(lambda: core.list_namespaced_event(
        namespace, field_selector="involvedObject.name=after,reason=NetworkPlacement").items, 90,
        "a NetworkPlacement Event for the pod made after the extender went on")
    poll(lambda: (custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "near-data")
                  .get("status") or {}).get("phase") == "Running", 120, "the GPUJob to run")
    pods_now = core.list_namespaced_pod(namespace).items
    members = sorted(p.metadata.name for p in pods_now
                     if (p.metadata.labels or {}).get(JOB_LABEL) == "near-data")
    assert members == ["near-data-0", "near-data-1"]
    assert {_name(p) for p in pods_now} >= wanted | {"after"}
    assert len([p for p in pods_now if _name(p).startswith("gang-")]) == 2  # none made twice
    assert zone_of[next(p for p in pods_now if p.metadata.name == "after").spec.node_name] == DATA_ZONE
