"""The gang gate: netsched's gang gate on each pod of a recognised gang (batch Job, JobSet,
LeaderWorkerSet, Kubeflow, PodGroup, Kueue pod group, native PodGroup: netsched.jobs.pod_gangs) as it is
created, so that no member is scheduled before the whole gang fits. A scheduling gate can only be added
when a pod is created (the API server refuses a new gate later), so this is the one place to add it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kopf

from netsched.jobs.pod_gangs import gang_of
from netsched.jobs.replica_pods import GANG_GATE
from netsched.operator.metrics import OperatorMetrics

log = logging.getLogger(__name__)


def gated(pod: Mapping[str, Any], scheduler: str) -> list[dict[str, Any]] | None:
    """The pod's schedulingGates with the gang gate added, or None to leave the pod as it is: it names
    another scheduler, belongs to no recognised gang (GPUJob pods do not: the operator gates those
    itself), or carries the gate already."""
    spec = pod.get("spec") or {}
    if spec.get("schedulerName") != scheduler or gang_of(pod) is None:
        return None
    gates = list(spec.get("schedulingGates") or [])
    if any(gate.get("name") == GANG_GATE for gate in gates):
        return None
    return [*gates, {"name": GANG_GATE}]


def admit(pod: Mapping[str, Any], scheduler: str, metrics: OperatorMetrics) -> list[dict[str, Any]] | None:
    """`gated`, counted by outcome in `netsched_webhook_requests_total`; a pod it cannot tell about is
    refused (its controller creates it again), never let through ungated."""
    try:
        gates = gated(pod, scheduler)
    except Exception as exc:
        metrics.webhook_requests.labels("error").inc()
        meta = pod.get("metadata") or {}
        who = f"{meta.get('namespace')}/{meta.get('name') or (meta.get('generateName') or '') + '*'}"
        log.exception("admission of pod %s failed", who)
        raise kopf.AdmissionError(
            f"netsched could not tell whether pod {who} belongs to a gang ({type(exc).__name__}: {exc}); "
            "its controller will create it again; see the netsched operator's log") from exc
    metrics.webhook_requests.labels("passed" if gates is None else "gated").inc()
    return gates
