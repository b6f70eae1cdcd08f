"""When will a job start, and when will it finish? Pure: what the operator writes into each GPUJob's
status (predictedStartTime, predictedCompletionTime) and what `netsched whatif` answers.

- How long a job runs (`estimate_duration`, netsched.jobs.run_time): the completion-time model on
  the GPU it runs (or is predicted to run) on where one is loaded, the user's duration hint and the
  runs of finished jobs like it, each calibrated on the finished jobs and blended by how close each
  came before; with a P10-P90 interval from how far such estimates were off. The basis is always
  said, so a user can tell a guess from a measurement.
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
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from netsched.api.events import parse_rfc3339
from netsched.api.gpujob import TERMINAL, Phase
from netsched.api.labels import EXPECTED_SECONDS, GPU_RESOURCE, JOB_LABEL
from netsched.api.pods import DONE
from netsched.api.resources import Resources, pod_requests
from netsched.api.topology import DEFAULT, Topology
from netsched.jobs.capacity import NodeRoom, placement
from netsched.jobs.forecast_errors import Correction, Scores
from netsched.jobs.gpujob import GPUJob
from netsched.jobs.live_gangs import LiveGang
from netsched.jobs.pod_gang import PodGang
from netsched.jobs.run_time import Estimate, RunTimes, node_case
from netsched.jobs.stale_pins import released_pin
from netsched.jobs.validation import problems
from netsched.jobs.workload import Workload

if TYPE_CHECKING:  # the model (and numpy) load only where one is given
    from netsched.models.predictor import Predictor


@dataclass(frozen=True)
class Waiting:
    """A gang that waits for room, as the forecast plays it."""
    key: str  # namespace/name
    priority: int
    created: datetime
    job: Workload
    run: Callable[[str], Estimate]  # its estimated run on a node (by name): the GPU there matters


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
    estimate: Estimate | None = None  # its run where the play placed it


def predict_starts(now: datetime, nodes: list[NodeRoom], used: dict[str, Resources], releases: list[Release],
                   queue: list[Waiting], quantile: int = 1, topology: Topology = DEFAULT) -> dict[str, Start]:
    """The predicted start of every waiting gang in `queue`. `used` is what bound pods take now;
    `releases` when some of it frees; a started gang runs its estimate's P10, P50 or P90 (`quantile`
    0, 1 or 2: Estimate.quantiles)."""
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
            where = placement(nodes, room, w.job, topology)
            if where is None:
                continue
            order.remove(w)
            estimate = w.run(max(where, key=lambda n: (where[n], n)))  # where most of its members run
            runs = estimate.quantiles()
            starts[w.key] = Start(t, tuple(sorted(freed)), estimate)
            for node, count in where.items():
                take = {k: v * count for k, v in w.job.member_request.items()}
                _add(room, node, take, 1)
                free_gpus -= take.get(GPU_RESOURCE, 0.0)
                if runs is not None:
                    heapq.heappush(events, (t + timedelta(seconds=runs[quantile]), serial, node, take, w.key))
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


def bound_usage(pods: list[dict[str, Any]], pinned: bool = False) -> dict[str, Resources]:
    """What the bound, unfinished pods among `pods` (plain dicts) take on each node; with `pinned`, also
    the released pods not bound yet on the node their gang's placement pinned them to (their room is
    spoken for there, as gang admission counts it)."""
    used: dict[str, Resources] = {}
    for pod in pods:
        if _holds_room(pod):
            _add(used, pod["spec"]["nodeName"], pod_requests(pod["spec"]), 1)
        elif pinned and (node := released_pin(pod)) is not None:
            _add(used, node, pod_requests(pod["spec"]), 1)
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
    start_range: tuple[datetime, datetime] | None = None  # P10 and P90 of the start (None: no interval)
    finish_range: tuple[datetime, datetime] | None = None  # P10 and P90 of the completion
    # the same as the cluster was played, before the correction by past forecasts' errors: what a
    # job's first forecast keeps, so that corrections are read from played intervals alone
    start_played: tuple[datetime, datetime] | None = None
    finish_played: tuple[datetime, datetime] | None = None

    def corrected(self, now: datetime, by: Mapping[str, Correction]) -> Forecast:
        """This forecast with each interval moved by the correction of its time (netsched.jobs.
        forecast_errors), played intervals kept beside them."""
        start_range, finish_range = self.start_range, self.finish_range
        if self.start is not None and "start" in by:
            start_range = by["start"].apply(now, self.start, start_range)
        if self.finish is not None and "completion" in by:
            finish_range = by["completion"].apply(now, self.finish, finish_range)
        return replace(self, start_range=start_range, finish_range=finish_range,
                       start_played=self.start_range, finish_played=self.finish_range)


class Learned:
    """What the forecast learns from the finished jobs (records rows) and the model: run times and how
    far recorded forecasts missed; learned once and used for as many forecasts as the history stays."""

    def __init__(self, history: list[dict[str, Any]], model: Predictor | None = None):
        self.run_times = RunTimes(history, model)
        self.misses = Scores(history)


def _unreadable(body: dict[str, Any], exc: Exception, topology: Topology) -> str:
    """What keeps a job's spec from being read: the fields validation names, else the error."""
    try:
        found = problems(GPUJob.of(body), {}, [], topology=topology)
    except Exception:
        found = []
    return "; ".join(found) or f"{type(exc).__name__}: {exc}"


