"""PackingPlans: building one from a solved problem, and the pure step that carries it out.

A plan moves through
  Pending   made, nothing done yet: checked against the cluster as it is now, and against
            every PodDisruptionBudget, before anything is evicted;
  Evicting  its victims are evicted (the operator posts Evictions) until all are gone;
  Placing   the gangs it places are released; it waits until every planned pod is bound
            where the plan put it (the extender's filter pins them and reserves the room);
and ends Succeeded, or Failed (a budget forbids an eviction, a pod landed elsewhere),
TimedOut (past spec.deadlineSeconds) or Abandoned (the cluster changed before it started, or
a pod it makes room for was deleted):
which one is decided by the type of the error that ended it (netsched.api.errors). Its
Progressing condition follows the steps; Succeeded or Failed says how it ended. Ending
releases the pins and reservations. Evictions are not undone (the evicted pods'
controllers recreate them), so "rolled back" means the cluster is left to the normal
scheduler again with nothing held for the plan.

Every step is decided from the plan and the pods as they are now, so an operator that
restarts mid-plan takes it up where it stands.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from netsched.api import conditions as c
from netsched.api import plans
from netsched.api.errors import (
    ClusterChanged,
    DeadlineExceeded,
    DisruptionBudgetExceeded,
    Misplaced,
    NetschedError,
    PlacedPodsGone,
    TemporaryError,
)
from netsched.api.events import parse_rfc3339, rfc3339
from netsched.api.gpujob import KIND as GPUJOB
from netsched.api.labels import GPU_RESOURCE, JOB_LABEL
from netsched.api.objects import KubeObject
from netsched.api.plans import Eviction, Phase
from netsched.jobs.pod_gangs import gang_of, involved
from netsched.jobs.replica_pods import GANG_GATE
from netsched.packer.live_cluster import selects
from netsched.packing.problem import Problem
from netsched.packing.report import tier_gains
from netsched.packing.solver import Plan


@dataclass(frozen=True)
class LivePod:
    """What a step needs to know of a pod as it is now."""
    key: str  # namespace/name
    uid: str
    node: str | None
    gated: bool  # held behind the gang gate
    owner: str | None  # controller uid
    created: datetime
    deleting: bool
    labels: dict[str, str]

    @classmethod
    def of(cls, pod: KubeObject) -> LivePod:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        owner = next((o.get("uid") for o in meta.get("ownerReferences") or () if o.get("controller")), None)
        return cls(f"{meta['namespace']}/{meta['name']}", meta.get("uid", ""), spec.get("nodeName"),
                   any(g.get("name") == GANG_GATE for g in spec.get("schedulingGates") or ()), owner,
                   parse_rfc3339(meta["creationTimestamp"]), bool(meta.get("deletionTimestamp")),
                   dict(meta.get("labels") or {}))


@dataclass
class Step:
    status: dict[str, Any]
    generation: int | None = None  # the plan's metadata.generation, for its conditions
    evict: list[str] = field(default_factory=list)  # namespace/name of pods to evict now
    ungate: list[str] = field(default_factory=list)  # namespace/name of planned pods to release
    # namespace/name of a moved pod's gated replacement -> the node the move goes to: released there
    moved: dict[str, str] = field(default_factory=dict)
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)


# ---- building ------------------------------------------------------------------------
def plan_body(problem: Problem, plan: Plan, raw_pods: list[KubeObject], reason: str, budget: float,
              deadline: int) -> dict[str, Any]:
    """The PackingPlan object for a solver's answer."""
    by_key = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": LivePod.of(p) for p in raw_pods}
    info = {p.name: p for p in problem.pods}
    changes = plan.changes(problem)

    def entry(key: str, node: str) -> dict[str, Any]:
        return {"pod": key, "uid": by_key[key].uid, "node": node, "priority": info[key].priority,
                "gpus": info[key].requests.get(GPU_RESOURCE, 0)}

    def victim(key: str, node: str) -> dict[str, Any]:  # its controller: what recreates it, and is spared
        owner = by_key[key].owner
        return {**entry(key, node), "owner": owner} if owner else entry(key, node)

    moves = [{**entry(k, a), "to": b, "owner": by_key[k].owner} for k, a, b in changes["moves"]]
    spec = {
        "reason": reason, "deadlineSeconds": deadline,
        "counts": {"evictions": len(changes["evictions"]), "moves": len(moves),
                   "placements": len(changes["placements"])},
        "solver": {"source": plan.source, "provenOptimal": plan.proven_optimal,
                   "seconds": round(plan.seconds, 3), "budgetSeconds": budget,
                   "tiers": [{"priority": t["priority_at_least"], "placedBefore": t["placed_before"],
                              "placedAfter": t["placed_after"], "disruption": t["disruption"]}
                             for t in tier_gains(problem, plan)]},
        "evictions": [victim(k, n) for k, n in changes["evictions"]],
        "moves": moves,
        "placements": [entry(k, n) for k, n in changes["placements"]],
    }
    return {"apiVersion": f"{plans.GROUP}/{plans.VERSION}", "kind": plans.KIND,
            "metadata": {"generateName": "pack-"}, "spec": spec}


