"""When will a job start, and when will it finish? Pure: what the operator writes into each GPUJob's
status (predictedStartTime, predictedCompletionTime) and what `netsched whatif` answers.

- How long a job runs (`estimate_duration`): learned from finished jobs (the operator's records, or
  finished GPUJobs still in the cluster), most specific first: the user's
  `spec.workload.expectedDurationSeconds` scaled by how far such declarations were off before; the
  median run of jobs of the same kind and shape; of the same kind; of any finished job. The basis is
  always said, so a user can tell a guess from a measurement.
- When a waiting job starts (`predict_starts`): the cluster is played forward. Room frees when a
  running job's predicted completion comes; waiting gangs take room in priority order (then by age)
  whenever they fit, the way gang admission releases them, and free it again after their own
  predicted run. A pod with no predicted end (neither a GPUJob's nor a pod gang's, or of a job with
  no estimate) is taken to hold its room; a job that needs such room has no predicted start (None),
  never a made-up one.
- Pod gangs (batch Jobs, JobSet groups, ...; netsched.jobs.live_gangs) are played in the same queue
  by the same rules: their priority is their pods', their run time is estimated as a GPUJob's, from
  the pods' `netsched.io/expected-duration-seconds` hint (their template's) or the history.
"""

from __future__ import annotations

import heapq
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from netsched.api.events import parse_rfc3339
from netsched.api.gpujob import TERMINAL, Phase
from netsched.api.labels import EXPECTED_SECONDS, GPU_RESOURCE, JOB_LABEL
from netsched.api.pods import DONE
from netsched.api.resources import Resources, pod_requests
from netsched.jobs.capacity import NodeRoom, placement
from netsched.jobs.gpujob import GPUJob
from netsched.jobs.live_gangs import LiveGang
from netsched.jobs.pod_gang import PodGang
from netsched.jobs.validation import problems
from netsched.jobs.workload import Workload

MIN_HISTORY = 3  # finished jobs a median is taken over; fewer say too little about the next one


@dataclass(frozen=True)
class Estimate:
    seconds: float | None  # None: nothing to go on
    basis: str  # where the number comes from, in words


def estimate_duration(job: Workload, history: Iterable[dict[str, Any]]) -> Estimate:
    """The run time to expect of `job`, from `history` (rows of the records format,
    netsched.records.format.ROW_FIELDS: only Succeeded rows with a duration count)."""
    hint = (f"the pods' {EXPECTED_SECONDS} annotation" if isinstance(job, PodGang)
            else "spec.workload.expectedDurationSeconds")
    done = [r for r in history if r.get("outcome") == "Succeeded" and (r.get("duration_seconds") or 0) > 0]
    kind = job.workload_kind
    expected = job.expected_seconds
    if expected:
        ratios = [r["duration_seconds"] / r["expected_duration_seconds"] for r in done
                  if r.get("expected_duration_seconds")]
        if len(ratios) >= MIN_HISTORY:
            ratio = statistics.median(ratios)
            return Estimate(expected * ratio, f"{hint} {expected} × {ratio:.2f}, the median ratio of run "
                                              f"to expectation over {len(ratios)} finished jobs")
        return Estimate(float(expected), f"{hint} (too few finished jobs to check it against)")
    same_kind = [r for r in done if r.get("workload_kind", "training") == kind]
    shape = (job.size, job.gpus_per_member)
    for rows, what in (
            ([r for r in same_kind if (r.get("replicas"), r.get("gpus_per_replica")) == shape],
             f"{kind} jobs of {shape[0]}×{shape[1]} GPUs"),
            (same_kind, f"{kind} jobs"),
            (done, "jobs")):
        if len(rows) >= MIN_HISTORY:
            seconds = statistics.median(r["duration_seconds"] for r in rows)
            return Estimate(seconds, f"the median run of {len(rows)} finished {what}")
    return Estimate(None, f"only {len(done)} finished job(s) to learn from; set {hint} to say how long "
                          "it runs")


