"""When a gang member's pinned node can no longer take it before it binds (netsched.jobs.stale_pins)."""

import pytest

from netsched.api.labels import PINNED_NODE
from netsched.jobs.capacity import NodeRoom
from netsched.jobs.stale_pins import pinned_node, stale_pin, unschedulable

GPU = "nvidia.com/gpu"
SPEC = {"containers": [{"name": "main", "resources": {"requests": {GPU: "2"}}}]}
TAINT = {"key": "maintenance", "effect": "NoSchedule"}


def room(schedulable: bool = True, taints: tuple = ()) -> dict[str, NodeRoom]:
    return {"n1": NodeRoom("n1", {}, {GPU: 8.0, "cpu": 96.0}, schedulable, taints)}


CASES = [
    # (id, rooms, used GPUs on n1, kube-scheduler said Unschedulable, tolerations, why contains)
    ("usable", room(), 0, False, None, None),
    ("gone", {}, 0, False, None, "node n1 is gone"),
    ("cordoned or not ready", room(schedulable=False), 0, False, None, "cordoned or not Ready"),
    ("a taint it does not tolerate", room(taints=(TAINT,)), 0, False, None, "maintenance:NoSchedule"),
    ("a taint it tolerates", room(taints=(TAINT,)), 0, False, [{"key": "maintenance", "operator": "Exists"}],
     None),
    ("full, but the scheduler has not said so: peers on their way", room(), 8, False, None, None),
    ("full, and the scheduler said so", room(), 7, True, None, "room was taken"),
    ("room left, unschedulable for another reason", room(), 6, True, None, None),
]


@pytest.mark.parametrize("rooms, used, refused, tolerations, why", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_a_pin_is_stale_when_its_node_cannot_take_the_pod(rooms, used, refused, tolerations, why):
    spec = {**SPEC, "tolerations": tolerations} if tolerations else SPEC
    found = stale_pin("n1", spec, refused, rooms, {"n1": {GPU: float(used)}})
    assert (found is None) if why is None else (why in found), found


def pod(**status) -> dict:
    return {"metadata": {"name": "p", "annotations": {PINNED_NODE: "n1"}}, "spec": dict(SPEC),
            "status": {"phase": "Pending", **status}}


def test_only_a_live_unbound_pod_counts_as_pinned():
    assert pinned_node(pod()) == "n1"
    bound = pod()
    bound["spec"]["nodeName"] = "n1"
    assert pinned_node(bound) is None
    assert pinned_node(pod(phase="Failed")) is None
    assert pinned_node({"metadata": {"name": "p"}, "spec": {}}) is None


def test_unschedulable_reads_kube_schedulers_condition():
    refused = pod(conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}])
    assert unschedulable(refused) and not unschedulable(pod())