# ---- carrying out -----------------------------------------------------------------------
def advance(plan: KubeObject, pods: dict[str, LivePod], pdbs: list[KubeObject], now: datetime) -> Step:
    """The next step of `plan` given the pods (by namespace/name) and PodDisruptionBudgets now."""
    status = copy.deepcopy(plan.get("status") or {})
    step = Step(status, plan["metadata"].get("generation"))
    phase = plans.phase(plan)
    if phase in plans.TERMINAL:
        return step
    spec = plan["spec"]
    victims = list(spec.get("evictions") or ()) + list(spec.get("moves") or ())
    created = parse_rfc3339(plan["metadata"]["creationTimestamp"])
    if (now - created).total_seconds() > spec.get("deadlineSeconds", 120):
        waiting = [a.key for a in plans.outstanding(plan)]
        return fail(step, now, DeadlineExceeded(
            f"not done after {spec.get('deadlineSeconds', 120)} s (phase {phase}; still waiting for "
            f"{', '.join(waiting) or 'evictions'}); pins and reservations released"))
    if phase == Phase.PENDING:
        problem = _changed(spec, victims, pods) or _over_budget(victims, pods, pdbs)
        if problem:
            return fail(step, now, problem)
    elif gone := _placed_gone(plan, pods):
        return fail(step, now, gone)
    if phase == Phase.PENDING:
        status.update(phase=Phase.EVICTING, startTime=rfc3339(now), reason=Phase.EVICTING,
                      message=f"evicting {len(victims)} pod(s)")
        _progress(step, c.STARTED, f"carrying out: evict {len(victims)} pod(s), then place "
                                   f"{len(plans.arrivals(plan))}")
    if status["phase"] == Phase.EVICTING:
        left = [v for v in victims if v["pod"] in pods and pods[v["pod"]].uid == v["uid"]]
        if left:
            step.evict = [v["pod"] for v in left if not pods[v["pod"]].deleting]
            status["evicted"] = sorted({*status.get("evicted", ()), *(v["pod"] for v in victims
                                                                      if v not in left)})
            return step
        status.update(phase=Phase.PLACING, reason=Phase.PLACING, evicted=sorted(v["pod"] for v in victims),
                      message="evictions done; waiting for the planned pods to be bound")
        _progress(step, c.EVICTED, f"{len(victims)} pod(s) evicted; placing")
    return _place(plan, step, pods, created, now)


