"""`netsched whatif -f job.yaml`: what would happen to a GPUJob if it were submitted now, creating nothing.

For a GPUJob the API server accepted (netsched.foresight.admission asks it first), reads the live
cluster once (nodes, pods, PodDisruptionBudgets, PriorityClasses, GPUJobs, batch Jobs) and answers
with the operator's own rules, so the answer is what the operator would do:
- no answer, but the problems the operator would report (netsched.jobs.validation) before any pod is
  made, as WhatIfError;
- does the gang fit now (capacity.gang_fit: the Schedulable reason and message a waiting job shows,
  NeverFits with the operator's words when it could never fit the cluster as it is), where it would
  go (capacity.placement) and the room per rack or zone;
- how long it runs and when it would start and finish (netsched.jobs.forecast, with this job
  added to the queue at its priority, beside the cluster's pod gangs as the operator's forecast plays
  them), and which running jobs it waits for;
- what the packer would do now (Packer.decide on the cluster with this gang waiting): the pods it
  would evict or move, or why it would not.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubernetes import client

from netsched.api import conditions as c
from netsched.api.connect import listed, listed_together
from netsched.api.dra import DraGpus
from netsched.api.events import now_rfc3339, parse_rfc3339, rfc3339
from netsched.api.gpujob import (
    GROUP,
    KIND,
    PLURAL,
    PREDICTED_FINISH_RANGE,
    PREDICTED_START_RANGE,
    TERMINAL,
    VERSION,
)
from netsched.api.labels import RACK_LABEL, ZONE_LABEL
from netsched.api.pods import DONE
from netsched.api.resources import Resources, pod_requests
from netsched.api.topology import DEFAULT, Topology
from netsched.jobs.capacity import (
    NodeRoom,
    domain_room,
    gang_fit,
    member_room,
    node_room,
    placement,
    with_dra_gpus,
)
from netsched.jobs.forecast import bound_usage, cluster_forecast
from netsched.jobs.gpujob import GPUJob
from netsched.jobs.live_gangs import LiveGang, live_gangs
from netsched.jobs.replica_pods import pod_annotations, replica_pod
from netsched.jobs.stale_pins import released_pin
from netsched.jobs.validation import problems
from netsched.jobs.workload import Workload
from netsched.packer.live_cluster import STATE
from netsched.records.reader import read_records
from netsched.records.writer import job_record

if TYPE_CHECKING:  # imported where an extender is asked: a whatif without one loads no operator code
    from netsched.operator.gang_placer import GangPlacer

WHATIF_UID = "whatif"  # the pretend job's uid: no real object has it
# instead of a predicted start, for a gang that never fits (whatif and why say the same)
NEVER_FITS = "Predicted start: none: it never fits the cluster as it is"
NEVER_STARTS = f"{NEVER_FITS}, so the operator holds it Blocked"  # a GPUJob's


class WhatIfError(ValueError):
    """No answer for this object: the API server or the operator would refuse it; the message names the
    field and the fix."""


@dataclass(frozen=True)
class Cluster:
    """One read of everything an answer needs."""
    nodes: list[dict]
    pods: list[dict]
    pdbs: list[dict]
    jobs: list[dict]
    priority_classes: list[dict]
    batch_jobs: list[dict] = field(default_factory=list)  # batch/v1 Jobs: the size of their pod gangs
    notes: tuple[str, ...] = ()  # what this read could not see, in words
    api: client.ApiClient | None = field(default=None, compare=False)  # read from: for a pod gang's size
    topology: Topology = DEFAULT  # the levels jobs name, as the operator is configured
    # the extender, asked where a gang's members would go as the release would ask it (a dry run)
    placer: GangPlacer | None = field(default=None, compare=False)
    # GPUs DRA drivers publish (netsched.api.dra), counted as the operator counts them
    dra: DraGpus = field(default_factory=lambda: DraGpus(()), compare=False)

    @classmethod
    def read(cls, api: client.ApiClient, topology: Topology = DEFAULT, dra_gpu_drivers: tuple[str, ...] = (),
             ) -> Cluster:
        """`dra_gpu_drivers`: whose devices count as GPUs (netsched.api.dra), as the operator counts them."""
        nodes, pods, pdbs, jobs, classes = listed_together(
            api, [*STATE, f"/apis/{GROUP}/{VERSION}/{PLURAL}", "/apis/scheduling.k8s.io/v1/priorityclasses"])
        dra, notes = DraGpus.read(api, dra_gpu_drivers)
        try:
            batch_jobs = listed(api, "/apis/batch/v1/jobs")
        except client.ApiException as exc:
            if exc.status != 403:
                raise
            # the answer is still worth having: only the end of running Job gangs is unknown
            batch_jobs, notes = [], (*notes, UNLISTED_JOBS)
        return cls(nodes, pods, pdbs, jobs, classes, batch_jobs, notes, api, topology, dra=dra)

    @cached_property
    def rooms(self) -> list[NodeRoom]:
        """Each node's room (capacity.node_room), worked out once per read: every part of an answer
        needs it, and at 1,000 nodes each pass costs a tenth of a second."""
        return [with_dra_gpus(node_room(n), self.dra) for n in self.nodes]

    @cached_property
    def gpu_nodes(self) -> list[dict]:
        """The nodes as a device plugin would show their DRA GPUs (netsched.api.dra), for the packer."""
        return self.dra.nodes_folded(self.nodes) if self.dra.drivers else self.nodes

    @cached_property
    def used(self) -> dict[str, Resources]:
        """What the bound, unfinished pods take on each node, and the released pods on their way to the node
        their gang's placement pinned them to, worked out once per read."""
        return bound_usage(self.pods, pinned=True)

    def pod_gangs(self) -> list[LiveGang]:
        """The cluster's pod gangs as the operator's forecast plays them (netsched.jobs.live_gangs)."""
        named = {(j["metadata"]["namespace"], j["metadata"]["name"]): j for j in self.batch_jobs}
        return list(live_gangs(self.pods, named).values())


