"""The operator's Prometheus metrics (its own registry, served on --metrics-port): the packer's, with the
error counters every loop of the process shares (netsched.packer.metrics), and the GPUJobs'."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from netsched.api.events import parse_rfc3339
from netsched.api.gpujob import Phase
from netsched.jobs.kinds.registry import KINDS
from netsched.operator.record_report import RecordReport
from netsched.packer.metrics import PackerMetrics

DURATION_BUCKETS = (10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400, float("inf"))
# a gang that fits at once is released within seconds; one that waits for room, minutes to a day
QUEUE_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400, float("inf"))
# not started yet: waiting for room at the gate, or released with pods not all running
WAITING = (Phase.PENDING, Phase.SCHEDULING)


class OperatorMetrics(PackerMetrics):
    def __init__(self) -> None:
        super().__init__()
        self.job_duration = Histogram(
            "netsched_gpujob_duration_seconds", "Run time of finished GPUJobs (start to finish)",
            ["outcome"], buckets=DURATION_BUCKETS, registry=self.registry)
        self.job_queue = Histogram(
            "netsched_gpujob_queue_seconds", "Seconds from a GPUJob's creation to its gang running "
            "(status.startTime; the records' queue_seconds), observed once per job when it starts",
            buckets=QUEUE_BUCKETS, registry=self.registry)
        self.jobs_finished = Counter(
            "netsched_gpujobs_finished_total", "GPUJobs that finished, by outcome and reason",
            ["outcome", "reason"], registry=self.registry)
        self.record_errors = Counter(
            "netsched_operator_record_errors_total", "Job records that could not be written yet (the "
            "records file unreadable or unwritable; each is tried again at a later tick)",
            registry=self.registry)
        self.reconcile_errors = Counter(
            "netsched_operator_reconcile_errors_total", "GPUJob ticks that raised (logged, said on the job)",
            registry=self.registry)
        self.forecast_seconds = Histogram(
            "netsched_operator_forecast_pass_seconds", "Time one forecast pass takes (the leader's), "
            "failed passes included: it grows with the jobs and nodes of the cluster",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, float("inf")), registry=self.registry)
        self.predicted_remaining = Gauge(
            "netsched_gpujob_predicted_remaining_seconds", "Seconds until each unfinished GPUJob is "
            "predicted to complete (waiting jobs: from their predicted start)", ["namespace", "gpujob"],
            registry=self.registry)
        self.gang_pins = Counter(
            "netsched_operator_gang_placements_total", "Gangs released with every member's node chosen by "
            "the extender (pinned), or released unpinned because it placed no node for every member "
            "(unplaced), refused the request (refused) or did not answer (unreachable)", ["result"],
            registry=self.registry)
        self.webhook_requests = Counter(
            "netsched_webhook_requests_total", "Pod creations the admission webhook answered, by outcome: "
            "gated (the gang gate added), passed (left as it was), error (refused: the pod's controller "
            "creates it again; or its data limit not written), limited (its data limit written as node "
            "affinity)", ["outcome"], registry=self.registry)
        for outcome in ("gated", "passed", "error", "limited"):
            self.webhook_requests.labels(outcome)  # 0 from the start: rate() and alerts see the first one
        self.leader = Gauge(
            "netsched_operator_leader", "1 on the replica that leads (runs GPUJobs, pod gangs, the forecast "
            "and the packer), 0 on one that stands by", registry=self.registry)
        self.jobs = JobCensus()
        self.registry.register(self.jobs)
        self.gangs = GangCensus(self.jobs)
        self.registry.register(self.gangs)
        self.report = RecordReport()  # reads the records once the manager says which (watch)
        self.registry.register(self.report)


class JobCensus(Collector):
    """The GPUJobs the operator's watch shows, counted when Prometheus scrapes: `netsched_gpujobs` by
    phase (every phase, 0 when no job has it; a job without a phase yet counts as Pending) and the age
    of the oldest job that has not started. A deleted job leaves no series behind."""

    def __init__(self, clock: Callable[[], float] = time.time):
        self.clock = clock
        self._lock = threading.Lock()
        self._jobs: dict[str, tuple[str, float]] = {}  # uid -> (phase, creation in epoch seconds)

    def seen(self, body: Mapping[str, Any]) -> None:
        meta, status = body["metadata"], body.get("status") or {}
        created = meta.get("creationTimestamp")
        when = parse_rfc3339(created).timestamp() if created else self.clock()
        with self._lock:
            self._jobs[meta["uid"]] = (status.get("phase") or Phase.PENDING, when)

    def gone(self, uid: str) -> None:
        with self._lock:
            self._jobs.pop(uid, None)

    def phases(self) -> list[tuple[str, float]]:
        """(phase, creation in epoch seconds) of each GPUJob."""
        with self._lock:
            return list(self._jobs.values())

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield from self._families({}, None)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            jobs = list(self._jobs.values())
        counts: dict[str, int] = {str(phase): 0 for phase in Phase}
        for phase, _ in jobs:
            counts[phase] = counts.get(phase, 0) + 1  # a phase this version does not know still counts
        created = [when for phase, when in jobs if phase in WAITING]
        yield from self._families(counts, max(0.0, self.clock() - min(created)) if created else 0.0)

    @staticmethod
    def _families(counts: Mapping[str, int], oldest: float | None) -> Iterator[GaugeMetricFamily]:
        by_phase = GaugeMetricFamily("netsched_gpujobs", "GPUJobs by status.phase, as the operator's watch "
                                     "shows them", labels=["phase"])
        for phase, n in counts.items():
            by_phase.add_metric([phase], n)
        yield by_phase
        yield GaugeMetricFamily("netsched_gpujob_oldest_waiting_seconds", "Age of the oldest GPUJob that "
                                "has not started (Pending or Scheduling; 0 when none waits)", value=oldest)


GANG_STATES = ("waiting", "blocked")


class GangCensus(Collector):
    """Gangs that have not started, of every kind netsched gangs, counted when Prometheus scrapes:
    `netsched_gangs{kind,state}` (waiting: for room, its pods or a plan; blocked: it never fits or its
    spec is invalid, the user must act) and the age of the oldest waiting one of each kind
    (`netsched_gang_oldest_waiting_seconds{kind}`, blocked ones left out as the GPUJob gauge leaves them).
    Pod gangs (a Job's, a JobSet's, ...) as the pod-gang controller's last pass, the leader's, found them;
    GPUJobs from the JobCensus (Blocked is blocked; Pending and Scheduling wait, as for
    netsched_gpujob_oldest_waiting_seconds). Every kind and state is exported, 0 when none."""

    def __init__(self, jobs: JobCensus, clock: Callable[[], float] = time.time):
        self.jobs, self.clock = jobs, clock
        self._lock = threading.Lock()
        self._gangs: list[tuple[str, str, float]] = []  # (kind, state, creation in epoch seconds)

    def update(self, gangs: list[tuple[str, str, float]]) -> None:
        """The pod gangs a pass found not started: (kind, waiting or blocked, when its first pod was made)."""
        with self._lock:
            self._gangs = list(gangs)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield from self._families([])

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            gangs = list(self._gangs)
        jobs = self.jobs.phases()
        gangs += [("GPUJob", "blocked" if phase == Phase.BLOCKED else "waiting", when) for phase, when in jobs
                  if phase == Phase.BLOCKED or phase in WAITING]
        yield from self._families(gangs)

    def _families(self, gangs: list[tuple[str, str, float]]) -> Iterator[GaugeMetricFamily]:
        kinds = sorted({"GPUJob", *(k.kind for k in KINDS), *(kind for kind, _, _ in gangs)})
        counts = {(k, s): 0 for k in kinds for s in GANG_STATES}
        oldest: dict[str, float] = {}
        for kind, state, when in gangs:
            counts[(kind, state)] = counts.get((kind, state), 0) + 1
            if state == "waiting":
                oldest[kind] = min(when, oldest.get(kind, when))
        by_state = GaugeMetricFamily("netsched_gangs", "Gangs that have not started, by kind (GPUJob, Job, "
                                     "JobSet, ...) and state (waiting; blocked: it never fits or is invalid)",
                                     labels=["kind", "state"])
        for (kind, state), n in sorted(counts.items()):
            by_state.add_metric([kind, state], n)
        yield by_state
        ages = GaugeMetricFamily("netsched_gang_oldest_waiting_seconds", "Age of the oldest gang of each "
                                 "kind waiting to start (blocked ones are counted in netsched_gangs; 0 when "
                                 "none waits)", labels=["kind"])
        now = self.clock()
        for kind in kinds:
            ages.add_metric([kind], max(0.0, now - oldest[kind]) if kind in oldest else 0.0)
        yield ages
