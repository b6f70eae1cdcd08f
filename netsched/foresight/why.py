"""`netsched why JOB`: why a GPUJob waits and what would change it, with the room per node, rack or zone.

The reason and message are the job's own `Schedulable` condition (what the operator found at its last
tick), or, for a job that cannot go on as it is (Blocked, an invalid spec), the condition that says
why; the predicted start and completion are the forecast in its status; the table is worked out
now from the live cluster, the way gang admission counts room.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from netsched.api import conditions as c
from netsched.api.gpujob import (
    PREDICTED_AFTER,
    PREDICTED_FINISH,
    PREDICTED_FINISH_RANGE,
    PREDICTED_START,
    PREDICTED_START_RANGE,
    PREDICTION_BASIS,
    Phase,
)
from netsched.foresight.whatif import NEVER_STARTS, Cluster, WhatIfError, between, room_lines, room_table
from netsched.jobs.gpujob import GPUJob


def why(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    body = next((j for j in cluster.jobs if j["metadata"]["namespace"] == namespace
                 and j["metadata"]["name"] == name), None)
    if body is None:
        raise WhatIfError(f"GPUJob {namespace}/{name} not found (kubectl get gpujobs -n {namespace})")
    status = body.get("status") or {}
    job = GPUJob.of(body)
    said = _said(status)
    return {
        "job": f"{namespace}/{name}", "phase": status.get("phase", "Pending"), "condition": said.get("type"),
        "reason": said.get("reason"), "message": said.get("message") or status.get("reason"),
        "predictedStartTime": status.get(PREDICTED_START), "waitsFor": status.get(PREDICTED_AFTER) or [],
        "predictedCompletionTime": status.get(PREDICTED_FINISH),
        "predictionBasis": status.get(PREDICTION_BASIS),
        **{name: status.get(name) for name in (*PREDICTED_START_RANGE, *PREDICTED_FINISH_RANGE)},
        "domains": room_table(job, cluster.rooms, cluster.used, job.needs.max_peer_distance, cluster.topology,
                              rows=10),
        "preempted": _preempted(status),
    }


def _preempted(status: dict[str, Any]) -> str | None:
    """What the job's Preempted condition says while it holds: the PackingPlan that evicted its pods,
    and for whom."""
    said = c.find(status.get("conditions") or [], c.PREEMPTED)
    return f"{said.get('reason')}: {said.get('message')}" if said and said.get("status") == "True" else None


def _said(status: dict[str, Any]) -> dict[str, Any]:
    """The condition that says why the job does not go on: the one holding the status' reason when the
    job cannot go on as it is (Blocked, an invalid spec: the API server's or the operator's message),
    else Schedulable (why its gang waits)."""
    conditions = status.get("conditions") or []
    schedulable = c.find(conditions, c.SCHEDULABLE)
    if status.get("phase") == Phase.BLOCKED or schedulable is None:
        # Schedulable first: a job that never fits says why there, its other conditions only echo it
        held = next((x for x in ([schedulable] if schedulable else []) + conditions
                     if x.get("reason") == status.get("reason") and x.get("status") == "False"), None)
        if held is not None:
            return held
    return schedulable or {}


def render_why(answer: dict[str, Any], now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    lines = [f"GPUJob {answer['job']}: {answer['phase']}"]
    if answer["reason"]:
        lines.append(f"{answer['condition']}: {answer['reason']}: {answer['message']}")
    elif answer["message"]:
        lines.append(f"Status: {answer['message']}")
    if answer["reason"] == c.NEVER_FITS:
        lines.append(NEVER_STARTS)
    if answer.get("preempted"):
        lines.append(f"Preempted: {answer['preempted']}")
    if answer["predictedStartTime"]:
        lines.append(f"Predicted start: {answer['predictedStartTime']}"
                     f"{between(answer, PREDICTED_START_RANGE, now)}" + (
            f", when {', '.join(answer['waitsFor'])} is predicted to finish" if answer["waitsFor"] else ""))
    if answer["predictedCompletionTime"]:
        lines.append(f"Predicted completion: {answer['predictedCompletionTime']}"
                     f"{between(answer, PREDICTED_FINISH_RANGE, now)} "
                     f"(run time from {answer['predictionBasis']})")
    return "\n".join(lines + room_lines(answer["domains"], "replicas of this job", now=" now"))