UNLISTED_JOBS = ("you may not list batch Jobs (jobs.batch, all namespaces), so the pods of Job gangs are "
                 "taken to hold their room with no predicted end; ask for that permission for a forecast "
                 "with them")


def as_submitted(body: dict, namespace: str) -> dict:
    """A manifest with what the API server would add on creation: a namespace (unless it has
    one), a uid no real object has, a generation and a creation time."""
    own = body.get("metadata")  # a map once the API server took it; an unchecked JobSet's may be anything
    meta = {"namespace": namespace, **(own if isinstance(own, dict) else {}), "uid": WHATIF_UID,
            "generation": 1, "creationTimestamp": now_rfc3339()}
    return {**body, "metadata": meta}


def history(cluster: Cluster, records: Path | None) -> list[dict]:
    """Finished jobs to learn run times from: the operator's records file if given, and the finished
    GPUJobs still in the cluster (a record is kept once, by uid)."""
    rows = {r["uid"]: r for _, r in read_records(records) if "uid" in r} if records else {}
    labels = {r.name: r.labels for r in cluster.rooms}
    for body in cluster.jobs:
        status = body.get("status") or {}
        if status.get("phase") in TERMINAL and body["metadata"]["uid"] not in rows:
            rows[body["metadata"]["uid"]] = job_record(GPUJob.of(body), status, labels, cluster.topology)
    return list(rows.values())


def what_if(cluster: Cluster, manifest: dict, past: list[dict], now: datetime | None = None,
            budget: float = 1.0) -> dict[str, Any]:
    """The answer for a GPUJob the API server accepted (`manifest`, as `as_submitted` makes it), as plain
    data (`render` prints it for people); WhatIfError with the problems the operator would report."""
    check(cluster, manifest)
    now = now or datetime.now(UTC)
    job = GPUJob.of(manifest)
    rooms, used = cluster.rooms, cluster.used
    priority = priority_of(job, cluster.priority_classes)
    answer: dict[str, Any] = {
        "job": f"{job.namespace}/{job.name}", "replicas": job.replicas,
        "gpusPerReplica": job.gpus_per_replica, "priority": priority}
    pods = [_pretend(p, priority) for p in (replica_pod(job, i, 0, gated=True) for i in range(job.replicas))]
    levels = cluster.topology
    fit = gang_fit(rooms, used, pending_requests(cluster.pods), job, levels)
    answer["schedulable"] = {"fits": fit.fits, "reason": fit.why, "message": fit.message}
    where = joint_placement(cluster, job, job.namespace, job.name, pods) if fit.fits else None
    answer["placedBy"] = "extender" if where else "estimate"
    where = where or placement(rooms, used, job, levels)
    answer["placement"] = placement_rows(where, rooms, levels) if fit.fits and where else []
    answer["domains"] = room_table(job, rooms, used, job.needs.max_peer_distance, levels)
    body = copy.deepcopy(manifest) | {"status": {"phase": "Pending"}}
    forecasts = cluster_forecast(now, rooms, [*cluster.pods, *pods], [*cluster.jobs, body], past,
                                 cluster.pod_gangs(), topology=levels)
    forecast = forecasts[answer["job"]]
    answer["estimate"] = {"seconds": forecast.estimate.seconds, "basis": forecast.estimate.basis}
    answer["predictedStartTime"] = time_text(now if fit.fits else forecast.start)
    answer["predictedCompletionTime"] = time_text(forecast.finish)
    answer |= range_texts(None if fit.fits else forecast.start_range, forecast.finish_range)
    answer["waitsFor"] = list(forecast.after) if not fit.fits else []
    answer["ahead"] = _ahead(cluster, priority)
    # no plan can place a gang that never fits: the packer's dry run would only take its budget
    answer["packer"] = {} if fit.fits or fit.why == c.NEVER_FITS else _packer(cluster, pods, budget)
    answer["notes"] = [*cluster.notes, *placer_notes(cluster)]
    return answer