def cluster_forecast(now: datetime, nodes: list[NodeRoom], pods: list[dict[str, Any]],
                     jobs: list[dict[str, Any]], history: list[dict[str, Any]] | Learned,
                     gangs: Iterable[LiveGang] = (), model: Predictor | None = None,
                     topology: Topology = DEFAULT) -> dict[str, Forecast]:
    """A forecast for every unfinished GPUJob in `jobs` (keyed namespace/name) and every pod gang in
    `gangs` whose size is known (keyed LiveGang.key), played in one queue by the same rules, from the
    cluster's nodes and pods (plain dicts), the finished-job `history` and the completion-time
    `model` (None: none), or what was `Learned` of them before. A Blocked job has none; one whose
    spec cannot be read has no times, and its basis says what is wrong, as has one naming a level
    `topology` lacks (a pod gang that does is left out: its pods stay gated).

    The cluster is played three times: with every run at its P10, its estimate and its P90 (as if all
    jobs ran fast, or slow, together: the start a waiting job gets then bounds its start's interval).
    A waiting job's completion interval adds its start's and its own run's, taken as independent.
    Each interval is then corrected by how far the first forecasts of the recorded jobs and of the
    unfinished ones in `jobs` missed theirs (netsched.jobs.forecast_errors)."""
    learned = history if isinstance(history, Learned) else Learned(history, model)
    run_times = learned.run_times
    labels = {n.name: n.labels for n in nodes}
    specs = {f"{j['metadata']['namespace']}/{j['metadata']['name']}": j for j in jobs}
    read = _read_jobs(specs, run_times, labels, _bound_nodes(pods), topology)
    estimates, running_since = read.estimates, read.running_since
    holders: list[tuple[str, str, Resources]] = []  # (job, node, request) of each bound pod of a started job
    priorities: dict[str, int] = defaultdict(int)
    for pod in pods:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        owner = f"{meta.get('namespace')}/{(meta.get('labels') or {}).get(JOB_LABEL)}"
        priorities[owner] = max(priorities[owner], spec.get("priority") or 0)
        if owner in running_since and _holds_room(pod):
            holders.append((owner, spec["nodeName"], pod_requests(spec)))
    used = bound_usage(pods)
    queue = []
    for key, job in read.unfinished.items():
        if (specs[key].get("status") or {}).get("phase", Phase.PENDING) == Phase.PENDING:
            queue.append(Waiting(key, priorities[key], read.created[key], job,
                                 _run_on(run_times, job, labels)))
    for gang in gangs:
        if gang.workload is None or not _known_levels(gang.workload, topology, raises=False):
            continue
        if gang.waiting:
            queue.append(Waiting(gang.key, gang.priority, gang.created, gang.workload,
                                 _run_on(run_times, gang.workload, labels)))
            continue
        held = [p for p in gang.pods if _holds_room(p)]
        where = labels.get(held[0]["spec"]["nodeName"]) if held else None
        estimates[gang.key] = estimate_duration(run_times, gang.workload, where)
        running_since[gang.key] = gang.started or now  # released: its members run, or are about to
        holders.extend((gang.key, p["spec"]["nodeName"], pod_requests(p["spec"])) for p in held)
    ends = {key: [since + timedelta(seconds=s) for s in runs] for key, since in running_since.items()
            if (runs := estimates[key].quantiles()) is not None}
    def play(q: int) -> dict[str, Start]:
        releases = [Release(ends[owner][q], node, request, owner) for owner, node, request in holders
                    if owner in ends]
        return predict_starts(now, nodes, used, releases, queue, q, topology)
    middle = play(1)
    # the P10 and P90 plays change only waiting jobs' starts, and only if some run has a spread
    placed = [*estimates.values(), *(s.estimate for s in middle.values() if s.estimate)]
    plays = [play(0), middle, play(2)] if queue and any(e.spread for e in placed) else [middle] * 3
    for w in queue:  # placed by the play: its run there (Start.estimate); else on no node in particular
        estimates[w.key] = w.run("")
    out = dict(read.unreadable)
    corrections = learned.misses.corrections(jobs, now)
    for key, estimate in estimates.items():
        forecast = _forecast(estimate, [play.get(key, Start(None)) for play in plays], ends.get(key))
        out[key] = forecast.corrected(now, corrections)
    return out


