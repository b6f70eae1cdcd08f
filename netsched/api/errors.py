"""Why a controller cannot go on with an object, as types it decides on (never as messages).

In kopf's terms: a permanent error means trying the same thing again cannot succeed; a
temporary one means the world moved on and a later try may (after `delay` seconds, or the
caller's own backoff). Each specific error carries its reason, which becomes the object's
condition reason and the Event's reason; its message is what the user reads.
"""

from __future__ import annotations

from typing import ClassVar

from kubernetes import client

from netsched.api import conditions as c
from netsched.api.connect import api_message


class NetschedError(Exception):
    reason: ClassVar[str]

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class PermanentError(NetschedError):
    """Trying the same thing again cannot succeed."""


class TemporaryError(NetschedError):
    """The world moved on; trying again later may succeed."""

    def __init__(self, message: str, delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay  # seconds before the next try; None: the caller's own backoff


# ---- what ends a PackingPlan ------------------------------------------------------------
class DisruptionBudgetExceeded(PermanentError):
    """A PodDisruptionBudget forbids an eviction the plan needs."""
    reason = c.DISRUPTION_BUDGET


class EvictionRefused(PermanentError):
    """The API server refused an eviction (a budget that changed after the plan was checked)."""
    reason = c.EVICTION_REFUSED


class Misplaced(PermanentError):
    """A planned pod was bound elsewhere than planned."""
    reason = c.MISPLACED


class DeadlineExceeded(PermanentError):
    """The plan was not done by spec.deadlineSeconds."""
    reason = c.DEADLINE_EXCEEDED


class ClusterChanged(TemporaryError):
    """Before anything was evicted, the cluster stopped being the one the plan was made for:
    a new plan for the cluster as it is now may still help."""
    reason = c.CLUSTER_CHANGED


class PlacedPodsGone(TemporaryError):
    """A pod the plan makes room for was deleted (its workload was, most often): what it reserves
    would go to no one, and a new plan for the pods that still wait may help them."""
    reason = c.PLACED_PODS_GONE


# ---- what the API server answers -------------------------------------------------------
class Refused(PermanentError):
    """The API server refused a write that will be refused again until the spec or the cluster
    changes: invalid (422), forbidden (403: a missing PriorityClass, an exceeded quota, RBAC)."""
    reason = c.PODS_REFUSED


class Unavailable(TemporaryError):
    """The API server could not answer (5xx, 429 or no connection): the same call may succeed soon."""
    reason = c.API_UNAVAILABLE


# ---- what the operator's own storage answers ----------------------------------------------
class RecordsUnavailable(TemporaryError):
    """The job-records file cannot be read or written (a missing, full or read-only volume): the
    row is written once it can be, at a later tick."""
    reason = c.RECORDS_UNAVAILABLE


def api_failure(exc: BaseException, what: str, template: str) -> NetschedError:
    """Classify a failed write of `what` (e.g. 'pod ml/train-0'), made from the spec field
    `template`, into a permanent refusal with its fix or a temporary failure."""
    if not isinstance(exc, client.ApiException):  # no answer at all: connection refused, reset, timeout
        return Unavailable(f"cannot create {what}: the API server did not answer "
                           f"({type(exc).__name__}: {exc})")
    said = api_message(exc)
    if not exc.status or exc.status == 429 or exc.status >= 500:
        return Unavailable(f"cannot create {what}: the API server answered {exc.status}: {said}")
    return Refused(f"cannot create {what}: {said}; fix: {_fix(said, template)}")


def _fix(said: str, template: str) -> str:
    lowered = said.lower()
    if "priorityclass" in lowered:
        return ("create that PriorityClass (`kubectl get priorityclass` lists them), or name an existing one "
                "in spec.priorityClassName")
    if "exceeded quota" in lowered:
        return "raise the namespace's ResourceQuota, or ask for less in the job's spec"
    if "is forbidden" in lowered:
        return f"allow it (the object or policy named above), or change {template}"
    return f"correct the field named above in {template}"
