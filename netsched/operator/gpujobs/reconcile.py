"""One reconcile step of a GPUJob: from the job and its pods to the actions that make them agree.

Pure: no API calls. The handler feeds it what the watches show and carries the
actions out, so every decision here is unit-tested without a cluster. It is
level-triggered: the pods (deterministic names, replica and attempt labels) are
the truth, so a restarted operator picks up exactly where the last one stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from netsched.api import conditions as c
from netsched.api.events import parse_rfc3339, rfc3339
from netsched.api.gpujob import PREDICTED_AFTER, PREDICTED_FINISH, PREDICTED_START, TERMINAL, Phase
from netsched.api.labels import RACK_LABEL, ZONE_LABEL
from netsched.api.pods import DONE, PodPhase
from netsched.api.topology import DEFAULT, Topology
from netsched.jobs.capacity import Fit, on_nodes
from netsched.jobs.gpujob import GPUJob
from netsched.operator.pod_view import PodView

CREATED = "podsCreated"  # status: replicas 0..n-1 have had a pod (a missing one below n was deleted)
BACKOFF = "podCreateBackoff"  # status, while creates are refused: {failures, retryAt, generation, ...}
BLOCKED_SINCE = "blockedSince"  # status, while it never fits: since when (--never-fits-timeout counts on)
PERMANENT_FIRST_RETRY, PERMANENT_MAX_RETRY = 5.0, 300.0  # seconds: a refusal waits for a fix
TEMPORARY_FIRST_RETRY, TEMPORARY_MAX_RETRY = 1.0, 30.0  # seconds: an API server that did not answer


@dataclass
class Actions:
    create: list[tuple[int, int, bool]] = field(default_factory=list)  # (replica, attempt, gated)
    ungate: list[str] = field(default_factory=list)
    # (node label, value) added to the nodeSelector of the pods it ungates and creates ungated
    pin: tuple[str, str] | None = None
    nodes: dict[str, str] = field(default_factory=dict)  # pod -> its node, pinned as it is ungated
    delete: list[str] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)  # the whole new status
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)
    record: bool = False  # the job just finished: write its training record

    def event(self, reason: str, message: str, warning: bool = False) -> None:
        self.events.append(("Warning" if warning else "Normal", reason, message))


def reconcile(job: GPUJob, status: dict[str, Any], pods: list[PodView],
              node_labels: dict[str, dict[str, str]], fit: Callable[[], Fit],
              now: datetime | None = None, never_fits_timeout: float = 0.0,
              topology: Topology = DEFAULT) -> Actions:
    """`never_fits_timeout`: seconds a job may stay Blocked because it never fits before it fails
    (0: it waits Blocked until the cluster grows or the job is changed). `topology`: the levels whose
    domains each placement records."""
    now = now or datetime.now(UTC)
    out = Actions()
    new = {**status, "conditions": [dict(x) for x in status.get("conditions") or []],
           "observedGeneration": job.generation, "gpus": job.gpus}
    latest = _latest(pods)
    conds = new["conditions"]
    if new.get("phase") in TERMINAL:
        out.delete = [p.name for p in latest.values() if p.phase not in DONE and not p.deleting]
        out.record = not c.is_true(conds, c.RECORDED)
        out.status = _summary(new, job, latest, node_labels, topology)
        return out

    failures = sum(p.phase == PodPhase.FAILED for p in pods)
    new["failures"] = failures
    ended = _ended(job, new, latest, failures, now, never_fits_timeout)
    if ended:
        phase, reason, message = ended
        return _finish(out, job, new, latest, node_labels, topology, phase, reason, message, now)

    evicted = job.evicted_by if job.evicted_by and _newly_evicted(conds, job.evicted_by.message) else None
    if evicted:
        _evicted(out, job, new, evicted.message)
    going = set(evicted.pods) if evicted else set()  # evicted: they no longer say the gang was let in
    admitted = not job.gang or c.is_true(conds, c.ADMITTED) or any(
        not p.gated for p in latest.values()
        if p.phase not in DONE and not p.deleting and p.name not in going)
    new.setdefault(CREATED, max(latest) + 1 if latest else 0)  # a status written before the field
    backoff = new.get(BACKOFF)
    if backoff and backoff.get("generation") != job.generation:
        new[BACKOFF] = None  # the spec changed: the refusal may be fixed, so try now (None: a merge delete)
        backoff = None
    if not backoff or now >= (_time(backoff.get("retryAt")) or now):
        _replace_missing(out, job, latest, failures > (status.get("failures") or 0), admitted)
    if not admitted:
        admitted = _admit(out, job, conds, latest, fit)
    elif not job.gang:
        c.set_condition(conds, c.ADMITTED, True, c.NOT_GANG_SCHEDULED,
                        "gang scheduling is off: pods are scheduled one by one", job.generation)
    else:  # admitted earlier: lift any gate left behind (a failed patch, a restart between patches)
        out.ungate = [p.name for p in latest.values() if p.gated and p.phase not in DONE]
        # those and replacements join the running pods' domain, kept there by kube-scheduler itself
        out.pin = _peers_domain(job, latest, node_labels, topology)
        if not c.is_true(conds, c.ADMITTED):  # a PackingPlan, or a restart between our patches, lifted it
            _admitted_elsewhere(out, job, conds, latest)
    _phase(out, job, new, latest, admitted, now)
    out.status = _summary(new, job, latest, node_labels, topology)
    return out


def _peers_domain(job: GPUJob, latest: dict[int, PodView], node_labels: dict[str, dict[str, str]],
                  topology: Topology) -> tuple[str, str] | None:
    """(label, value) of the one domain of the job's maxPeerDistance level its live bound pods are in;
    None without such a level or a single such domain."""
    level = job.needs.max_peer_distance
    if level not in topology.names:  # none, node (one node only the extender picks) or unknown
        return None
    label = topology.label_of(level)
    found = {value for p in latest.values() if p.node and p.phase not in DONE
             and (value := node_labels.get(p.node, {}).get(label)) is not None}
    return (label, found.pop()) if len(found) == 1 else None


def _latest(pods: list[PodView]) -> dict[int, PodView]:
    """Each replica's newest pod."""
    latest: dict[int, PodView] = {}
    for p in pods:
        if p.replica not in latest or p.attempt > latest[p.replica].attempt:
            latest[p.replica] = p
    return latest


