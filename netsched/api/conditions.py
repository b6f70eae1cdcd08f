"""GPUJob and PackingPlan condition types and reasons, and the one helper that sets a condition.

Event reasons are the same strings as condition reasons, so `kubectl describe` tells one
story in an object's Conditions and its Events.
"""

from __future__ import annotations

from typing import Any

from netsched.api.events import now_rfc3339

# condition types
ADMITTED = "Admitted"  # the gang's gate is lifted: its pods may be scheduled
PODS_READY = "PodsReady"  # at least minAvailable replicas are running
SUCCEEDED = "Succeeded"
FAILED = "Failed"
RECORDED = "Recorded"  # the finished job is in the training dataset
SCHEDULABLE = "Schedulable"  # could the gang be placed now; if not, why, and what would change it
PREEMPTED = "Preempted"  # a PackingPlan evicted its pods to make room for a job of higher priority

# reasons (also Event reasons)
WAITING_FOR_CAPACITY = "WaitingForCapacity"
GANG_RELEASED = "GangReleased"
GANG_GONE = "GangGone"  # a pod held by the gang gate whose workload is gone: released as a pod of its own
RELEASED_BY_PLAN = "ReleasedByPackingPlan"  # the packer made room and lifted the gate itself
# a member's pinned node could no longer take it before it bound: the unbound members are placed again
PIN_STALE = "PinStale"
NOT_GANG_SCHEDULED = "NotGangScheduled"
# a pod gang Kueue's topology-aware scheduling places: netsched lifted its gate, no gang, no pin
PLACED_BY_KUEUE = "PlacedByKueueTopology"
WAITING_FOR_PODS = "WaitingForPods"
PODS_RUNNING = "PodsRunning"
ALL_SUCCEEDED = "AllReplicasSucceeded"
BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
MAX_RUNTIME_EXCEEDED = "MaxRuntimeExceeded"
SCHEDULING_TIMEOUT = "SchedulingTimeout"
POD_FAILED = "PodFailed"
PODS_REFUSED = "PodsRefused"  # the API server refuses its pods until the spec or cluster changes: Blocked
INVALID_SPEC = "InvalidSpec"  # the API server took the GPUJob, but it cannot run as written: the fix is named
RECONCILE_FAILED = "ReconcileFailed"  # a tick raised: logged with its traceback, said once, tried again
API_UNAVAILABLE = "ApiUnavailable"  # the API server could not answer (5xx, 429, no connection): retried soon
POD_RECREATED = "PodRecreated"
EVICTED_BY_PLAN = "EvictedByPackingPlan"  # its pods were evicted for a higher-priority job: it waits again
PODS_CREATED = "PodsCreated"
RECORD_WRITTEN = "RecordWritten"
RECORDS_UNAVAILABLE = "RecordsUnavailable"  # the records file cannot be written: the row waits

# Schedulable reasons: why a gang waits (its message gives the numbers and the smallest change)
FITS = "Fits"
INSUFFICIENT_RESOURCES = "InsufficientResources"  # too little free room on the nodes it may use
NO_DOMAIN_LARGE_ENOUGH = "NoDomainLargeEnough"  # room enough, but no one node, rack or zone holds it
DATA_TOO_FAR = "DataTooFar"  # room enough, but not within maxDataDistance of its data
WAITING_FOR_PLAN = "WaitingForPlan"  # a PackingPlan is making room for it
# it could not fit even on an empty cluster as it is (too few GPUs in all, no node or domain large
# enough): phase Blocked, a Warning, no predicted times; also the Failed reason after --never-fits-timeout
NEVER_FITS = "NeverFits"

# PackingPlan condition types (and SUCCEEDED or FAILED once it ends, whichever way it ends)
PROGRESSING = "Progressing"  # True while the plan is carried out; False once it ended

# PackingPlan reasons (also Event reasons)
PLANNED = "Planned"  # the packer made the plan (an Event only: a new object has no status)
STARTED = "Started"  # checked against the cluster and its budgets; evicting
EVICTED = "Evicted"  # every victim is gone; placing
ALL_PLACED = "AllPlaced"
DISRUPTION_BUDGET = "DisruptionBudget"
EVICTION_REFUSED = "EvictionRefused"
MISPLACED = "Misplaced"
CLUSTER_CHANGED = "ClusterChanged"
DEADLINE_EXCEEDED = "DeadlineExceeded"
PLACED_PODS_GONE = "PlacedPodsGone"  # a pod it makes room for was deleted (its workload deleted): abandoned

MAX_MESSAGE = 1024


def find(conditions: list[dict[str, Any]], type_: str) -> dict[str, Any] | None:
    return next((c for c in conditions if c.get("type") == type_), None)


def is_true(conditions: list[dict[str, Any]], type_: str) -> bool:
    cond = find(conditions, type_)
    return cond is not None and cond.get("status") == "True"


def set_condition(conditions: list[dict[str, Any]], type_: str, status: bool, reason: str, message: str,
                  generation: int | None) -> bool:
    """Set one condition in place; returns True if its status or reason changed.

    lastTransitionTime moves only when the status flips, as Kubernetes conventions ask."""
    value = "True" if status else "False"
    message = message[:MAX_MESSAGE]
    cond = find(conditions, type_)
    if cond is None:
        cond = {"type": type_}
        conditions.append(cond)
    changed = cond.get("status") != value or cond.get("reason") != reason
    if cond.get("status") != value:
        cond["lastTransitionTime"] = now_rfc3339()
    cond.update(status=value, reason=reason, message=message)
    if generation is not None:
        cond["observedGeneration"] = generation
    return changed
