"""The GPUJob controller: what one reconcile tick of a GPUJob does (its kopf timer: gpujobs.handlers).

Each tick reads the ClusterIndex (no API reads), runs the pure `reconcile`, then
carries out its actions with the Kubernetes client: create pods, lift gang gates,
delete pods, write status, post Events, append the training record. Gang admission
goes through the AdmissionGate shared with the pod gangs (netsched.operator.admission_gate): one gang
at a time, and a released gang's room reserved until its pods show up as pending. A gang
that an active PackingPlan places waits for the plan to lift its gate.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import urllib3
from kubernetes import client

from netsched.api import conditions as c
from netsched.api.connect import api_message
from netsched.api.errors import NetschedError, PermanentError, RecordsUnavailable, api_failure
from netsched.api.events import event
from netsched.api.gpujob import (
    GROUP,
    PLURAL,
    PREDICTED_AFTER,
    PREDICTED_FINISH,
    PREDICTED_START,
    VERSION,
    Phase,
)
from netsched.api.labels import SCHEDULER_NAME
from netsched.api.pods import DONE
from netsched.api.topology import DEFAULT, Topology
from netsched.jobs.capacity import Fit, NodeRoom, gang_fit, member_room
from netsched.jobs.gpujob import GPUJob
from netsched.jobs.hard_limits import (
    NodeRequirement,
    Unwritable,
    data_requirement,
    pinned_to,
    requirement_patch,
)
from netsched.jobs.plan_room import with_plan_room
from netsched.jobs.replica_pods import (
    pin_patch,
    pinned_note,
    pod_annotations,
    pod_name,
    replica_pod,
    ungate_patch,
)
from netsched.jobs.stale_pins import stale_pin
from netsched.jobs.validation import invalid, problems
from netsched.operator import COMPONENT
from netsched.operator.admission_gate import AdmissionGate
from netsched.operator.cluster_index import Indices
from netsched.operator.gang_placer import GangPlacer
from netsched.operator.gpujobs.reconcile import (
    BACKOFF,
    CREATED,
    PERMANENT_MAX_RETRY,
    Actions,
    create_backoff,
    created_events,
    reconcile,
)
from netsched.operator.metrics import OperatorMetrics
from netsched.operator.pod_view import PodView
from netsched.records.link_columns import FIELD as TELEMETRY_FIELD
from netsched.records.link_columns import needs_snapshot, placement_telemetry
from netsched.records.writer import JobRecords, job_record, queue_seconds
from netsched.telemetry.store import TelemetryStore

log = logging.getLogger(__name__)
PREDICTIONS = (PREDICTED_START, PREDICTED_AFTER, PREDICTED_FINISH)  # the times a Blocked job has none of


@dataclass
class GPUJobController:
    api: client.ApiClient
    records: JobRecords
    metrics: OperatorMetrics = field(default_factory=OperatorMetrics)
    interval: float = 1.0
    scheduler: str = SCHEDULER_NAME  # schedulerName of the pods it creates (unless the template sets one)
    telemetry: TelemetryStore | None = None  # links at job start, for the records (None: not recorded)
    packer_note: Callable[[str], str | None] = lambda job: None  # why the packer cannot make room for it
    never_fits_timeout: float = 0.0  # seconds Blocked because it never fits before it fails; 0: never fails
    topology: Topology = DEFAULT  # the levels jobs name in maxPeerDistance, data sources, ...
    gate: AdmissionGate = field(default_factory=AdmissionGate)  # one gang admitted at a time; reservations
    placer: GangPlacer = field(default_factory=lambda: GangPlacer(None))  # where a released gang's pods go
    _evicted: set[str] = field(default_factory=set)  # pods evicted for a stale pin, until the watch shows it

    def __post_init__(self) -> None:
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)

    # ---- one tick ---------------------------------------------------------------
    def tick(self, body: dict[str, Any], nodes: list[NodeRoom], indices: Indices) -> None:
        """One reconcile of the job in `body` (a plain copy). Nothing it meets escapes as an exception:
        kopf would only retry it a minute later, with no word to the user."""
        job = GPUJob.of(body)
        status = body.get("status") or {}
        pods = indices.pods_of(job.key)
        try:
            found = problems(job, pod_annotations(job), nodes, topology=self.topology) if not pods else []
            if found:  # before any pod exists, a template that cannot make one is the user's to fix
                new, warning = invalid(status, found, job.generation)
                events = [("Warning", c.INVALID_SPEC, warning)] if warning else []
                self._apply(job, status, Actions(status=new, events=events), {}, pods)
            else:
                self._reconcile(job, status, pods, nodes, indices)
        except Exception as exc:  # a bug, or a spec edited into something this code did not foresee
            self._failed(job, status, exc)

    def _reconcile(self, job: GPUJob, status: dict[str, Any], pods: list[PodView], nodes: list[NodeRoom],
                   indices: Indices) -> None:
        labels = {n.name: n.labels for n in nodes}
        if self._replaced_stale_pins(job, status, pods, nodes, indices):
            return
        gated = job.gang and not c.is_true(status.get("conditions") or [], c.ADMITTED)
        with self.gate if gated else contextlib.nullcontext():
            actions = reconcile(job, status, pods, labels, lambda: self._fit(job, nodes, indices),
                                never_fits_timeout=self.never_fits_timeout, topology=self.topology)
            if self.telemetry is not None and needs_snapshot(job, actions.status):
                actions.status[TELEMETRY_FIELD] = placement_telemetry(job, actions.status, self.telemetry,
                                                                      labels, self.topology)
            self._apply(job, status, actions, labels, pods)
            if actions.ungate:
                self.gate.reserve(job.key, job.member_request, actions.nodes)

    def _replaced_stale_pins(self, job: GPUJob, status: dict[str, Any], pods: list[PodView],
                             nodes: list[NodeRoom], indices: Indices) -> bool:
        """When a pod's pinned node can no longer take it (netsched.jobs.stale_pins), evict the job's
        unbound pinned pods; with none of its pods bound, the gang goes back to admission (Admitted
        False, PinStale), so the pods made again are gated and the gang is placed anew. Once per pod."""
        rooms = {n.name: n for n in nodes}
        self._evicted &= {p.uid for p in pods if p.pinned}
        stale = (stale_pin(p.pinned, job.member_spec, p.unschedulable, rooms, indices.used)
                 for p in pods if p.pinned)
        why = next((w for w in stale if w), None)
        fresh = [p for p in pods if p.pinned and p.uid not in self._evicted]
        if why is None or not fresh:
            return False
        for p in fresh:
            self._evicted.add(p.uid)
            self._call("evict", self.core.create_namespaced_pod_eviction, p.name, job.namespace,
                       client.V1Eviction(metadata=client.V1ObjectMeta(name=p.name, namespace=job.namespace)))
        message = (f"{why} before its pod bound; its {len(fresh)} unbound pod(s) are evicted to be made "
                   "again and placed anew")
        actions = Actions(status={**status, "conditions": [dict(x) for x in status.get("conditions") or []]})
        if not any(p.node and p.phase not in DONE for p in pods):  # none bound: the whole gang again
            c.set_condition(actions.status["conditions"], c.ADMITTED, False, c.PIN_STALE, message,
                            job.generation)
        actions.event(c.PIN_STALE, message, warning=True)
        log.info("GPUJob %s/%s: %s", job.namespace, job.name, message)
        self._apply(job, status, actions, {}, pods)
        return True

    def _failed(self, job: GPUJob, status: dict[str, Any], exc: Exception) -> None:
        """Counted every time; logged with its traceback and said on the job once per new message."""
        self.metrics.reconcile_errors.inc()
        message = (f"reconciling failed: {type(exc).__name__}: {exc}; check spec.template against the GPUJob "
                   "reference (docs/operator.md), or report it with the operator's log")
        new = {**status, "conditions": [dict(x) for x in status.get("conditions") or []]}
        old = c.find(new["conditions"], c.PODS_READY)
        if old is not None and old.get("reason") == c.RECONCILE_FAILED and old.get("message") == message:
            return
        log.exception("GPUJob %s/%s: %s", job.namespace, job.name, message)
        c.set_condition(new["conditions"], c.PODS_READY, False, c.RECONCILE_FAILED, message, job.generation)
        new["reason"] = c.RECONCILE_FAILED
        actions = Actions(status=new, events=[("Warning", c.RECONCILE_FAILED, message)])
        self._apply(job, status, actions, {}, [])

    def _fit(self, job: GPUJob, nodes: list[NodeRoom], indices: Indices) -> Fit:
        plan = indices.plan_of(job)
        if plan:  # its room is being made: the plan lifts the gate when its victims are gone
            return Fit(0, job.min_available, f"PackingPlan {plan} is making room for the gang and lifts "
                                             "the gate when it is ready", why=c.WAITING_FOR_PLAN)
        pinned, loose = self.gate.reserved(indices, job.key)
        # the room an active plan holds for the pods it places is not this gang's to take
        pending, taken = indices.pending + loose, with_plan_room(indices.taken(pinned), indices.plan_room)
        result = gang_fit(nodes, taken, pending, job, self.topology)
        if result.fits:
            room = member_room(nodes, taken, pending, job, self.topology)
            return replace(result, nodes=self._place(job, indices, room))
        # no PackingPlan can place a gang that never fits: what the packer says of it is noise
        waits = not result.fits and result.why != c.NEVER_FITS
        note = self.packer_note(f"{job.namespace}/{job.name}") if waits else None
        return replace(result, message=f"{result.message}; {note}") if note else result

    def _place(self, job: GPUJob, indices: Indices, room: dict[str, int]) -> dict[str, str] | None:
        """Each gated pod's node, chosen together by the extender, when it has every one."""
        gated = [p for p in indices.pods_of(job.key) if p.gated and p.phase not in DONE]
        if not gated or not self.placer.url:
            return None
        return self.placer.nodes(job.namespace, job.name, [self._as_made(job, p) for p in gated], room)

    def _as_made(self, job: GPUJob, pod: PodView, near_data: NodeRequirement | None = None) -> dict[str, Any]:
        """The gated pod as this controller made it (its spec is the template's: no pod body is kept)."""
        made = replica_pod(job, pod.replica, pod.attempt, True, self.scheduler, near_data)
        made["metadata"].update(name=pod.name, namespace=job.namespace, uid=pod.uid)
        return made

    def deleted(self, body: dict[str, Any], indices: Indices) -> None:
        """A GPUJob being deleted: delete its pods now, so their GPUs are free within seconds rather
        than when garbage collection gets to them after the job is gone. Not when the user asked to keep
        them (`--cascade=orphan`)."""
        meta = body["metadata"]
        if "orphan" in (meta.get("finalizers") or ()):
            return
        namespace = meta.get("namespace", "default")
        for pod in indices.pods_of((namespace, meta["name"], meta["uid"])):
            if not pod.deleting:
                self._call("delete", self.core.delete_namespaced_pod, pod.name, namespace)

    # ---- carrying out -----------------------------------------------------------
    def _apply(self, job: GPUJob, old_status: dict[str, Any], actions: Actions,
               labels: dict[str, dict[str, str]], pods: list[PodView]) -> None:
        if actions.create:
            self._create(job, actions, labels)
        others = {p.name: p.other_gates for p in pods}
        # the pin goes in the same patch as the gate: only a gated pod's nodeSelector may change
        pin = pin_patch(job.template["spec"].get("nodeSelector"), *actions.pin) if actions.pin else []
        views = {p.name: p for p in pods}
        near_data = self._near_data(job, labels) if actions.nodes else None
        for name in actions.ungate:
            node = actions.nodes.get(name)
            if node and name in views:  # narrowed to its one node, the data limit it was made with kept
                made = self._as_made(job, views[name], near_data)
                pinned = requirement_patch(made["spec"], pinned_to(node, near_data))
                pinned.append(pinned_note(made["metadata"].get("annotations"), node, []))
            else:
                pinned = pin
            self._call("ungate", self.core.patch_namespaced_pod, name, job.namespace,
                       [*pinned, ungate_patch(others.get(name, ()))])
        for name in actions.delete:
            self._call("delete", self.core.delete_namespaced_pod, name, job.namespace)
        if actions.record:
            self._record(job, actions, labels)
        if actions.status != old_status:
            written = self._call("status", self.custom.patch_namespaced_custom_object_status, GROUP, VERSION,
                                 job.namespace, PLURAL, job.name, {"status": actions.status})
            queued = queue_seconds(job, actions.status)
            if written and queued is not None and not old_status.get("startTime"):  # once: when it starts
                self.metrics.job_queue.observe(max(0.0, queued))
        for type_, reason, message in actions.events:
            self._call("event", self.core.create_namespaced_event, job.namespace,
                       event(job.involved(), reason, message, COMPONENT, type_))

    def _create(self, job: GPUJob, actions: Actions, labels: dict[str, dict[str, str]]) -> None:
        """Create the pods in replica order, stopping at the first failure: the next ones would meet
        the same refusal. Events for the pods made; a condition and a backoff for a refusal."""
        status = actions.status
        known = status.get(CREATED, 0)
        made = []
        near_data = self._near_data(job, labels)
        for replica, attempt, gated in actions.create:
            try:
                pin = None if gated else actions.pin  # a gated pod is pinned as its gate lifts
                self.core.create_namespaced_pod(job.namespace, replica_pod(job, replica, attempt, gated,
                                                                           self.scheduler, near_data, pin))
            except (client.ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
                # 409: created by an earlier tick whose pod the index has not shown yet
                if not isinstance(exc, client.ApiException) or exc.status != 409:
                    what = f"pod {job.namespace}/{pod_name(job.name, replica, attempt)}"
                    self._create_failed(job, actions, api_failure(exc, what, "spec.template.spec"))
                    break
            made.append((replica, attempt, gated))
        else:
            if BACKOFF in status:
                status[BACKOFF] = None  # every pod made: a merge patch deletes the backoff
        status[CREATED] = max([known, *(i + 1 for i, _, _ in made)])
        actions.events[:0] = [("Normal", reason, text) for reason, text in created_events(job, made, known)]

    def _near_data(self, job: GPUJob, labels: dict[str, dict[str, str]]) -> NodeRequirement | None:
        """The job's data limit as its pods' required node affinity; one that cannot be written is
        kept by the extender alone, and said in the log (the spec was validated: it is rare)."""
        try:
            return data_requirement(job.needs, labels.items(), self.topology)
        except Unwritable as exc:
            log.warning("GPUJob %s/%s: its data limit is kept by the extender only: %s", job.namespace,
                        job.name, exc)
            return None

    def _create_failed(self, job: GPUJob, actions: Actions, failure: NetschedError) -> None:
        """One Event per new reason; the condition holds the latest message; the next try waits."""
        self.metrics.api_errors.labels("create").inc()
        status = actions.status
        conds = status.setdefault("conditions", [])
        permanent = isinstance(failure, PermanentError)
        message = failure.message
        if permanent:  # Blocked, yet tried again: a fix to the cluster (a PriorityClass, a quota) is found
            message += (f"; tried again at least every {PERMANENT_MAX_RETRY:g} s, so the job goes on by "
                        "itself once that is fixed")
            status["phase"] = Phase.BLOCKED
            status.update({name: None for name in PREDICTIONS if status.get(name) is not None})
        if c.set_condition(conds, c.PODS_READY, False, failure.reason, message, job.generation):
            actions.event(failure.reason, message, warning=True)
            log.warning("GPUJob %s/%s: %s", job.namespace, job.name, message)
        status["reason"] = failure.reason
        status[BACKOFF] = create_backoff(status.get(BACKOFF), permanent, job.generation, datetime.now(UTC))

    def _record(self, job: GPUJob, actions: Actions, labels: dict[str, dict[str, str]]) -> None:
        status = actions.status
        conds = status.setdefault("conditions", [])
        row = job_record(job, status, labels, self.topology)
        try:
            written = self.records.append(row)
        except RecordsUnavailable as exc:  # the job's status goes on; the row waits for the next tick
            self.metrics.record_errors.inc()
            if c.set_condition(conds, c.RECORDED, False, exc.reason, exc.message, job.generation):
                actions.event(exc.reason, exc.message, warning=True)
                log.warning("GPUJob %s/%s: %s", job.namespace, job.name, exc.message)
            return
        if written:
            outcome = status.get("phase", "Unknown")
            self.metrics.jobs_finished.labels(outcome, row["reason"] or "").inc()
            if row["duration_seconds"] is not None:
                self.metrics.job_duration.labels(outcome).observe(row["duration_seconds"])
        c.set_condition(conds, c.RECORDED, True, c.RECORD_WRITTEN, f"recorded in {self.records.path}",
                        job.generation)

    def _call(self, action: str, fn: Callable[..., object], *args: Any) -> bool:
        """Whether the call was done (or its object is already gone); a failure is counted and logged."""
        try:
            fn(*args)
        except client.ApiException as exc:
            if exc.status == 404 and action in ("delete", "ungate"):
                return True  # already gone: the next tick sees it
            self.metrics.api_errors.labels(action).inc()
            log.warning("%s failed: %s", action, api_message(exc))
            return False
        return True
