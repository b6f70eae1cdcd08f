"""The packer controller: when netsched pods wait for room, solve and record a PackingPlan;
then carry the active plan out, one step per tick.

A netsched pod that turns Unschedulable, or a gang held at its gate, asks for a packing
pass `wait` seconds later (kopf event handlers, netsched.operator.packing.handlers; kopf timers
would put a finalizer on every such pod). While one waits, a change of a node's room (the
operator's ClusterIndex sees it) asks for a pass too. Of several operator replicas only the
leader packs and carries plans out. At most one solve runs at a time, at most one every `cooldown` seconds,
none while a plan is active, and none again for a cluster state that already gave nothing
to gain.

The disruption policy says which pods may be disrupted (the default: a job's pods only for
higher-priority waiting pods, stateless replicas for any; strict: only pods of lower priority
than the most important waiting pod), and a plan is written only when the solver finds one
that evicts or moves some of them to place more than free room allows; placements the
scheduler can make by itself need no plan.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from kubernetes import client

from netsched.api import conditions as c
from netsched.api import plans
from netsched.api.connect import api_message, items
from netsched.api.errors import EvictionRefused
from netsched.api.events import event
from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.api.labels import (
    EVICTED_BY,
    RELEASED_BY,
    ROOM_FREED_BY,
    SCHEDULER_NAME,
)
from netsched.api.objects import KubeObject
from netsched.api.plans import Eviction
from netsched.api.topology import DEFAULT, Topology
from netsched.jobs.hard_limits import pinned_to, requirement_patch
from netsched.jobs.replica_pods import annotate_patch, pinned_note, ungate_patch
from netsched.packer.config import PackerConfig
from netsched.packer.live_cluster import cluster_state, gang_sizes, problem_of, selects
from netsched.packer.metrics import PackerMetrics
from netsched.packer.plan_steps import (
    LivePod,
    OverBudget,
    Step,
    advance,
    evictions,
    fail,
    gang_evictions,
    over_budgets,
    plan_body,
    spared,
)
from netsched.packing.policy import DisruptionPolicy, Policy
from netsched.packing.problem import Pod, Problem
from netsched.packing.solver import Changes, Plan, solve

log = logging.getLogger(__name__)
COMPONENT = "netsched-packer"
BUDGET_ROUNDS = 3  # solves per pass that pin the pods of a budget the last plan would have broken
FAILED_PLAN_MAX_WAIT = 300.0  # seconds: the longest wait after plans that failed in a row


@dataclass(frozen=True)
class Decision:
    plan: Plan
    problem: Problem  # what the plan was solved over (pods a budget protects pinned)
    disrupts: bool  # False: evicting or moving lower-priority pods would place nothing more
    blocked: list[OverBudget]  # budgets that keep a disrupting plan from being made, or that it met


@dataclass
class Packer:
    api: client.ApiClient
    config: PackerConfig = PackerConfig()
    metrics: PackerMetrics = field(default_factory=PackerMetrics)
    scheduler: str = SCHEDULER_NAME
    disruption: DisruptionPolicy = DisruptionPolicy()
    topology: Topology = DEFAULT  # the levels gangs keep to
    leads: Callable[[], bool] = lambda: True  # whether this replica acts (netsched.operator.leadership)
    dra_gpu_drivers: tuple[str, ...] = ()  # whose devices count as GPUs (netsched.api.dra)
    _asking: threading.Lock = field(default_factory=threading.Lock)
    _next: float = 0.0  # no solve before this (monotonic seconds)
    _due: threading.Timer | None = None  # the packing pass already asked for
    _fruitless: int | None = None  # fingerprint of the last cluster state that gave nothing to gain
    _last_error: str | None = None  # the last pass's exception, logged with its traceback once
    _failed_plans: int = 0  # plans in a row that failed: each doubles the wait before the next pass
    _waited: float | None = None  # when a pod was last seen waiting; None: the last pass found none waiting
    blocked: dict[str, str] = field(default_factory=dict)  # waiting GPUJob (ns/name) -> budgets blocking it

    # made at first use: importing an API class of the client costs up to seconds, and a dry run (whatif)
    # that only solves needs none of them
    @cached_property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @cached_property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    @cached_property
    def policy(self) -> client.PolicyV1Api:
        return client.PolicyV1Api(self.api)

    # ---- planning ------------------------------------------------------------------
    def request(self, delay: float | None = None) -> None:
        """Ask for a packing pass in `delay` seconds (default `wait`), or when the cooldown ends.
        One timer at a time, and a pass runs on its timer's thread: passes never overlap."""
        if not self.config.enabled:
            return
        delay = self.config.wait if delay is None else delay
        with self._asking:
            if self._due is not None and self._due.is_alive():
                return  # a pass is coming (or running); it packs every pod waiting by then
            self._due = threading.Timer(max(delay, self._next - time.monotonic()), self._pass)
            self._due.daemon = True
            self._due.start()

    def _pass(self) -> None:
        """One packing pass on its timer's thread. Whatever it raises is counted and logged (with its
        traceback the first time that error is seen) and a later pass tries again: an exception that
        escaped would end the thread, and nothing would ask for a pass until a pod changed."""
        if not self.leads():
            return  # the leader packs; this replica asks again if it comes to lead
        self._next = time.monotonic() + self.config.cooldown
        try:
            self._pack()
        except client.ApiException as exc:
            self.metrics.api_errors.labels("pack").inc()
            log.warning("packer: %s; trying again in %g s", api_message(exc), self.config.cooldown)
        except Exception as exc:
            self.metrics.loop_errors.labels("packer").inc()
            said = f"{type(exc).__name__}: {exc}"
            if said != self._last_error:
                log.exception("packer: the packing pass failed; trying again in %g s", self.config.cooldown)
            else:
                log.warning("packer: the packing pass failed again: %s", said)
            self._last_error = said
        else:
            self._last_error = None
            return
        with self._asking:  # this thread is the due timer, which `request` would wait out: replace it
            self._due = threading.Timer(self.config.cooldown, self._pass)
            self._due.daemon = True
            self._due.start()

    def _pack(self) -> None:
        listed = self.custom.list_cluster_custom_object(plans.GROUP, plans.VERSION, plans.PLURAL)
        if any(plans.is_active(p) for p in listed["items"]):
            return  # one plan at a time
        read_at = time.monotonic()
        raw_nodes, raw_pods, pdbs = cluster_state(self.api, self.dra_gpu_drivers)
        problem, policy = self.problem(raw_nodes, raw_pods, pdbs)
        # never the same victims twice for pods that still wait: an unfinished plan's victims stay put
        problem = _pin(problem, spared(listed["items"], raw_pods))
        waiting = [p for p in problem.pods if not p.running]
        if not waiting and self._waited is not None and self._waited < read_at:
            self._waited = None  # node changes need no pass until a pod waits again
        fingerprint = hash((tuple(n.name for n in problem.nodes), problem.budgets,
                            tuple(sorted((p.name, p.node or "") for p in problem.pods))))
        if not waiting or fingerprint == self._fruitless:
            return
        decision = self.decide(problem, policy, raw_pods, pdbs)
        plan = decision.plan
        if not decision.disrupts:
            self._fruitless = fingerprint
            self.metrics.pack_solves.labels("no_gain").inc()
            self.blocked = _notes(waiting, decision.blocked)
            log.info("packer: %d pod(s) wait; evicting or moving lower-priority pods would not place more "
                     "(%s, %.2f s)%s", len(waiting), plan.source, plan.seconds,
                     f"; {blocked_message(decision.blocked)}" if decision.blocked else "")
            return
        self.blocked = {}
        body = plan_body(decision.problem, plan, raw_pods, _reason(waiting), self.config.budget,
                         self.config.deadline)
        created = self.custom.create_cluster_custom_object(plans.GROUP, plans.VERSION, plans.PLURAL, body)
        self.metrics.pack_solves.labels("plan").inc()
        counts = body["spec"]["counts"]
        self._event(created, c.PLANNED, f"{body['spec']['reason']}: evict {counts['evictions']}, move "
                                        f"{counts['moves']}, place {counts['placements']} "
                                        f"({plan.source}, {plan.seconds:.2f} s)")
        log.info("packer: created PackingPlan %s (%s)", created["metadata"]["name"], counts)

    def problem(self, raw_nodes: list[KubeObject], raw_pods: list[KubeObject],
                pdbs: list[KubeObject]) -> tuple[Problem, Policy]:
        """What the packer solves over, and the disruption policy for it."""
        sizes = gang_sizes(self.api, raw_pods, self.scheduler)
        problem = problem_of(raw_nodes, raw_pods, pdbs, self.scheduler, sizes, self.topology)
        policy = self.disruption.resolve(problem)
        if not policy.priced:  # strict never disturbs a pod for work of its own priority or below
            problem = only_lower_priority_moves(problem)
        return problem, policy

    def decide(self, problem: Problem, policy: Policy, raw_pods: list[KubeObject],
               pdbs: list[KubeObject]) -> Decision:
        """The plan the packer would make for `problem`, writing nothing: what a pass carries out and
        what `netsched whatif` shows."""
        labels = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["metadata"].get("labels") or {}
                  for p in raw_pods}
        plan, solved, blocked = self._solve_within_budgets(problem, labels, pdbs, policy)
        if _disrupts(plan, plan.changes(solved)):
            return Decision(plan, solved, True, blocked)
        return Decision(plan, solved, False, blocked or self._blocking_budgets(solved, labels, pdbs, policy))

    def _solve_within_budgets(self, problem: Problem, labels: dict[str, dict[str, str]],
                              pdbs: list[KubeObject], policy: Policy,
                              ) -> tuple[Plan, Problem, list[OverBudget]]:
        """Solve, and never return a plan that a PodDisruptionBudget refuses: the solver sees one
        budget per pod, so a plan that breaks another (overlapping budgets) pins that budget's pods
        and is solved again. Returns the plan, the problem it was solved over and the budgets met."""
        met: list[OverBudget] = []
        for _ in range(BUDGET_ROUNDS):
            plan = solve(problem, self.config.budget, policy=policy)
            self.metrics.pack_seconds.observe(plan.seconds)
            changes = plan.changes(problem)
            if not _disrupts(plan, changes):
                return plan, problem, met
            broken = over_budgets(_victims(changes), labels, pdbs)
            if not broken:
                return plan, problem, met
            met += broken
            problem = _pin(problem, _covered(problem, labels, [b.budget for b in broken], pdbs))
        return replace(plan, source="budgets"), problem, met  # still over a budget: no plan

    def _blocking_budgets(self, problem: Problem, labels: dict[str, dict[str, str]], pdbs: list[KubeObject],
                          policy: Policy) -> list[OverBudget]:
        """When nothing is to gain: would something be, without the budgets? Then they block it."""
        if not problem.budgets:
            return []
        unlimited = tuple(replace(b, allowed=len(problem.pods)) for b in problem.budgets)
        free = replace(problem, budgets=unlimited)
        plan = solve(free, self.config.budget, policy=policy)
        self.metrics.pack_seconds.observe(plan.seconds)
        changes = plan.changes(free)
        return over_budgets(_victims(changes), labels, pdbs) if _disrupts(plan, changes) else []

    def pod_waits(self) -> None:
        """A pod of this scheduler waits for room (kopf saw it)."""
        self._waited = time.monotonic()
        self.request()

    def room_changed(self) -> None:
        """A node was added, removed, resized, tainted or made (un)schedulable: look again, if a pod waits."""
        if self._waited is not None:
            self.request()

    # ---- carrying out ----------------------------------------------------------------
    def step(self, plan: KubeObject) -> Step:
        """One step of an active plan: read the pods, decide, act, write the status."""
        raw = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in self._pods(plan)}
        pods = {k: LivePod.of(p) for k, p in raw.items()}
        pdbs = self._pdbs() if plans.phase(plan) == plans.Phase.PENDING else []
        now = datetime.now(UTC)
        step = advance(plan, pods, pdbs, now)
        for (namespace, job), eviction in evictions(plan, raw, step.evict).items():
            self._tell_evicted(namespace, job, eviction)
        for workload, eviction in gang_evictions(plan, raw, step.evict):
            self._warn(workload, c.EVICTED_BY_PLAN, eviction.message)
        for key in step.evict:
            refused = self._evict(key)
            if refused:
                step = fail(step, now, EvictionRefused(
                    f"the API server refused to evict {key}: {refused}; no further pods are evicted"))
                break
            self.metrics.evictions.inc()
        planned = {p["pod"]: p["node"] for p in (plan.get("spec") or {}).get("placements") or ()}
        for key in step.ungate:
            self._ungate(raw[key], plan["metadata"]["name"], planned[key])
        for key, node in step.moved.items():  # a moved gang member's replacement, to the move's node
            self._ungate(raw[key], plan["metadata"]["name"], node)
        if step.status != (plan.get("status") or {}):
            self.custom.patch_cluster_custom_object_status(plans.GROUP, plans.VERSION, plans.PLURAL,
                                                           plan["metadata"]["name"], {"status": step.status})
        for type_, reason, message in step.events:
            self._event(plan, reason, message, type_)
        if step.status.get("phase") in plans.TERMINAL:
            self.metrics.plans_finished.labels(step.status["phase"], step.status.get("reason", "")).inc()
            self.requeue_held(plan["metadata"]["name"])
            self.request(self._after(step.status["phase"]))  # pods may still wait: the evicted, or others
        return step

    def requeue_held(self, plan: str) -> None:
        """The plan's pins and reservations are gone: annotate each pod whose last scheduling attempt they
        refused, one patch each. kube-scheduler keeps a refused pod aside until an event it watches for
        (an extender's verdict is none of them) or its five-minute flush; an update of the pod requeues it."""
        said = f"PackingPlan {plan}"
        try:
            for pod in items(self.core.list_pod_for_all_namespaces,
                             field_selector=f"spec.schedulerName={self.scheduler},spec.nodeName="):
                meta = pod["metadata"]
                if said in _refusal(pod) and not meta.get("deletionTimestamp"):
                    self._patch(meta, {"metadata": {"annotations": {ROOM_FREED_BY: plan}}})
        except client.ApiException as exc:  # they are tried again at kube-scheduler's next flush
            self.metrics.api_errors.labels("requeue").inc()
            log.warning("requeueing the pods PackingPlan %s held back: %s", plan, api_message(exc))

    def _patch(self, meta: dict[str, Any], body: dict[str, Any]) -> None:
        try:
            self.core.patch_namespaced_pod(meta["name"], meta["namespace"], body)
        except client.ApiException as exc:
            if exc.status != 404:  # gone: nothing to requeue
                raise

    def _after(self, phase: str) -> float:
        """Seconds before the next pass after a plan ended: the cooldown, doubled per plan in a row
        that failed (up to FAILED_PLAN_MAX_WAIT), so a plan the cluster refuses is not made again
        and again."""
        failed = phase in (plans.Phase.FAILED, plans.Phase.TIMED_OUT)
        self._failed_plans = self._failed_plans + 1 if failed else 0
        wait = min(FAILED_PLAN_MAX_WAIT, self.config.cooldown * 2.0 ** self._failed_plans)
        self._next = max(self._next, time.monotonic() + wait)
        return wait

    def _tell_evicted(self, namespace: str, job: str, eviction: Eviction) -> None:
        """Before its pods go, tell the GPUJob which plan evicts them and for whom: the operator says so
        in the job's status and Events. Not telling never holds the plan up."""
        body = {"metadata": {"annotations": {EVICTED_BY: eviction.annotation()}}}
        try:
            self.custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, job, body)
        except client.ApiException as exc:
            if exc.status != 404:
                self.metrics.api_errors.labels("evicted_by").inc()
                log.warning("telling GPUJob %s/%s of its eviction: %s", namespace, job, api_message(exc))

    def _warn(self, workload: dict[str, Any], reason: str, message: str) -> None:
        """A Warning on a pod gang's workload (a Job, ...): it has no status the packer may write. Not
        telling never holds the plan up."""
        try:
            self.core.create_namespaced_event(workload["namespace"],
                                              event(workload, reason, message, COMPONENT, "Warning"))
        except client.ApiException as exc:
            self.metrics.api_errors.labels("event").inc()
            log.warning("event on %s %s/%s: %s", workload["kind"], workload["namespace"], workload["name"],
                        api_message(exc))

    def _evict(self, key: str) -> str | None:
        """Evict a pod; the API server's message if it refuses (a PodDisruptionBudget), else None."""
        namespace, name = key.split("/", 1)
        body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace))
        try:
            self.core.create_namespaced_pod_eviction(name, namespace, body)
        except client.ApiException as exc:
            if exc.status == 429:
                return api_message(exc)
            if exc.status != 404:  # gone already is what we wanted
                raise
        return None

    def _ungate(self, pod: KubeObject, plan: str, node: str) -> None:
        """Lift the gang gate of a pod the plan places on `node`, signed with the plan: the GPUJob's
        status names it."""
        meta = pod["metadata"]
        sign = annotate_patch(meta.get("annotations"), RELEASED_BY, plan)
        # pinned to the planned node, as the operator pins a gang it places: kube-scheduler filters that
        # node alone, and keeps the pod there if the plan ends before it binds (a stale pin is replaced)
        pin = [*requirement_patch(pod["spec"], pinned_to(node)),
               pinned_note(meta.get("annotations"), node, [sign])]
        gate = [*pin, ungate_patch([g.get("name") for g in pod["spec"].get("schedulingGates") or ()])]
        try:
            self.core.patch_namespaced_pod(meta["name"], meta["namespace"], [sign, *gate])
        except client.ApiException as exc:
            if exc.status != 404:
                raise

    def _pods(self, plan: KubeObject) -> list[KubeObject]:
        """The pods of the namespaces the plan touches (its pods and their replacements live there)."""
        spec = plan.get("spec") or {}
        namespaces = {e["pod"].split("/", 1)[0] for part in ("evictions", "moves", "placements")
                      for e in spec.get(part) or ()}
        return [p for ns in sorted(namespaces) for p in items(self.core.list_namespaced_pod, ns)]

    def _pdbs(self) -> list[KubeObject]:
        return items(self.policy.list_pod_disruption_budget_for_all_namespaces)

    def _event(self, plan: KubeObject, reason: str, message: str, type_: str = "Normal") -> None:
        meta = plan["metadata"]
        involved = {"apiVersion": f"{plans.GROUP}/{plans.VERSION}", "kind": plans.KIND, "namespace": "",
                    "name": meta["name"], "uid": meta.get("uid", "")}
        try:
            body = event(involved, reason, message, COMPONENT, type_)
            self.core.create_namespaced_event(body["metadata"]["namespace"], body)
        except client.ApiException as exc:
            self.metrics.api_errors.labels("event").inc()
            log.warning("event on PackingPlan %s: %s", meta["name"], api_message(exc))


