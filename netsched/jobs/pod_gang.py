"""A pod gang (netsched.jobs.pod_gangs) as a `Workload`, so fit, placement and validation take it as
they take a GPUJob.

Its members are pods its own controller made from one template, so one member pod stands for all:
its requests, spec and priority class, and its network needs from the `netsched.io/*` annotations
the template gave it (the same ones the extender reads). Its size comes from the workload, never from
how many pods exist so far: the pods' own size annotation (GangRef.size) or, for a Job, its
parallelism (netsched.jobs.kinds.batch_job.members), which the operator reads from the API.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from netsched.api.annotations import number_as_written, workload_kind
from netsched.api.labels import EXPECTED_SECONDS, GPU_RESOURCE
from netsched.api.resources import Resources, pod_requests
from netsched.jobs.kinds.kind import GangKind
from netsched.jobs.kinds.registry import kind_named
from netsched.jobs.pod_gangs import GangRef
from netsched.jobs.workload import NetworkNeeds, SizeFields


@dataclass(frozen=True)
class PodGang:
    ref: GangRef
    size: int  # members the workload runs (GangRef.size or the owner's)
    member: dict[str, Any]  # one member pod
    to_release: int | None = None  # members still gated when some already run (a Job's replacements)

    @property
    def min_available(self) -> int:
        """The members that must fit at once: all, or those still to release."""
        return self.size if self.to_release is None else self.to_release

    @property
    def annotations(self) -> dict[str, str]:
        annotations: dict[str, str] = (self.member.get("metadata") or {}).get("annotations") or {}
        return annotations

    # ---- the workload seam (netsched.jobs.workload.Workload) -------------------------------
    @property
    def member_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.member.get("spec") or {}
        return spec

    @cached_property
    def member_request(self) -> Resources:
        return pod_requests(self.member_spec)

    @property
    def gpus_per_member(self) -> int:
        return int(self.member_request.get(GPU_RESOURCE, 0))

    @property
    def priority_class_name(self) -> str | None:
        name: str | None = self.member_spec.get("priorityClassName")
        return name

    @property
    def needs(self) -> NetworkNeeds:
        """As the annotations say; netsched.jobs.validation.problems says what is wrong with them."""
        return NetworkNeeds.of_annotations(self.annotations)

    @property
    def workload_kind(self) -> str:
        return workload_kind(self.annotations) or "training"

    @property
    def expected_seconds(self) -> float | None:
        return number_as_written(self.annotations, EXPECTED_SECONDS)

    @property
    def fields(self) -> SizeFields:
        kind = kind_named(self.ref.kind)
        return (kind or GangKind(self.ref.kind, 0, ())).fields


def still_to_release(size: int, live: int, gated: int) -> int:
    """Members to release together when `live` pods of a gang of `size` exist and `gated` of them are
    still gated: those the workload runs beyond the released ones; when more are gated than that
    (replacements of pods that ended), all the gated ones."""
    return max(size - (live - gated), 0) or gated