@dataclass
class _ReadJobs:
    """The unfinished GPUJobs of a forecast, keyed namespace/name, as read from their objects."""
    unfinished: dict[str, GPUJob] = field(default_factory=dict)  # those whose spec could be read
    estimates: dict[str, Estimate] = field(default_factory=dict)  # their runs where they run now
    running_since: dict[str, datetime] = field(default_factory=dict)  # started (or released) jobs: when
    created: dict[str, datetime] = field(default_factory=dict)
    unreadable: dict[str, Forecast] = field(default_factory=dict)  # no times: the basis says why


def _read_jobs(specs: dict[str, dict[str, Any]], run_times: RunTimes, labels: dict[str, dict[str, str]],
               bound: dict[str, str], topology: Topology) -> _ReadJobs:
    """The GPUJob objects `specs` that are neither finished nor Blocked (a Blocked job starts only once
    someone acts), each job's run estimated on the node of its first bound pod (`bound`)."""
    read = _ReadJobs()
    for key, body in specs.items():
        status = body.get("status") or {}
        phase = status.get("phase", Phase.PENDING)
        if phase in TERMINAL:
            continue
        try:  # one job's spec that cannot be read costs that job its forecast, never the others theirs
            job = GPUJob.of(body)
            job.member_request  # noqa: B018 (reads the template's quantities: the forecast needs them)
            _known_levels(job, topology)
            if phase == Phase.BLOCKED:  # it never fits: no times (one it cannot read says why above)
                continue
            read.estimates[key] = estimate_duration(run_times, job, labels.get(bound.get(key, "")))
            read.created[key] = parse_rfc3339(job.created)
            started = status.get("startTime")
            if started and phase != Phase.PENDING:  # pending: evicted
                read.running_since[key] = parse_rfc3339(started)
        except Exception as exc:
            said = f"no forecast: {_unreadable(body, exc, topology)}"
            read.unreadable[key] = Forecast(None, None, Estimate(None, said), unreadable=True)
            continue
        read.unfinished[key] = job
    return read


def _known_levels(job: Workload, topology: Topology, raises: bool = True) -> bool:
    """Does `job` name only levels `topology` has (else UnknownLevel, or False if not `raises`)?"""
    named = (job.needs.max_peer_distance, job.needs.max_data_distance)
    unknown = next((n for n in named if n is not None and n not in topology.limits), None)
    if unknown is not None and raises:
        raise topology.unknown(unknown)
    return unknown is None


def _forecast(estimate: Estimate, starts: list[Start], ends: list[datetime] | None) -> Forecast:
    """A job's forecast from its start in each play (while it waits) or its ends (while it runs)."""
    low, start, high = starts
    if start.estimate is not None:  # it waits, and the play placed it: its run there
        estimate = start.estimate
    runs = estimate.quantiles()
    if start.at is None or runs is None:  # running (its ends, if any), or no start in sight
        finish = ends[1] if ends and start.at is None else None
        finish_range = (ends[0], ends[2]) if ends and start.at is None and estimate.spread else None
        return Forecast(start.at, finish, estimate, start.after, finish_range=finish_range)
    finish = start.at + timedelta(seconds=runs[1])
    if not estimate.spread or low.at is None or high.at is None:
        return Forecast(start.at, finish, estimate, start.after)
    early, late = sorted((low.at, start.at, high.at))[::2]
    below = math.hypot((start.at - early).total_seconds(), runs[1] - runs[0])
    above = math.hypot((late - start.at).total_seconds(), runs[2] - runs[1])
    return Forecast(start.at, finish, estimate, start.after, start_range=(early, late),
                    finish_range=(finish - timedelta(seconds=below), finish + timedelta(seconds=above)))


def estimate_duration(run_times: RunTimes, job: Workload, node_labels: dict[str, str] | None = None
                      ) -> Estimate:
    """`job`'s estimated run on the node with `node_labels` (None: not placed, or no such node)."""
    hint = (f"the pods' {EXPECTED_SECONDS} annotation" if isinstance(job, PodGang)
            else "spec.workload.expectedDurationSeconds")
    case = node_case(job.workload_kind, job.size, job.gpus_per_member, job.expected_seconds, node_labels)
    return run_times.estimate(case, hint)


def _run_on(run_times: RunTimes, job: Workload, labels: dict[str, dict[str, str]]
            ) -> Callable[[str], Estimate]:
    return lambda node: estimate_duration(run_times, job, labels.get(node))


def _bound_nodes(pods: list[dict[str, Any]]) -> dict[str, str]:
    """The node of each GPUJob's first bound pod (by name): its GPU is the job's."""
    out: dict[str, str] = {}
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        meta = pod["metadata"]
        job = (meta.get("labels") or {}).get(JOB_LABEL)
        if job and _holds_room(pod):
            out.setdefault(f"{meta.get('namespace')}/{job}", pod["spec"]["nodeName"])
    return out
