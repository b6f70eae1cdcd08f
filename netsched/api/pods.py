"""Pod phases (core/v1 status.phase) as Kubernetes writes them."""

from __future__ import annotations

from enum import StrEnum


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


DONE = (PodPhase.SUCCEEDED, PodPhase.FAILED)  # its containers ended and will not restart