def _ended(job: GPUJob, status: dict[str, Any], latest: dict[int, PodView], failures: int,
           now: datetime, never_fits_timeout: float) -> tuple[Phase, str, str] | None:
    if len(latest) == job.replicas and all(latest[i].phase == PodPhase.SUCCEEDED
                                           for i in range(job.replicas)):
        return Phase.SUCCEEDED, c.ALL_SUCCEEDED, f"all {job.replicas} replicas succeeded"
    if failures > job.backoff_limit:
        return Phase.FAILED, c.BACKOFF_LIMIT_EXCEEDED, (
            f"{failures} pod failures exceed spec.backoffLimit {job.backoff_limit}; "
            f"last: {_last_failure(latest)}")
    started = _time(status.get("startTime"))
    if job.max_runtime and started and (now - started).total_seconds() > job.max_runtime:
        return Phase.FAILED, c.MAX_RUNTIME_EXCEEDED, (
            f"ran {(now - started).total_seconds():.0f} s, longer than spec.maxRuntimeSeconds "
            f"{job.max_runtime}; its pods were stopped")
    created = _time(job.created)
    if (job.scheduling_timeout and not started and created
            and (now - created).total_seconds() > job.scheduling_timeout):
        return Phase.FAILED, c.SCHEDULING_TIMEOUT, (
            f"not running {job.scheduling_timeout} s after creation (spec.gang.schedulingTimeoutSeconds); "
            f"{_waiting_reason(status)}")
    blocked = _time(status.get(BLOCKED_SINCE)) if status.get("reason") == c.NEVER_FITS else None
    if never_fits_timeout and blocked and (now - blocked).total_seconds() > never_fits_timeout:
        return Phase.FAILED, c.NEVER_FITS, (
            f"Blocked longer than the operator's --never-fits-timeout ({never_fits_timeout:g} s); "
            f"{_waiting_reason(status)}")
    return None