@dataclass(frozen=True)
class Waiting:
    """A gang that waits for room, as the forecast plays it."""
    key: str  # namespace/name
    priority: int
    created: datetime
    job: Workload
    seconds: float | None  # its estimated run


@dataclass(frozen=True)
class Release:
    at: datetime
    node: str
    request: Resources
    owner: str = ""  # namespace/name of the job whose end frees it


@dataclass(frozen=True)
class Start:
    at: datetime | None  # None: not while pods with no predicted end hold the room it needs
    after: tuple[str, ...] = ()  # the jobs whose predicted end lets it start (none: it fits now)


def predict_starts(now: datetime, nodes: list[NodeRoom], used: dict[str, Resources], releases: list[Release],
                   queue: list[Waiting]) -> dict[str, Start]:
    """The predicted start of every waiting gang in `queue`. `used` is what bound pods take now;
    `releases` when some of it frees."""
    room: dict[str, Resources] = {n: dict(r) for n, r in used.items()}
    events = [(max(r.at, now), i, r.node, r.request, r.owner) for i, r in enumerate(releases)]
    heapq.heapify(events)
    order = sorted(queue, key=lambda w: (-w.priority, w.created, w.key))
    starts = {w.key: Start(None) for w in queue}
    t, serial = now, len(events)
    freed: set[str] = set()
    # free GPUs over all schedulable nodes: a gang asking more cannot fit, and is not tried (each try
    # walks every node; most release events free too little for most gangs)
    schedulable = {n.name for n in nodes if n.schedulable}
    free_gpus = sum(n.allocatable.get(GPU_RESOURCE, 0.0) - room.get(n.name, {}).get(GPU_RESOURCE, 0.0)
                    for n in nodes if n.schedulable)
    while order:
        for w in list(order):
            if w.job.member_request.get(GPU_RESOURCE, 0.0) * w.job.min_available > free_gpus:
                continue
            where = placement(nodes, room, w.job)
            if where is None:
                continue
            order.remove(w)
            starts[w.key] = Start(t, tuple(sorted(freed)))
            for node, count in where.items():
                take = {k: v * count for k, v in w.job.member_request.items()}
                _add(room, node, take, 1)
                free_gpus -= take.get(GPU_RESOURCE, 0.0)
                if w.seconds is not None:
                    heapq.heappush(events, (t + timedelta(seconds=w.seconds), serial, node, take, w.key))
                    serial += 1
        if not order or not events:
            break
        t, freed = events[0][0], set()
        while events and events[0][0] == t:
            _, _, node, request, owner = heapq.heappop(events)
            _add(room, node, request, -1)
            free_gpus += request.get(GPU_RESOURCE, 0.0) if node in schedulable else 0.0
            freed.add(owner)
    return starts


def bound_usage(pods: list[dict[str, Any]]) -> dict[str, Resources]:
    """What the bound, unfinished pods among `pods` (plain dicts) take on each node."""
    used: dict[str, Resources] = {}
    for pod in pods:
        if _holds_room(pod):
            _add(used, pod["spec"]["nodeName"], pod_requests(pod["spec"]), 1)
    return used


def _holds_room(pod: dict[str, Any]) -> bool:
    """Bound and not finished: its requests count on its node."""
    bound = bool((pod.get("spec") or {}).get("nodeName"))
    return bound and (pod.get("status") or {}).get("phase") not in DONE


def _add(room: dict[str, Resources], node: str, request: Resources, sign: int) -> None:
    used = room.setdefault(node, {})
    for k, v in request.items():
        used[k] = used.get(k, 0.0) + sign * v


@dataclass(frozen=True)
class Forecast:
    start: datetime | None  # predicted start, while the job waits for room
    finish: datetime | None  # predicted completion, while it waits or runs
    estimate: Estimate
    after: tuple[str, ...] = ()  # while it waits: the jobs whose predicted end lets it start
    unreadable: bool = False  # its spec cannot be read: no times, and the basis says why


