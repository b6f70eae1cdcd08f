"""The pod gangs among the cluster's pods, as the forecast takes them beside GPUJobs: each gang with a
live member, whether it still waits (a member carries netsched's gate) or runs, since when, at what
priority, and where its predicted times are published: on the batch Jobs whose pods it has; for any
other gang (a Kueue plain-pod group, an LWS group, a Kubeflow job's or a PodGroup's pods: objects
netsched may not patch), on its first live pod by name, where `why KIND/NAME` reads them.

A gang whose size only its Job (or PodGroup, Kubeflow job) knows (netsched.jobs.pod_gang) and whose
size is in neither `jobs` nor `sizes` has no workload: its pods still hold their room, but it is not
forecast.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from netsched.api.events import parse_rfc3339
from netsched.api.pods import DONE
from netsched.jobs.kinds.batch_job import BATCH_JOB, members
from netsched.jobs.pod_gang import PodGang, still_to_release
from netsched.jobs.pod_gangs import GangRef, controller, gang_of
from netsched.jobs.replica_pods import gang_gated

JobName = tuple[str, str]  # a batch Job's namespace and name
Published = tuple[str, str, str]  # plural ("jobs" or "pods"), namespace and name of an object to annotate
LAST = datetime.max.replace(tzinfo=UTC)  # created, for pods that do not say (a manifest): last in line


@dataclass(frozen=True)
class LiveGang:
    key: str  # "Kind namespace/name": how the forecast names it beside a GPUJob's "namespace/name"
    workload: PodGang | None  # None: its size is not known
    waiting: bool  # a member is still gated
    created: datetime  # its oldest member's creation
    started: datetime | None  # its first member's start (None: none has started yet)
    priority: int  # its members' highest
    pods: tuple[dict[str, Any], ...]  # its live members
    published_on: frozenset[Published]  # the objects that carry its predicted times


def gang_key(ref: GangRef) -> str:
    return f"{ref.kind} {ref.namespace}/{ref.name}"


def live_gangs(pods: list[dict[str, Any]], jobs: Mapping[JobName, dict[str, Any]],
               sizes: Mapping[GangRef, int] | None = None) -> dict[str, LiveGang]:
    """Every pod gang with a live member among `pods` (plain dicts), keyed by gang_key; `jobs` are
    the batch Jobs (plain dicts) by namespace and name: a Job's gang takes its size from there;
    `sizes`: those read from another object (`unsized` says which)."""
    found: dict[GangRef, list[dict[str, Any]]] = defaultdict(list)
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in DONE or pod["metadata"].get("deletionTimestamp"):
            continue
        ref = gang_of(pod)
        if ref is not None:
            found[ref].append(pod)
    return {gang_key(ref): _gang(ref, sorted(members_, key=lambda p: p["metadata"]["name"]), jobs,
                                 (sizes or {}).get(ref))
            for ref, members_ in found.items()}


def unsized(pods: list[dict[str, Any]]) -> dict[GangRef, dict[str, Any]]:
    """The gangs among `pods` whose size neither their pods nor a batch Job says (a Kubeflow job's, a
    PodGroup's), each with a member to read it by (netsched.jobs.gang_size)."""
    found: dict[GangRef, dict[str, Any]] = {}
    for pod in pods:
        ref = gang_of(pod)
        if (ref is not None and ref.size is None and _job_of(pod) is None
                and (pod.get("status") or {}).get("phase") not in DONE):
            found.setdefault(ref, pod)
    return found


def _gang(ref: GangRef, pods: list[dict[str, Any]], jobs: Mapping[JobName, dict[str, Any]],
          known: int | None) -> LiveGang:
    gated = [p for p in pods if gang_gated(p)]
    owners = frozenset(job for p in pods if (job := _job_of(p)) is not None)
    published_on = frozenset(("jobs", namespace, name) for namespace, name in owners)
    if not owners:  # no object of it netsched may annotate: its first pod carries its times
        published_on = frozenset({("pods", ref.namespace, pods[0]["metadata"]["name"])})
    size = ref.size if ref.size is not None else known
    if size is None and len(owners) == 1:
        [owner] = owners
        size = members(jobs[owner]) if owner in jobs else None
    workload = None
    if size is not None:
        to_release = still_to_release(size, len(pods), len(gated)) if gated else None
        workload = PodGang(ref, size, (gated or pods)[0], to_release)
    starts = [parse_rfc3339(s) for p in pods if (s := (p.get("status") or {}).get("startTime"))]
    return LiveGang(
        gang_key(ref), workload, bool(gated),
        min((parse_rfc3339(t) for p in pods if (t := p["metadata"].get("creationTimestamp"))), default=LAST),
        min(starts) if starts and not gated else None,
        max((p.get("spec") or {}).get("priority") or 0 for p in pods),
        tuple(pods), published_on)


def _job_of(pod: dict[str, Any]) -> JobName | None:
    owner = controller(pod)
    if owner is None or (owner.get("apiVersion"), owner.get("kind")) != BATCH_JOB.owner:
        return None
    return pod["metadata"].get("namespace") or "", owner["name"]