def _finish(out: Actions, job: GPUJob, new: dict[str, Any], latest: dict[int, PodView],
            node_labels: dict[str, dict[str, str]], topology: Topology,
            phase: Phase, reason: str, message: str, now: datetime) -> Actions:
    conds = new["conditions"]
    c.set_condition(conds, phase, True, reason, message, job.generation)
    ends = [p.finished for p in latest.values() if p.finished] if phase == Phase.SUCCEEDED else []
    new.update(phase=phase, reason=reason, completionTime=max(ends) if ends else rfc3339(now))
    _forget(new, PREDICTED_START, PREDICTED_AFTER, PREDICTED_FINISH)  # the real times are there now
    out.delete = [p.name for p in latest.values() if p.phase not in DONE and not p.deleting]
    out.event(reason, f"GPUJob {phase.lower()}: {message}", warning=phase == Phase.FAILED)
    out.record = True
    out.status = _summary(new, job, latest, node_labels, topology)
    return out


def _replace_missing(out: Actions, job: GPUJob, latest: dict[int, PodView], new_failure: bool,
                     admitted: bool) -> None:
    """Create each replica's pod if it has none, or a new attempt if its newest one failed.

    Which creates happened is known only once they are made: the handler posts their Events."""
    for i in range(job.replicas):
        p = latest.get(i)
        if p is None:
            out.create.append((i, 0, not admitted))
        elif p.phase == PodPhase.FAILED:
            out.create.append((i, p.attempt + 1, not admitted))
            if new_failure:  # once per failure, not once per refused retry of its next attempt
                out.event(c.POD_FAILED, f"pod {p.name} (replica {i}) failed: {p.message or 'no message'}; "
                                        f"starting attempt {p.attempt + 1}", warning=True)


def created_events(job: GPUJob, created: list[tuple[int, int, bool]], known: int) -> list[tuple[str, str]]:
    """The Events (reason, message) for the pods a tick did create: one for the replicas that never
    had a pod, one per replica below `known` (status.podsCreated) whose pod went away."""
    events = [(c.POD_RECREATED, f"replica {i} had no pod (deleted?); creating it again")
              for i, attempt, _ in created if attempt == 0 and i < known]
    first = [gated for i, attempt, gated in created if attempt == 0 and i >= known]
    if first:
        behind = " behind the gang gate until the whole gang fits" if first[0] else ""
        made = f"created {len(first)} pod(s) of {job.gpus_per_replica} GPU(s){behind}"
        events.insert(0, (c.PODS_CREATED, made))
    return events


def create_backoff(previous: dict[str, Any] | None, permanent: bool, generation: int,
                   now: datetime) -> dict[str, Any]:
    """status.podCreateBackoff after a refused create: when to try again, doubling per refusal up to
    a cap (minutes for a refusal, seconds for an API server that did not answer). Kept in the status
    so that a restarted operator waits too."""
    same = previous and previous.get("generation") == generation and previous.get("permanent") == permanent
    failures = (previous or {}).get("failures", 0) + 1 if same else 1
    base, cap = (PERMANENT_FIRST_RETRY, PERMANENT_MAX_RETRY) if permanent else (TEMPORARY_FIRST_RETRY,
                                                                                TEMPORARY_MAX_RETRY)
    delay = min(cap, base * 2 ** (failures - 1))
    return {"failures": failures, "permanent": permanent, "generation": generation, "delaySeconds": delay,
            "retryAt": rfc3339(now + timedelta(seconds=delay))}


def _newly_evicted(conds: list[dict[str, Any]], message: str) -> bool:
    said = c.find(conds, c.PREEMPTED)
    return said is None or said.get("message") != message[:c.MAX_MESSAGE]


