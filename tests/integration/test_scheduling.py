"""The real kube-scheduler's `netsched` profile places GPU pods on KWOK GPU nodes."""

from __future__ import annotations

import random

from kubernetes import client

from netsched.api.labels import GPU_RESOURCE, SCHEDULER_NAME
from netsched.devcluster.pods import gpu_pod, scheduled_condition
from netsched.devcluster.wait import poll


def _node_names(core: client.CoreV1Api) -> list[str]:
    return sorted(n.metadata.name for n in core.list_node().items)


def _bound_filler(name: str, node: str, gpus: int) -> dict:
    """A pod placed by nodeName (no scheduler) to use up GPUs on `node`."""
    pod = gpu_pod(name, gpus)
    pod["spec"]["nodeName"] = node
    return pod


def test_two_gpu_pod_is_bound_to_the_only_node_with_free_gpus(core, namespace):
    nodes = _node_names(core)
    target = random.Random(7).choice(nodes)
    for i, node in enumerate(nodes):
        core.create_namespaced_pod(namespace, _bound_filler(f"filler-{i}", node, 6 if node == target else 8))
    poll(lambda: all(p.status.phase == "Running" for p in core.list_namespaced_pod(namespace).items),
         60, "filler pods to run")

    core.create_namespaced_pod(namespace, gpu_pod("wants-two", 2))
    pod = poll(lambda: (p := core.read_namespaced_pod("wants-two", namespace)).spec.node_name and p,
               60, "wants-two to be bound")

    assert pod.spec.node_name == target
    assert scheduled_condition(pod).status == "True"
    # kube-scheduler's event broadcaster writes the event after the binding, so wait for it
    events = poll(lambda: core.list_namespaced_event(
        namespace, field_selector="involvedObject.name=wants-two,reason=Scheduled").items, 10,
        "the Scheduled event")
    assert [e.reporting_component for e in events] == [SCHEDULER_NAME]


def test_pod_larger_than_any_node_stays_pending_unschedulable(core, namespace):
    capacity = max(int(n.status.allocatable[GPU_RESOURCE]) for n in core.list_node().items)
    core.create_namespaced_pod(namespace, gpu_pod("too-big", capacity + 1))

    cond = poll(lambda: scheduled_condition(core.read_namespaced_pod("too-big", namespace)),
                60, "the scheduler to try too-big")
    pod = core.read_namespaced_pod("too-big", namespace)

    assert pod.status.phase == "Pending" and pod.spec.node_name is None
    assert (cond.status, cond.reason) == ("False", "Unschedulable")
    assert f"Insufficient {GPU_RESOURCE}" in cond.message