def evictions(plan: KubeObject, raw_pods: dict[str, KubeObject], keys: list[str]) -> dict[tuple[str, str],
                                                                                       Eviction]:
    """What to tell each GPUJob (namespace, name) whose pods among `keys` the plan evicts: the plan,
    its pods, and the job the plan makes room for (its most important placement)."""
    victims: dict[tuple[str, str], list[str]] = {}
    for key in keys:
        job = _gpujob(raw_pods.get(key) or {})
        if job:
            namespace, name = key.split("/", 1)
            victims.setdefault((namespace, job), []).append(name)
    return {job: _eviction(plan, raw_pods, names) for job, names in victims.items()}


def gang_evictions(plan: KubeObject, raw_pods: dict[str, KubeObject], keys: list[str],
                   ) -> list[tuple[dict[str, Any], Eviction]]:
    """What to tell each pod gang's workload (the object its Events go to) whose pods among `keys` the
    plan evicts, as `evictions` tells a GPUJob."""
    victims: dict[tuple[str, str, str], tuple[dict[str, Any], list[str]]] = {}
    for key in keys:
        pod = raw_pods.get(key) or {}
        if gang_of(pod) is not None:
            workload = involved(pod)
            entry = victims.setdefault((workload["kind"], workload["namespace"], workload["name"]),
                                       (workload, []))
            entry[1].append(key.split("/", 1)[1])
    return [(workload, _eviction(plan, raw_pods, names)) for workload, names in victims.values()]


def _eviction(plan: KubeObject, raw_pods: dict[str, KubeObject], names: list[str]) -> Eviction:
    """The plan, the pods `names` it evicts, and what it makes room for (its most important placement)."""
    spec = plan.get("spec") or {}
    placed = max(spec.get("placements") or (), key=lambda p: p.get("priority") or 0, default=None)
    preemptor, priority_class, priority = f"the pods it places ({spec.get('reason', '')})", None, 0
    if placed is not None:
        priority = int(placed.get("priority") or 0)
        pod = raw_pods.get(placed["pod"]) or {}
        namespace = placed["pod"].split("/", 1)[0]
        job, gang = _gpujob(pod), gang_of(pod)
        preemptor = (f"GPUJob {namespace}/{job}" if job else f"{gang.kind} {namespace}/{gang.name}" if gang
                     else f"pod {placed['pod']}")
        priority_class = (pod.get("spec") or {}).get("priorityClassName")
    return Eviction(plan["metadata"]["name"], tuple(sorted(names)), preemptor, priority_class, priority)


def _gpujob(pod: KubeObject) -> str | None:
    """The GPUJob a pod is a replica of, if it is one."""
    meta = pod.get("metadata") or {}
    owner = next((o.get("name") for o in meta.get("ownerReferences") or ()
                  if o.get("kind") == GPUJOB and o.get("controller")), None)
    return owner if owner and (meta.get("labels") or {}).get(JOB_LABEL) == owner else None


def _place(plan: KubeObject, step: Step, pods: dict[str, LivePod], created: datetime, now: datetime) -> Step:
    spec, status = plan["spec"], step.status
    step.ungate = [p["pod"] for p in spec.get("placements") or ()
                   if p["pod"] in pods and pods[p["pod"]].gated]
    arrived, misplaced = [], []
    for p in spec.get("placements") or ():
        live = pods.get(p["pod"])
        if live and live.node == p["node"]:
            arrived.append(p["pod"])
        elif live and live.node:
            misplaced.append(f"{p['pod']} on {live.node} (planned {p['node']})")
    moves = spec.get("moves") or ()
    done = _moved(moves, pods, created)
    arrived += done
    step.moved = _replacements([m for m in moves if m["pod"] not in done], pods, created)
    status["arrived"] = sorted(arrived)
    if misplaced:
        return fail(step, now, Misplaced("bound elsewhere than planned: " + ", ".join(misplaced)))
    total = len(plans.arrivals(plan))
    if len(arrived) == total:
        return end(step, now, Phase.SUCCEEDED, c.ALL_PLACED,
                   f"all {total} planned pod(s) bound where planned")
    status["message"] = f"{len(arrived)} of {total} planned pod(s) bound where planned"
    return step