def _evicted(out: Actions, job: GPUJob, new: dict[str, Any], message: str) -> None:
    """A PackingPlan evicted the job's pods for a more important job: said once, and the gang goes back
    to the queue (its pods are made again behind the gate) with its forecast and fit worked out anew."""
    conds = new["conditions"]
    c.set_condition(conds, c.PREEMPTED, True, c.EVICTED_BY_PLAN, message, job.generation)
    if job.gang:
        c.set_condition(conds, c.ADMITTED, False, c.EVICTED_BY_PLAN, message, job.generation)
        c.set_condition(conds, c.SCHEDULABLE, False, c.EVICTED_BY_PLAN,
                        "evicted: whether the gang fits is checked again once its pods are made again",
                        job.generation)
    _forget(new, PREDICTED_FINISH)  # the run it predicted was cut short; the forecaster predicts anew
    out.event(c.EVICTED_BY_PLAN, message, warning=True)


def _admitted_elsewhere(out: Actions, job: GPUJob, conds: list[dict[str, Any]],
                        latest: dict[int, PodView]) -> None:
    plan = next((p.released_by for p in latest.values() if p.released_by), None)
    if plan is None:
        c.set_condition(conds, c.ADMITTED, True, c.GANG_RELEASED, "the gang's gate is lifted", job.generation)
        return
    message = f"PackingPlan {plan} made room and lifted the gang's gate"
    c.set_condition(conds, c.ADMITTED, True, c.RELEASED_BY_PLAN, message, job.generation)
    out.event(c.RELEASED_BY_PLAN, message)


def _admit(out: Actions, job: GPUJob, conds: list[dict[str, Any]], latest: dict[int, PodView],
           fit: Callable[[], Fit]) -> bool:
    """Lift the gate of every pod at once when minAvailable replicas fit; else say why not."""
    if len(latest) < job.replicas or any(p.deleting for p in latest.values()):
        return False  # pods being created or going this round; decide on the next one
    result = fit()
    # Schedulable says why in a constant reason; Admitted's change carries the same text as an Event
    c.set_condition(conds, c.SCHEDULABLE, result.fits, result.why, result.message, job.generation)
    if not result.fits:
        never = result.why == c.NEVER_FITS
        reason = c.NEVER_FITS if never else c.WAITING_FOR_CAPACITY
        said = (c.find(conds, c.ADMITTED) or {}).get("message")
        changed = c.set_condition(conds, c.ADMITTED, False, reason, result.message, job.generation)
        # a never-fit message changes only with the nodes: each new one is news (free room is not)
        if changed or (never and said != result.message[:c.MAX_MESSAGE]):
            out.event(reason, result.message, warning=never)
        return False
    out.ungate = [p.name for p in latest.values() if p.gated and p.phase not in DONE]
    out.nodes = result.nodes if result.nodes and set(result.nodes) >= set(out.ungate) else {}
    out.pin = None if out.nodes else result.domain
    message = f"released the gang: {result.message}"
    if out.nodes:
        message += f"; its pods go to {on_nodes(out.nodes)}, chosen together"
    elif result.domain:
        message += f"; its pods keep to {result.domain[0]}={result.domain[1]}"
    c.set_condition(conds, c.ADMITTED, True, c.GANG_RELEASED, message, job.generation)
    out.event(c.GANG_RELEASED, message)
    return True