def _refusal(pod: KubeObject) -> str:
    """Why kube-scheduler last refused to bind the pod (its PodScheduled condition), or ""."""
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return str(cond.get("message") or "")
    return ""


def only_lower_priority_moves(problem: Problem) -> Problem:
    """Pin every running pod whose priority is not below the top waiting priority: the packer
    disrupts pods only for more important ones, never to reshuffle equals."""
    top = max((p.priority for p in problem.pods if not p.running), default=None)
    if top is None:
        return problem
    pods = tuple(replace(p, movable=False) if p.running and p.movable and p.priority >= top else p
                 for p in problem.pods)
    return replace(problem, pods=pods)


def _disrupts(plan: Plan, changes: Changes) -> bool:
    """Does the plan evict or move pods (the greedy fill into free room never does; the solver and,
    priced, its greedy repair may)?"""
    return plan.source in ("solver", "repair") and bool(changes["evictions"] or changes["moves"])


def _victims(changes: Changes) -> list[str]:
    return [e[0] for e in changes["evictions"]] + [m[0] for m in changes["moves"]]


def _covered(problem: Problem, labels: dict[str, dict[str, str]], budgets: list[str],
             pdbs: list[KubeObject]) -> set[str]:
    """The pods of the problem that any of `budgets` covers."""
    chosen = [b for b in pdbs if f"{b['metadata']['namespace']}/{b['metadata']['name']}" in budgets]
    return {p.name for p in problem.pods for b in chosen
            if p.name.startswith(b["metadata"]["namespace"] + "/")
            and selects((b.get("spec") or {}).get("selector"), labels.get(p.name, {}))}


