"""Why a controller cannot go on with an object, as types it decides on (never as messages).

In kopf's terms: a permanent error means trying the same thing again cannot succeed; a
temporary one means the world moved on and a later try may (after `delay` seconds, or the
caller's own backoff). Each specific error carries its reason, which becomes the object's
condition reason and the Event's reason; its message is what the user reads.
"""

from __future__ import annotations

from typing import ClassVar

from netsched.api import conditions as c


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