def _moved(moves: Iterable[dict[str, Any]], pods: dict[str, LivePod], created: datetime) -> list[str]:
    """Moves whose replacement (a pod of the same controller made since the plan) is bound
    on the planned node; each replacement counts for one move."""
    done, used = [], set()
    for m in moves:
        ns = m["pod"].split("/")[0]
        match = next((p for p in pods.values() if p.key not in used and p.owner == m["owner"]
                      and p.key.startswith(ns + "/") and p.node == m["to"] and p.created >= created
                      and p.uid != m["uid"]), None)
        if match:
            used.add(match.key)
            done.append(m["pod"])
    return done


def _replacements(moves: Iterable[dict[str, Any]], pods: dict[str, LivePod],
                  created: datetime) -> dict[str, str]:
    """The gated replacement of each move not yet done (a pod of the moved pod's controller made since the
    plan, held at the gang gate: a pod gang's member, whose gang controller leaves it to the plan), to the
    node the move goes to: the plan releases it there, or no one would and the move could never arrive."""
    out: dict[str, str] = {}
    for m in moves:
        ns = m["pod"].split("/")[0]
        match = next((p for p in sorted(pods.values(), key=lambda p: p.key) if p.key not in out
                      and p.owner == m["owner"] and p.key.startswith(ns + "/") and p.gated and not p.node
                      and not p.deleting and p.created >= created and p.uid != m["uid"]), None)
        if match:
            out[match.key] = m["to"]
    return out


def _placed_gone(plan: KubeObject, pods: dict[str, LivePod]) -> PlacedPodsGone | None:
    """Once evicting, a pod the plan still makes room for that was deleted (or replaced) ends it at
    once: holding its room until the deadline would keep every other pod off it for no one."""
    arrived = set((plan.get("status") or {}).get("arrived") or ())
    gone = [p["pod"] for p in plan["spec"].get("placements") or () if p["pod"] not in arrived
            and not _same(pods.get(p["pod"]), p)]
    if not gone:
        return None
    return PlacedPodsGone(f"pod(s) {', '.join(gone)} it makes room for were deleted; pins and reservations "
                          "released (pods already evicted are recreated by their controllers)")


def _same(live: LivePod | None, entry: dict[str, Any]) -> bool:
    """Is the pod a plan's entry names still there, the same pod (its uid), and not going?"""
    return live is not None and live.uid == entry.get("uid", live.uid) and not live.deleting


def spared(ended_plans: Iterable[KubeObject], raw_pods: Iterable[KubeObject]) -> set[str]:
    """The live pods (namespace/name) the packer must not disrupt again: the victims that a plan which
    ended unfinished evicted for pods that still wait unbound, as they are now (the same name, or a pod
    their controller made since the plan started evicting). Read from the plans themselves, so a
    restarted operator spares them too; it stops once the pods the plan was for are bound or gone."""
    live = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": LivePod.of(p) for p in raw_pods}
    owners: dict[str, datetime] = {}  # a victim's controller -> since when its new pods replace victims
    keys: set[str] = set()
    for plan in ended_plans:
        status, spec = plan.get("status") or {}, plan.get("spec") or {}
        if plans.phase(plan) not in plans.UNFINISHED or not status.get("startTime"):
            continue  # done, still going, or ended before it evicted anything
        victims = [*(spec.get("evictions") or ()), *(spec.get("moves") or ())]
        # an eviction accepted shortly before the plan ended may not be in its status yet
        evicted = set(status.get("evicted") or ()) | {v["pod"] for v in victims
                                                      if not _same(live.get(v["pod"]), v)}
        still_waiting = any(_same(w := live.get(p["pod"]), p) and w and not w.node
                            for p in spec.get("placements") or ())
        if not evicted or not still_waiting:
            continue
        started = parse_rfc3339(status["startTime"])
        for v in victims:
            if v["pod"] in evicted:
                keys.add(v["pod"])
                if v.get("owner"):
                    owners[v["owner"]] = min(started, owners.get(v["owner"], started))
    return {k for k, p in live.items()
            if k in keys or (p.owner in owners and p.created >= owners[p.owner])}