def _pin(problem: Problem, names: set[str]) -> Problem:
    return replace(problem, pods=tuple(replace(p, movable=False) if p.name in names else p
                                       for p in problem.pods))


def blocked_message(blocked: list[OverBudget]) -> str:
    parts = []
    for b in blocked:
        shown = ", ".join(b.hit[:3]) + (f" and {len(b.hit) - 3} more" if len(b.hit) > 3 else "")
        parts.append(f"PodDisruptionBudget {b.budget} allows {b.allowed} disruption(s) and covers {shown}")
    return ("the packer could make room by evicting lower-priority pods, but " + "; ".join(parts)
            + ": relax or delete the budget, or wait for those pods to finish")


def _notes(waiting: list[Pod], blocked: list[OverBudget]) -> dict[str, str]:
    """What to tell each waiting GPUJob about the budgets that keep the packer from helping it."""
    if not blocked:
        return {}
    message = blocked_message(list({b.budget: b for b in blocked}.values()))
    return {p.gang: message for p in waiting if p.gang}


def _reason(waiting: list[Pod]) -> str:
    top = max(p.priority for p in waiting)
    names = sorted(p.name for p in waiting if p.priority == top)
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return f"{len(waiting)} pod(s) wait for room, {len(names)} at priority {top} ({shown})"