def _unreadable(body: dict[str, Any], exc: Exception) -> str:
    """What keeps a job's spec from being read: the fields validation names, else the error."""
    try:
        found = problems(GPUJob.of(body), {}, [])
    except Exception:
        found = []
    return "; ".join(found) or f"{type(exc).__name__}: {exc}"


def cluster_forecast(now: datetime, nodes: list[NodeRoom], pods: list[dict[str, Any]],
                     jobs: list[dict[str, Any]], history: list[dict[str, Any]],
                     gangs: Iterable[LiveGang] = ()) -> dict[str, Forecast]:
    """A forecast for every unfinished GPUJob in `jobs` (keyed namespace/name) and every pod gang in
    `gangs` whose size is known (keyed LiveGang.key), played in one queue by the same rules, from the
    cluster's nodes and pods (plain dicts) and the finished-job `history`. A Blocked job has none;
    one whose spec cannot be read has no times, and its basis says what is wrong."""
    specs = {f"{j['metadata']['namespace']}/{j['metadata']['name']}": j for j in jobs}
    unfinished: dict[str, GPUJob] = {}
    estimates: dict[str, Estimate] = {}
    running_until: dict[str, datetime] = {}
    created: dict[str, datetime] = {}
    unreadable: dict[str, Forecast] = {}
    for key, body in specs.items():
        status = body.get("status") or {}
        phase = status.get("phase", Phase.PENDING)
        if phase in TERMINAL or phase == Phase.BLOCKED:  # a Blocked job starts only once someone acts
            continue
        try:  # one job's spec that cannot be read costs that job its forecast, never the others theirs
            job = GPUJob.of(body)
            job.member_request  # noqa: B018 (reads the template's quantities: the forecast needs them)
            estimate = estimate_duration(job, history)
            created[key] = parse_rfc3339(job.created)
            started = status.get("startTime")
            if started and estimate.seconds is not None and phase != Phase.PENDING:  # pending: evicted
                running_until[key] = parse_rfc3339(started) + timedelta(seconds=estimate.seconds)
        except Exception as exc:
            said = f"no forecast: {_unreadable(body, exc)}"
            unreadable[key] = Forecast(None, None, Estimate(None, said), unreadable=True)
            continue
        unfinished[key], estimates[key] = job, estimate
    releases: list[Release] = []
    priorities: dict[str, int] = defaultdict(int)
    for pod in pods:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        owner = f"{meta.get('namespace')}/{(meta.get('labels') or {}).get(JOB_LABEL)}"
        priorities[owner] = max(priorities[owner], spec.get("priority") or 0)
        if owner in running_until and _holds_room(pod):
            releases.append(Release(running_until[owner], spec["nodeName"], pod_requests(spec), owner))
    used = bound_usage(pods)
    queue = []
    for key, job in unfinished.items():
        if (specs[key].get("status") or {}).get("phase", Phase.PENDING) == Phase.PENDING:
            queue.append(Waiting(key, priorities[key], created[key], job, estimates[key].seconds))
    for gang in gangs:
        if gang.workload is None:
            continue
        estimate = estimates[gang.key] = estimate_duration(gang.workload, history)
        if gang.waiting:
            queue.append(Waiting(gang.key, gang.priority, gang.created, gang.workload, estimate.seconds))
        elif estimate.seconds is not None:  # released: its members run, or are about to
            until = running_until[gang.key] = (gang.started or now) + timedelta(seconds=estimate.seconds)
            releases.extend(Release(until, p["spec"]["nodeName"], pod_requests(p["spec"]), gang.key)
                            for p in gang.pods if _holds_room(p))
    starts = predict_starts(now, nodes, used, releases, queue)
    out = dict(unreadable)
    for key, estimate in estimates.items():
        start = starts.get(key, Start(None))
        finish = running_until.get(key)
        if start.at is not None and estimate.seconds is not None:
            finish = start.at + timedelta(seconds=estimate.seconds)
        out[key] = Forecast(start.at, finish, estimate, start.after)
    return out
