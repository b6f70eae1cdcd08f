"""A gang member pinned to a node that can no longer take it, noticed before it binds.

A gang's members are pinned to their nodes as their gates lift (netsched.jobs.hard_limits.pinned_to),
and a pin cannot be changed once the gate is gone. If the node goes (deleted), stops taking pods
(cordoned, NotReady: both also taint it), gains a taint the pod does not tolerate, or its room is taken
(by a pod of another scheduler) before the member binds, the pin would hold the member pending for ever.
Such a member, and the gang's other unbound members, are evicted so that their controller makes them
again, gated, and the gang's unbound part is placed anew; bound members are never moved."""

from __future__ import annotations

from typing import Any

from netsched.api.labels import PINNED_NODE
from netsched.api.objects import KubeObject
from netsched.api.pods import DONE
from netsched.api.resources import Resources, pod_requests
from netsched.jobs.capacity import NodeRoom, fits_on, may_use


def pinned_node(pod: KubeObject) -> str | None:
    """The node the gang's placement pinned this pod to, while it is unbound and live; else None."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    node = (meta.get("annotations") or {}).get(PINNED_NODE)
    if not node or spec.get("nodeName") or meta.get("deletionTimestamp") or status.get("phase") in DONE:
        return None
    return str(node)


def released_pin(pod: KubeObject) -> str | None:
    """The node a released (ungated), unbound, live pod was pinned to: its room there is spoken for."""
    return None if (pod.get("spec") or {}).get("schedulingGates") else pinned_node(pod)


def stale_pin(node: str, spec: dict[str, Any], unschedulable: bool, rooms: dict[str, NodeRoom],
              used: dict[str, Resources]) -> str | None:
    """Why `node` cannot take the unbound pod pinned to it (with this `spec`), in words naming the node;
    None while it can. Room counts only once kube-scheduler has said it cannot place the pod
    (`unschedulable`): before that, its gang's members pinned beside it are on their way to that room."""
    room = rooms.get(node)
    if room is None:
        return f"node {node} is gone"
    if not room.schedulable:
        return f"node {node} is cordoned or not Ready"
    if not may_use(room, {"tolerations": spec.get("tolerations")}):
        taints = ", ".join(f"{t.get('key')}:{t.get('effect')}" for t in room.taints)
        return f"node {node} has a taint the pod does not tolerate ({taints})"
    if unschedulable and not fits_on(room, used.get(node, {}), pod_requests(spec)):
        return f"node {node}'s room was taken before the pod bound"
    return None


def unschedulable(pod: KubeObject) -> bool:
    """Has kube-scheduler said it cannot place the pod (PodScheduled False, Unschedulable)?"""
    return any((c.get("type"), c.get("status"), c.get("reason")) == ("PodScheduled", "False", "Unschedulable")
               for c in (pod.get("status") or {}).get("conditions") or ())