def _phase(out: Actions, job: GPUJob, new: dict[str, Any], latest: dict[int, PodView], admitted: bool,
           now: datetime) -> None:
    conds = new["conditions"]
    running = sum(p.phase == PodPhase.RUNNING for p in latest.values())
    done = sum(p.phase == PodPhase.SUCCEEDED for p in latest.values())
    backoff = new.get(BACKOFF)
    if backoff and backoff.get("permanent"):  # refused until the spec or the cluster changes
        phase, reason = Phase.BLOCKED, c.PODS_REFUSED
    elif not admitted:
        never = (c.find(conds, c.SCHEDULABLE) or {}).get("reason") == c.NEVER_FITS
        phase, reason = (Phase.BLOCKED, c.NEVER_FITS) if never else (Phase.PENDING, c.WAITING_FOR_CAPACITY)
    elif running and running + done >= job.min_available:
        phase, reason = Phase.RUNNING, c.PODS_RUNNING
    else:
        phase, reason = Phase.SCHEDULING, c.WAITING_FOR_PODS
    ready = phase == Phase.RUNNING
    message = (f"{running} of {job.replicas} replicas running" + (f", {done} succeeded" if done else "")
               + f" (minAvailable {job.min_available})")
    if backoff:  # the pods cannot be created: the condition says why until they can
        reason = new.get("reason") or reason
    else:
        c.set_condition(conds, c.PODS_READY, ready, reason, message, job.generation)
    if phase == Phase.BLOCKED:  # its Warning said why when it was refused; nothing to predict
        _forget(new, PREDICTED_START, PREDICTED_AFTER, PREDICTED_FINISH)
    elif phase != new.get("phase"):
        out.event(phase, f"GPUJob is {phase}: {message}" if admitted else f"GPUJob is {phase}: "
                  f"{_waiting_reason(new)}")
    if ready and not new.get("startTime"):  # the gang runs once its last needed replica started
        starts = sorted(p.started for p in latest.values() if p.started and p.phase == PodPhase.RUNNING)
        new["startTime"] = starts[job.min_available - 1] if len(starts) >= job.min_available else rfc3339(now)
    if phase == Phase.BLOCKED:  # no start to predict, nor a finish
        new[BLOCKED_SINCE] = new.get(BLOCKED_SINCE) or rfc3339(now)
        _forget(new, PREDICTED_START, PREDICTED_AFTER, PREDICTED_FINISH)
    else:
        _forget(new, BLOCKED_SINCE)
    if phase != Phase.PENDING:
        _forget(new, PREDICTED_START, PREDICTED_AFTER)  # no longer waiting for room: no start to predict
    new.update(phase=phase, reason=reason)


def _forget(status: dict[str, Any], *fields: str) -> None:
    """Delete the fields that are set (a merge patch deletes a None); a status without them stays as is."""
    for name in fields:
        if status.get(name) is not None:
            status[name] = None


def _summary(new: dict[str, Any], job: GPUJob, latest: dict[int, PodView],
             node_labels: dict[str, dict[str, str]], topology: Topology) -> dict[str, Any]:
    running = sum(p.phase == PodPhase.RUNNING for p in latest.values())
    new["replicasRunning"] = running
    new["replicasSucceeded"] = sum(p.phase == PodPhase.SUCCEEDED for p in latest.values())
    new["ready"] = f"{running}/{job.replicas}"
    placements = []
    for i, p in sorted(latest.items()):
        if p.node:
            labels = node_labels.get(p.node, {})
            domains = {lv.name: labels[lv.label] for lv in topology.levels if labels.get(lv.label)}
            placements.append({"replica": i, "pod": p.name, "node": p.node,
                               "zone": labels.get(ZONE_LABEL, ""), "rack": labels.get(RACK_LABEL, ""),
                               "domains": domains})
    if placements or "placements" not in new or new.get("phase") not in TERMINAL:
        # a finished job keeps its last known placement once its pods are gone; an unfinished one shows
        # where its pods are now (none, once a plan evicted them)
        new["placements"] = placements
    return new


def _waiting_reason(status: dict[str, Any]) -> str:
    cond = c.find(status.get("conditions") or [], c.ADMITTED)
    if cond and cond.get("status") == "False":
        message: str = cond["message"]
        return message
    return "waiting for its pods to run" if cond else "creating its pods, then checking that the gang fits"


def _last_failure(latest: dict[int, PodView]) -> str:
    failed = [p for p in latest.values() if p.phase == PodPhase.FAILED]
    return f"{failed[-1].name}: {failed[-1].message or 'no message'}" if failed else "unknown"


def _time(value: str | None) -> datetime | None:
    return parse_rfc3339(value) if value else None
