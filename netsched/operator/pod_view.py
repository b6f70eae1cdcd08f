"""A GPUJob's replica pod as the ClusterIndex holds it and the GPUJob reconcile reads it: the few facts of
the pod that decide what to do next (its replica, attempt, phase, gate, why it ended)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from netsched.api.labels import ATTEMPT_LABEL, RELEASED_BY, REPLICA_LABEL
from netsched.api.pods import PodPhase
from netsched.jobs.replica_pods import GANG_GATE
from netsched.jobs.stale_pins import pinned_node, unschedulable


@dataclass(frozen=True)
class PodView:
    name: str
    replica: int
    attempt: int
    phase: str
    node: str | None
    gated: bool
    deleting: bool
    message: str = ""
    other_gates: tuple[str, ...] = ()  # scheduling gates that are not netsched's: kept when ungating
    started: str | None = None  # status.startTime: when the kubelet (KWOK) started it
    finished: str | None = None  # when its last container terminated
    released_by: str | None = None  # the PackingPlan that lifted its gang gate, if one did
    uid: str = ""
    pinned: str | None = None  # unbound and live: the node its gang's placement pinned it to
    unschedulable: bool = False  # kube-scheduler said it cannot place it (PodScheduled False)

    @classmethod
    def of(cls, pod: dict[str, Any]) -> PodView:
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        labels = meta.get("labels") or {}
        gates = [g.get("name") for g in spec.get("schedulingGates") or ()]
        return cls(meta["name"], int(labels[REPLICA_LABEL]), int(labels.get(ATTEMPT_LABEL, 0)),
                   status.get("phase", PodPhase.PENDING), spec.get("nodeName"), GANG_GATE in gates,
                   bool(meta.get("deletionTimestamp")), _pod_message(status),
                   tuple(g for g in gates if g != GANG_GATE), status.get("startTime"), _finished_at(status),
                   (meta.get("annotations") or {}).get(RELEASED_BY), meta.get("uid") or "", pinned_node(pod),
                   unschedulable(pod))



def _finished_at(status: dict[str, Any]) -> str | None:
    ends = [((cs.get("state") or {}).get("terminated") or {}).get("finishedAt")
            for cs in status.get("containerStatuses") or ()]
    return max((e for e in ends if e), default=None)


def _pod_message(status: dict[str, Any]) -> str:
    """Why a pod ended: its own message, else its first terminated container's exit."""
    if status.get("message") or status.get("reason"):
        said: str = status.get("message") or status["reason"]
        return said
    for cs in status.get("containerStatuses") or ():
        done = (cs.get("state") or {}).get("terminated")
        if done:
            return f"container {cs.get('name')} exited with code {done.get('exitCode')} " \
                   f"({done.get('reason')})"
    return ""