def _changed(spec: dict[str, Any], victims: list[dict[str, Any]],
             pods: dict[str, LivePod]) -> ClusterChanged | None:
    for v in victims:
        live = pods.get(v["pod"])
        if live is None or live.uid != v["uid"] or live.node != v["node"]:
            return ClusterChanged(f"pod {v['pod']} is no longer on {v['node']}; nothing was evicted")
    for p in spec.get("placements") or ():
        live = pods.get(p["pod"])
        if live is None or live.node:
            return ClusterChanged(f"pod {p['pod']} no longer waits for room; nothing was evicted")
    return None


@dataclass(frozen=True)
class OverBudget:
    budget: str  # namespace/name of the PodDisruptionBudget
    allowed: int  # its status.disruptionsAllowed
    hit: tuple[str, ...]  # the victims it covers (namespace/name), more than `allowed`


def over_budgets(victims: list[str], labels: dict[str, dict[str, str]],
                 pdbs: list[KubeObject]) -> list[OverBudget]:
    """Every PodDisruptionBudget that evicting `victims` (namespace/name, with their labels) would
    break; overlapping budgets each count every pod they cover."""
    out = []
    for b in pdbs:
        ns = b["metadata"]["namespace"]
        hit = tuple(v for v in victims if v.startswith(ns + "/")
                    and selects((b.get("spec") or {}).get("selector"), labels.get(v, {})))
        allowed = int((b.get("status") or {}).get("disruptionsAllowed") or 0)
        if len(hit) > allowed:
            out.append(OverBudget(f"{ns}/{b['metadata']['name']}", allowed, hit))
    return out


def _over_budget(victims: list[dict[str, Any]], pods: dict[str, LivePod],
                 pdbs: list[KubeObject]) -> DisruptionBudgetExceeded | None:
    keys = [v["pod"] for v in victims]
    for over in over_budgets(keys, {k: pods[k].labels for k in keys}, pdbs)[:1]:
        return DisruptionBudgetExceeded(
            f"PodDisruptionBudget {over.budget} allows {over.allowed} disruption(s) now, "
            f"the plan needs {len(over.hit)} ({', '.join(over.hit)}); nothing was evicted")
    return None


def _progress(step: Step, reason: str, message: str) -> None:
    if c.set_condition(step.status.setdefault("conditions", []), c.PROGRESSING, True, reason, message,
                       step.generation):
        step.events.append(("Normal", reason, message))


def fail(step: Step, now: datetime, error: NetschedError) -> Step:
    """End the plan on `error`: a temporary one (the cluster moved on before anything was
    evicted) abandons it, a missed deadline times it out, any other fails it."""
    if isinstance(error, TemporaryError):
        phase = Phase.ABANDONED
    elif isinstance(error, DeadlineExceeded):
        phase = Phase.TIMED_OUT
    else:
        phase = Phase.FAILED
    return end(step, now, phase, error.reason, error.message)


def end(step: Step, now: datetime, phase: Phase, reason: str, message: str) -> Step:
    step.status.update(phase=phase, reason=reason, message=message, completionTime=rfc3339(now))
    step.evict, step.ungate, step.moved = [], [], {}
    conds = step.status.setdefault("conditions", [])
    c.set_condition(conds, c.PROGRESSING, False, reason, message, step.generation)
    succeeded = phase == Phase.SUCCEEDED
    if c.set_condition(conds, c.SUCCEEDED if succeeded else c.FAILED, True, reason, message, step.generation):
        step.events.append(("Normal" if succeeded else "Warning", reason, message))
    return step