def joint_placement(cluster: Cluster, gang: Workload, namespace: str, name: str,
                    pods: list[dict]) -> dict[str, int] | None:
    """Members per node as the extender would place the gang now (netsched.extender.gang, the call the
    operator makes as it releases it, here a dry run); None without an extender to ask or an answer."""
    if cluster.placer is None:
        return None
    room = member_room(cluster.rooms, cluster.used, pending_requests(cluster.pods), gang, cluster.topology)
    named = [{**p, "metadata": {**p["metadata"], "namespace": namespace}} for p in pods]
    nodes = cluster.placer.nodes(namespace, name, named, room, dry_run=True)
    if not nodes:
        return None  # the placer's `failure` says why, in the answer's notes
    counts: dict[str, int] = {}
    for node in nodes.values():
        counts[node] = counts.get(node, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def placer_notes(cluster: Cluster) -> list[str]:
    """Why "Would run on" is an estimate although an extender was named."""
    failure = cluster.placer.failure if cluster.placer else None
    return [f"{failure}; where it would run is estimated from free room"] if failure else []


def placed_by(answer: dict[str, Any]) -> str:
    """Whose choice a "Would run on" line is."""
    if answer.get("placedBy") == "extender":
        return " (the extender's choice for the whole gang: its pods are pinned there as it is released)"
    return ""


def check(cluster: Cluster, manifest: dict) -> None:
    """WhatIfError with the problems the operator would report for the GPUJob `manifest` (as
    `as_submitted` makes it) before it makes any pod."""
    job = GPUJob.of(manifest)
    found = problems(job, pod_annotations(job), cluster.rooms, topology=cluster.topology)
    found += missing_priority_class(job, cluster.priority_classes)
    if found:
        raise WhatIfError("; ".join(found))


def room_table(job: Workload, rooms: list[NodeRoom], used: dict[str, Resources], level: str | None,
               topology: Topology = DEFAULT, rows: int = 5) -> list[dict[str, Any]]:
    """The `rows` roomiest domains of `level` (node or a level of `topology`; None, or one it lacks: its
    narrowest) for `job` now (`used`: what bound pods take on each node): free GPUs and replicas that fit."""
    level = level if level in topology.limits else topology.names[-1]
    table = domain_room(rooms, used, job, level, topology)
    return [{"level": level, "name": name, "freeGPUs": gpus, "replicasFit": fits}
            for name, gpus, fits in table[:rows]]


def start_loading_packer() -> None:
    """Import the packer's dry run on a thread of its own, to overlap the waits for the API server that
    come before it (its CP-SAT solver imports pandas: half a second, seconds on a busy machine). Whether
    a job needs the dry run is known only once the cluster is read; one that fits now costs the import's
    CPU time, which mostly runs while the process waits for the cluster's lists."""
    def load() -> None:
        with contextlib.suppress(Exception):  # the dry run's own import says what is wrong
            importlib.import_module("netsched.packer.controller")

    threading.Thread(target=load, name="load-packer", daemon=True).start()


def _packer(cluster: Cluster, pods: list[dict], budget: float) -> dict[str, Any]:
    """What a packing pass would do now with this gang waiting, writing nothing."""
    # imported here (and ahead, by start_loading_packer): the CP-SAT solver takes seconds to import on a
    # busy machine, and a job that fits now does not need it
    from netsched.packer.config import PackerConfig
    from netsched.packer.controller import Packer, blocked_message
    from netsched.packing.report import plan_json

    packer = Packer(cluster.api or client.ApiClient(), PackerConfig(budget=budget), topology=cluster.topology)
    problem, policy = packer.problem(cluster.gpu_nodes, [*cluster.pods, *pods], cluster.pdbs)
    decision = packer.decide(problem, policy, [*cluster.pods, *pods], cluster.pdbs)
    if not decision.disrupts:
        why = (blocked_message(decision.blocked) if decision.blocked else
               "evicting or moving lower-priority pods would not place more")
        return {"wouldPlan": False, "why": why}
    doc = plan_json(decision.problem, decision.plan)
    return {"wouldPlan": True, "evictions": doc["evictions"], "moves": doc["moves"],
            "placements": doc["placements"], "policy": "priced" if policy.priced else "strict"}


def missing_priority_class(job: Workload, classes: list[dict]) -> list[str]:
    """The API server refuses a pod naming a PriorityClass that does not exist (the operator would
    say PodsRefused): said here before anything else, as the operator's own checks are."""
    name = job.priority_class_name
    if not name or any(pc["metadata"]["name"] == name for pc in classes):
        return []
    known = ", ".join(sorted(pc["metadata"]["name"] for pc in classes)) or "none"
    return [f"spec.priorityClassName {name!r}: no such PriorityClass, so the API server would refuse its "
            f"pods; create it or name one that exists ({known})"]


def priority_of(job: Workload, classes: list[dict]) -> int:
    name = job.priority_class_name
    for pc in classes:
        if (name and pc["metadata"]["name"] == name) or (not name and pc.get("globalDefault")):
            return int(pc.get("value") or 0)
    return 0


def _pretend(pod: dict, priority: int) -> dict:
    """A pod of the pretend job as the API server would hold it: gated, Pending, its priority resolved."""
    pod["spec"]["priority"] = priority
    pod["status"] = {"phase": "Pending"}
    pod["metadata"]["uid"] = f"{WHATIF_UID}-{pod['metadata']['name']}"
    return pod


def pending_requests(pods: list[dict]) -> list[Resources]:
    """Requests of released pods not bound yet and pinned nowhere: they take room first, as gang
    admission counts (a pinned one counts on its node, in `Cluster.used`)."""
    return [pod_requests(p["spec"]) for p in pods
            if not (p.get("spec") or {}).get("nodeName") and not p["spec"].get("schedulingGates")
            and (p.get("status") or {}).get("phase", "Pending") == "Pending" and released_pin(p) is None]


def placement_rows(where: dict[str, int], rooms: list[NodeRoom], topology: Topology = DEFAULT
                   ) -> list[dict[str, Any]]:
    """Members per node, with the node's domain at each level of `topology` (level -> label value, ""
    where it has none). rack and zone: netsched's own labels, as before levels were configurable."""
    labels = {r.name: r.labels for r in rooms}
    return [{"node": n, "replicas": k, "rack": labels[n].get(RACK_LABEL, ""),
             "zone": labels[n].get(ZONE_LABEL, ""),
             "domains": {lv.name: labels[n].get(lv.label, "") for lv in topology.levels}}
            for n, k in where.items()]


def _ahead(cluster: Cluster, priority: int) -> list[dict[str, Any]]:
    """Waiting GPUJobs the operator would serve first: higher priority (older at equal priority)."""
    waiting: dict[str, int] = {}
    for p in cluster.pods:
        spec = p.get("spec") or {}
        owner = next((o["name"] for o in p["metadata"].get("ownerReferences") or () if o.get("kind") == KIND),
                     None)
        if owner and not spec.get("nodeName") and (p.get("status") or {}).get("phase") not in DONE:
            key = f"{p['metadata']['namespace']}/{owner}"
            waiting[key] = max(waiting.get(key, 0), int(spec.get("priority") or 0))
    return [{"job": k, "priority": v} for k, v in sorted(waiting.items(), key=lambda kv: (-kv[1], kv[0]))
            if v >= priority]


def time_text(when: datetime | None) -> str | None:
    return rfc3339(when) if when else None


def range_texts(start: tuple[datetime, datetime] | None, finish: tuple[datetime, datetime] | None
                ) -> dict[str, str | None]:
    """The P10 and P90 of a predicted start and completion, by their status fields' names."""
    out: dict[str, str | None] = {}
    for names, interval in ((PREDICTED_START_RANGE, start), (PREDICTED_FINISH_RANGE, finish)):
        out.update(zip(names, (time_text(t) for t in interval or (None, None)), strict=True))
    return out


def between(times: dict[str, Any], names: tuple[str, str], now: datetime) -> str:
    """" (80% between 14:20:07Z and 14:51:40Z)" from the P10 and P90 in `times` under `names` (the date
    too where it is not `now`'s), or nothing without them."""
    low, high = (times.get(n) for n in names)
    if not low or not high:
        return ""
    today = now.date()
    shown = [t if parse_rfc3339(t).date() != today else t.split("T", 1)[1] for t in (low, high)]
    return f" (80% between {shown[0]} and {shown[1]})"


def render(answer: dict[str, Any], now: datetime | None = None) -> str:
    """The answer as people read it."""
    now = now or datetime.now(UTC)
    gpus = answer["replicas"] * answer["gpusPerReplica"]
    lines = [f"GPUJob {answer['job']}: {answer['replicas']} replica(s) × {answer['gpusPerReplica']} GPU(s) "
             f"= {gpus} GPUs, priority {answer['priority']}"]
    lines += [f"Note: {n}" for n in answer.get("notes", ())]
    s = answer["schedulable"]
    lines.append(f"Fits now: {'yes' if s['fits'] else 'no'} ({s['reason']}): {s['message']}")
    if answer["placement"]:
        lines.append("Would run on: " + placement_text(answer["placement"]) + placed_by(answer))
    lines += room_lines(answer["domains"], "replicas of this job")
    lines += forecast_lines(answer, NEVER_STARTS, now)
    if answer["ahead"]:
        lines.append("Served before it: " + ", ".join(f"{a['job']} (priority {a['priority']})"
                                                       for a in answer["ahead"]))
    pk = answer["packer"]
    if pk.get("wouldPlan"):
        lines.append(f"The packer ({pk['policy']}) would make room now with a PackingPlan:")
        lines += [f"  evict {e['pod']} from {e['from']}" for e in pk["evictions"]]
        lines += [f"  move  {m['pod']}: {m['from']} -> {m['to']}" for m in pk["moves"]]
        lines += [f"  place {p['pod']} on {p['node']}" for p in pk["placements"]]
    elif pk:
        lines.append(f"The packer would not make room now: {pk['why']}")
    return "\n".join(lines + ["Nothing was created."])


def forecast_lines(answer: dict[str, Any], never: str, now: datetime) -> list[str]:
    """How long it runs and when it starts and completes, from an answer's (or a gang's entry's)
    `schedulable`, `estimate`, `predictedStartTime`, `predictedCompletionTime` and `waitsFor`; `never`:
    the start line of one that never fits."""
    s, est = answer["schedulable"], answer["estimate"]
    lines = [f"Run time: {_duration(est['seconds'])} ({est['basis']})" if est["seconds"] is not None
             else f"Run time: unknown ({est['basis']})"]
    start, finish = answer["predictedStartTime"], answer["predictedCompletionTime"]
    if start:
        lines.append(f"Predicted start: {start} ({from_now(start, now)})"
                     f"{between(answer, PREDICTED_START_RANGE, now)}" + (
            f", when {', '.join(answer['waitsFor'])} is predicted to finish" if answer["waitsFor"] else ""))
    elif s["reason"] == c.NEVER_FITS:
        lines.append(never)
    elif not s["fits"]:
        lines.append("Predicted start: unknown (the room it needs is held by pods with no predicted end)")
    if finish:
        lines.append(f"Predicted completion: {finish} ({from_now(finish, now)})"
                     f"{between(answer, PREDICTED_FINISH_RANGE, now)}")
    return lines


def placement_text(rows: list[dict[str, Any]]) -> str:
    """Where a gang would go (`placement_rows`), in one line."""
    return ", ".join(f"{p['node']} ×{p['replicas']} ({', '.join(_narrowest_first(p))})" for p in rows)


def _narrowest_first(row: dict[str, Any]) -> list[str]:
    """A placement row's domains, narrowest level first, "-" where the node has none (rows made before
    `domains` have rack and zone)."""
    domains = row.get("domains") or {"zone": row.get("zone"), "rack": row.get("rack")}
    return [value or "-" for value in reversed(domains.values())]


def room_lines(domains: list[dict[str, Any]], members: str, now: str = "") -> list[str]:
    """The room table (`room_table`) as people read it; `members`: what the last column counts."""
    if not domains:
        return []
    return [f"Room per {domains[0]['level']}{now} (free GPUs, {members} that fit):",
            *(f"  {d['name']:<24} {d['freeGPUs']:>6g} {d['replicasFit']:>4}" for d in domains)]


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 else \
        f"{seconds / 3600:.1f} h"


def from_now(text: str, now: datetime) -> str:
    delta = (parse_rfc3339(text) - now).total_seconds()
    return "now" if abs(delta) < 1 else f"in {_duration(delta)}" if delta > 0 else f"{_duration(-delta)} ago"


