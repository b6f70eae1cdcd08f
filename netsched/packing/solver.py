"""The CP-SAT packer: room for higher-priority pods, with the fewest pods moved or evicted.

Two disruption policies (`Policy`):
- strict: lexicographic, highest priority first: for each priority tier (the
  pods of that priority or higher) maximise pods placed and then minimise disruption (stay 0,
  evict 1, move 2), in one weighted stage, and freeze the result; finally, if pods carry node
  preferences (the extender's network score), maximise those. Each stage is one CP-SAT solve
  hinted with the previous stage's answer; a small tie-break over all pods keeps an answer cut
  short by the clock from evicting anything it does not need to. A pod is never disturbed for
  work below its own tier.
- priced (the default): one weighted objective, value of the pods placed (by priority) minus the price of
  every move and eviction (a restart throws away the pod's run time so far), over candidate
  nodes restricted per pod and hinted with a greedy repair of the current placement; the
  policy says which pods may be moved or evicted for lower-priority work (by default only
  stateless replicas move for it). The pods the repair leaves out are first added by moving and
  swapping pods (`swaps`); over identical nodes the placements are then solved without the nodes'
  symmetry (`identical`).

Guarantees, both policies:
- a hard wall-clock budget: every solve gets at most what is left of it, less a margin
  for building the model and the time rating an answer took, so `solve()` returns within
  `budget` seconds;
- anytime: a stage that times out keeps the best answer found so far;
- never invalid, never worse than now by the policy's own objective (`score`): the answer is
  the best of the current placement, a greedy placement of the pending pods into free room
  (no moves), the greedy repair (priced) and the solver's; anything but the current placement
  must beat it (by the policy's minimum gain, priced).
"""

from __future__ import annotations

import os
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

import numpy as np
from ortools.sat.python import cp_model

from netsched.packing import identical, swaps
from netsched.packing.default_scheduler import fits, free_room, preemption, schedule
from netsched.packing.policy import PRICED, STRICT, Policy
from netsched.packing.problem import Node, Pod, Problem

MOVE, EVICT = 2, 1
PIECE_PENDING = 8  # pending pods per piece: small pieces solve exactly within a fraction of a second
VARS_PER_SECOND = 10000
SWAPS_SHARE = 0.4  # of what is left, at most, for adding pending pods by moves and swaps (`swaps`)
IDENTICAL_SHARE = 0.5  # of what is left then, for the placements over identical nodes (the rest prices them)
MAX_VARS = 20000  # placement variables one model may have; larger problems are solved in pieces
Expr = cp_model.LinearExpr | int  # what the model adds up (a constant where a pod cannot be disrupted)


class Changes(TypedDict):
    moves: list[tuple[str, str, str]]  # pod, from, to
    evictions: list[tuple[str, str]]  # pod, from
    placements: list[tuple[str, str]]  # pod, to


@dataclass
class Plan:
    placement: dict[str, str | None]  # pod -> node after the plan (None: not running)
    score: tuple[int, ...]  # lexicographic, higher is better (see `score`)
    source: str  # "solver", "greedy" (free room only) or "current" (nothing better found)
    proven_optimal: bool
    seconds: float
    stages: list[dict[str, Any]] = field(default_factory=list)  # per stage: name, status, value, seconds

    def changes(self, problem: Problem) -> Changes:
        changes = Changes(moves=[], evictions=[], placements=[])
        moves, evictions, placements = changes["moves"], changes["evictions"], changes["placements"]
        for p in problem.pods:
            after = self.placement.get(p.name)
            if p.node and after is None:
                evictions.append((p.name, p.node))
            elif p.node and after is not None and after != p.node:
                moves.append((p.name, p.node, after))
            elif not p.node and after:
                placements.append((p.name, after))
        return changes


def tiers(problem: Problem) -> list[int]:
    return sorted({p.priority for p in problem.pods}, reverse=True)


def score(problem: Problem, placement: dict[str, str | None],
          policy: Policy = STRICT) -> tuple[int, ...]:
    """The policy's objective, higher is better. Strict: per tier (highest first) pods placed,
    minus disruption; then total preference; then minus the run time (seconds) that the restarts
    throw away. Priced: (value minus price, preference)."""
    if policy.priced:
        return Prices(problem, policy).score(placement)
    out = []
    for t in tiers(problem):
        pods = [p for p in problem.pods if p.priority >= t]
        out.append(sum(placement.get(p.name) is not None for p in pods))
        out.append(-sum(_cost(p, placement.get(p.name)) for p in pods))
    out.append(sum(p.preference.get(placement.get(p.name) or "", 0) for p in problem.pods))
    ran = run_seconds(problem)
    out.append(-sum(ran[p.name] for p in problem.pods if p.node and placement.get(p.name) != p.node))
    return tuple(out)


def run_seconds(problem: Problem) -> dict[str, int]:
    """The work a restart throws away: how long each pod has run (0 when pending, its start is unknown,
    or it is a stateless replica, which a restart costs no work)."""
    taken = problem.taken if problem.taken is not None else time.time()
    return {p.name: int(max(0.0, taken - p.started))
            if p.running and p.started is not None and not p.stateless else 0 for p in problem.pods}


def _cost(p: Pod, after: str | None) -> int:
    if not p.node or after == p.node:
        return 0
    return EVICT if after is None else MOVE


def current(problem: Problem) -> dict[str, str | None]:
    return {p.name: p.node for p in problem.pods}


def greedy(problem: Problem, stop_at: float = float("inf")) -> dict[str, str | None]:
    """Pending pods into free room, highest priority first, gangs all or nothing; nothing moves.
    Stops placing at `stop_at` (monotonic): what it placed by then is still a valid answer."""
    placement = current(problem)
    room = Room(problem, free_room(problem.nodes, problem.pods))
    groups: dict[str, list[Pod]] = defaultdict(list)
    for p in problem.pods:
        if not p.running:
            groups[p.gang or p.name].append(p)
    for members in sorted(groups.values(), key=lambda g: -g[0].priority):
        if time.monotonic() > stop_at:
            break
        # a lone pod either fits (and takes its room) or changes nothing; only a gang may need undoing
        for nodes in domains(problem, members):
            trial = room if len(members) == 1 else room.copy()
            got = trial.schedule(nodes, members)
            if all(got.values()):
                room = trial
                placement.update(got)
                break
    return placement


class Room:
    """Free room per node, as `free_room` gives it, with the same numbers in a matrix (nodes x
    resources) so that the nodes a pod fits on are found without a Python loop over every node:
    at a thousand nodes the greedy fill and the repair look for room once per pending pod."""

    held: np.ndarray | None = None  # priority x node x resource, see `track`

    def __init__(self, problem: Problem, free: dict[str, dict[str, int]]) -> None:
        self.problem, self.free = problem, free
        self.names = [n.name for n in problem.nodes]
        self.index = {n: i for i, n in enumerate(self.names)}
        self.kinds = sorted({r for n in problem.nodes for r in n.capacity}
                            | {r for p in problem.pods for r in p.requests})
        self.capacity = np.array([[n.capacity.get(r, 0) for r in self.kinds] for n in problem.nodes],
                                 dtype=np.int64).reshape(len(self.names), len(self.kinds))
        self.matrix = self.capacity.copy()
        self.sync()

    def copy(self) -> Room:
        other = object.__new__(Room)
        other.__dict__.update(self.__dict__)
        other.free = {k: dict(v) for k, v in self.free.items()}
        other.matrix = self.matrix.copy()
        if self.held is not None:
            other.held = self.held.copy()
        return other

    def track(self, pods: tuple[Pod, ...], placement: dict[str, str | None]) -> None:
        """Also keep what `pods` (the movable running ones) hold on each node, per priority: the
        room a preemption could free (`could_preempt`). Recomputed in full: after a preemption."""
        self.priorities = sorted({p.priority for p in pods})
        rank = {q: k for k, q in enumerate(self.priorities)}
        self.held = np.zeros((len(self.priorities), *self.matrix.shape), dtype=np.int64)
        on = [(rank[p.priority], self.index[n], p) for p in pods if (n := placement[p.name]) is not None]
        if on:
            needs = np.array([[p.requests.get(r, 0) for r in self.kinds] for _, _, p in on], dtype=np.int64)
            np.add.at(self.held, ([k for k, _, _ in on], [i for _, i, _ in on]), needs)

    def shift(self, pod: Pod, source: str, target: str) -> None:
        """A tracked pod moved."""
        if self.held is not None:
            k = self.priorities.index(pod.priority)
            self.held[k, self.index[source]] -= self.need(pod)
            self.held[k, self.index[target]] += self.need(pod)

    def could_preempt(self, nodes: tuple[Node, ...], pod: Pod) -> bool:
        """Whether `pod` would fit on one of `nodes` with every tracked lower-priority pod gone:
        without that no preemption can place it."""
        if self.held is None:
            return True
        lower = [k for k, q in enumerate(self.priorities) if q < pod.priority]
        if not lower:
            return False
        want = self.need(pod)
        asked = want > 0
        room = self.matrix + self.held[lower].sum(axis=0)
        return bool((self.usable(nodes, pod) & (room[:, asked] >= want[asked]).all(axis=1)).any())

    def sync(self, names: list[str] | None = None) -> None:
        """Copy `free` into the matrix: the given nodes' rows, or all."""
        for n in self.names if names is None else names:
            row = self.free[n]
            self.matrix[self.index[n]] = [row.get(r, 0) for r in self.kinds]

    def set(self, rows: dict[int, np.ndarray]) -> None:
        """New free room of some nodes (by row), in both forms."""
        for i, row in rows.items():
            self.matrix[i] = row
            self.free[self.names[i]] = {r: int(v) for r, v in zip(self.kinds, row, strict=True)}

    def need(self, pod: Pod) -> np.ndarray:
        return np.array([pod.requests.get(r, 0) for r in self.kinds], dtype=np.int64)

    def usable(self, nodes: tuple[Node, ...], pod: Pod) -> np.ndarray:
        """Per node (row): one of `nodes` that `pod` may use."""
        if nodes is self.problem.nodes:
            mask = np.ones(len(self.names), dtype=bool)
        else:
            mask = np.zeros(len(self.names), dtype=bool)
            mask[[self.index[n.name] for n in nodes]] = True
        if pod.allowed is not None:
            mask &= np.isin(self.names, pod.allowed)
        return mask

    def schedule(self, nodes: tuple[Node, ...], pods: list[Pod]) -> dict[str, str | None]:
        """`default_scheduler.schedule` into this room (the same choices), considering only the
        nodes each pod fits on."""
        out: dict[str, str | None] = {}
        for pod in pods:
            want = self.need(pod)
            asked = want > 0
            fit = self.usable(nodes, pod) & (self.matrix[:, asked] >= want[asked]).all(axis=1)
            fitting = tuple(self.problem.nodes[i] for i in np.flatnonzero(fit))
            node = schedule(fitting, self.free, [pod])[pod.name] if fitting else None
            out[pod.name] = node
            if node is not None:
                self.sync([node])
        return out


def domains(problem: Problem, members: list[Pod]) -> list[tuple[Node, ...]]:
    """The node sets a gang may use: all nodes, or one per value of its domain label."""
    label = members[0].domain
    if label is None or len(members) == 1:
        return [problem.nodes]
    groups: dict[str, list[Node]] = defaultdict(list)
    for n in problem.nodes:
        groups[n.domain(label)].append(n)
    return [tuple(g) for g in groups.values()]


def solve(problem: Problem, budget: float = 1.0, workers: int | None = None,
          max_vars: int = MAX_VARS, policy: Policy = STRICT) -> Plan:
    started = time.monotonic()
    # one whole model only when it builds in a small share of the budget (~10,000 variables a second)
    whole = model_size(problem, policy) <= min(max_vars, VARS_PER_SECOND * budget)
    rate = Prices(problem, policy).score if policy.priced else lambda p: score(problem, p, policy)
    as_is = current(problem)
    t = time.monotonic()
    options = [(rate(as_is), "current", as_is)]
    # every answer is rated once it is found, the last one after the stages: they stop that much
    # earlier (rating 10,000 pods takes a tenth of a second on a busy machine)
    rating = time.monotonic() - t
    deadline = started + budget - margin(budget) - rating
    firsts = [("greedy", greedy(problem, min(started + 0.3 * budget, deadline - rating)))]
    if policy.priced and policy.repair:
        # too large for one model, the repair is what places most pods: it may take most of the budget
        share = 0.4 if whole else 0.7
        stop = min(started + share * budget, deadline - 2 * rating)
        firsts.append(("repair", repair(problem, firsts[0][1], stop, policy)))
    options += [(rate(p), name, p) for name, p in firsts]
    workers = workers or os.cpu_count() or 1
    hint = max(options, key=lambda o: o[0])[2]
    # the same rule with what the greedy fill and the repair left (less than planned on a busy machine)
    whole = whole and model_size(problem, policy) <= VARS_PER_SECOND * (deadline - time.monotonic())
    if whole:
        stages = []
        left = deadline - time.monotonic()
        # the pods the policy lets move for any work, outside every disruption budget
        mobile = {p.name for p in problem.pods if policy.priced and policy.repair and p.running
                  and p.movable and p.pdb is None and policy.may_move_for_lower(p)}
        if mobile and any(hint[p.name] is None for p in problem.pods):
            stage, added = _swaps(problem, mobile, hint, time.monotonic() + SWAPS_SHARE * left)
            stages.append(stage)
            options.append((rate(added), "solver", added))
            hint = max(options, key=lambda o: o[0])[2]
            left = deadline - time.monotonic()
        if (identical.applies(problem, policy) and any(hint[p.name] is None for p in problem.pods)
                and identical.size(problem) <= IDENTICAL_SHARE * VARS_PER_SECOND * left):
            stage, found = _placements_first(problem, policy, hint, deadline, workers)
            stages.append(stage)
            if found is not None:
                options.append((rate(found), "solver", found))
                hint = max(options, key=lambda o: o[0])[2]
        try:
            more, answer, proven = _Model(problem, hint, policy, deadline).run(deadline, workers)
        except OutOfTime:
            more, answer, proven = [{"stage": "the model", "status": "skipped: budget spent"}], None, False
        stages += more
    else:
        stages, answer = neighbourhoods(problem, hint, deadline, workers, max_vars, policy)
        proven = False
    if answer is not None:
        options.append((rate(answer), "solver", answer))
    options = [o for o in options if not splits_a_gang(problem, o[2])]
    now = options[0][0]
    if policy.priced:  # a plan must gain at least the minimum over the current placement
        gain = max(1, policy.min_gain * PRICE_UNIT)
        options = [o for o in options if o[1] == "current" or o[0][0] >= now[0] + gain]
    best_score, source, best = max(options, key=lambda o: (o[0], o[1] == "current"))  # ties: change nothing
    return Plan(best, best_score, source, proven, time.monotonic() - started, stages)


def splits_a_gang(problem: Problem, placement: dict[str, str | None]) -> bool:
    """Does `placement` stop some running pods of a gang while others of it run? (The greedy repair
    preempts pod by pod, as kube-scheduler does; such an answer is no plan.)"""
    stopped = {p.gang for p in problem.pods if p.gang and p.running and placement.get(p.name) is None}
    return any(p.gang in stopped and placement.get(p.name) is not None for p in problem.pods)


def _swaps(problem: Problem, mobile: set[str], hint: dict[str, str | None],
           stop_at: float) -> tuple[dict[str, Any], dict[str, str | None]]:
    """The pods the hint leaves out, added by moving and swapping the `mobile` pods (`swaps`)."""
    t0 = time.monotonic()
    found = swaps.add_pending(problem, hint, mobile, stop_at)
    added = sum(hint[p.name] is None and found[p.name] is not None for p in problem.pods)
    return {"stage": "pending pods added by moves and swaps", "status": f"{added} added",
            "seconds": round(time.monotonic() - t0, 3)}, found


def _placements_first(problem: Problem, policy: Policy, hint: dict[str, str | None], deadline: float,
                      workers: int) -> tuple[dict[str, Any], dict[str, str | None] | None]:
    """The placements over interchangeable nodes (`identical`), in a share of what is left: the model
    then prices the moves, hinted with them."""
    t0 = time.monotonic()
    prices = Prices(problem, policy)
    pods = {p.name: p for p in problem.pods}
    found, counted = identical.place(problem, policy, hint, lambda pod: prices.move(pods[pod]),
                                     t0 + IDENTICAL_SHARE * (deadline - t0), workers)
    return {"stage": "placements over identical nodes",
            "status": "OPTIMAL" if counted else "FEASIBLE" if found else "no solution in time",
            "seconds": round(time.monotonic() - t0, 3)}, found


def margin(budget: float) -> float:
    """What the solver stages leave of the budget for building models, stopping CP-SAT's workers and
    choosing the answer. A fixed 0.05 s was overrun by up to 0.08 s on 2 busy cores, and 0.05 s plus
    5% of the budget by up to 0.02 s at load 12 on 2 cores; it grows with the budget because a larger
    budget means larger models and longer stops."""
    return min(0.5 * budget, 0.05 + 0.1 * budget)


def model_size(problem: Problem, policy: Policy = STRICT) -> int:
    """Placement variables the model will have, at most (counted without building it)."""
    per_pod = len(problem.nodes)
    if policy.priced and policy.candidates is not None:
        per_pod = min(per_pod, policy.candidates + 2)  # the restricted ones, its own node and the hint's
    return sum(1 if p.running and not p.movable else per_pod for p in problem.pods)


def candidates(problem: Problem, policy: Policy,
               hint: dict[str, str | None]) -> tuple[dict[str, list[str]], bool]:
    """Nodes each pod may go to: where it runs, where the hint puts it, and (priced, restricted)
    the `policy.candidates` nodes with the most room it could get (for a pending pod, free room
    plus what lower-priority movable pods hold; for a running pod, free room). Only nodes that
    could hold it alone and that it may use; a running pod may always stay (node affinity is
    IgnoredDuringExecution). Also whether any pod lost a node it could use (then an optimum is
    the restricted model's, not proven for the problem)."""
    nodes = {n.name: n for n in problem.nodes}
    cut = False
    possible = {p.name: [n.name for n in problem.nodes if (p.allowed is None or n.name in p.allowed)
                         and fits(n.capacity, p)] for p in problem.pods}
    out: dict[str, list[str]] = {}
    limit = policy.candidates if policy.priced else None
    free = free_room(problem.nodes, problem.pods) if limit is not None else {}
    reclaim: dict[int, dict[str, dict[str, int]]] = {}
    lost: dict[int, dict[str, int]] = {}  # per priority, per node: run time lost making room there
    ran = run_seconds(problem) if limit is not None else {}
    for p in problem.pods:
        if p.node is not None and not p.movable:
            out[p.name] = [p.node]
            continue
        ranked = possible[p.name]
        if limit is not None and len(ranked) > limit:
            cut = True
            if p.running:
                room, cost = free, {}
            else:
                if p.priority not in reclaim:
                    reclaim[p.priority] = _reclaimable(problem, free, p.priority)
                    lost[p.priority] = _run_time_held(problem, ran, p.priority)
                room, cost = reclaim[p.priority], lost[p.priority]
            # most room first; among equals, where making room throws away the least work
            ranked = sorted(ranked, key=lambda n: (-_fit_count(room[n], p), cost.get(n, 0)))[:limit]
        keep = set(ranked) | {n for n in (p.node, hint.get(p.name)) if n is not None}
        out[p.name] = [n for n in nodes if n in keep]
    return out, cut


def _run_time_held(problem: Problem, ran: dict[str, int], priority: int) -> dict[str, int]:
    """Per node, the run time of the movable pods below `priority` on it: what clearing it would lose."""
    out: dict[str, int] = defaultdict(int)
    for p in problem.pods:
        if p.node is not None and p.movable and p.priority < priority:
            out[p.node] += ran[p.name]
    return out


def _reclaimable(problem: Problem, free: dict[str, dict[str, int]],
                 priority: int) -> dict[str, dict[str, int]]:
    room = {n: dict(r) for n, r in free.items()}
    for p in problem.pods:
        if p.node is not None and p.movable and p.priority < priority:
            for r, v in p.requests.items():
                room[p.node][r] = room[p.node].get(r, 0) + v
    return room


def _fit_count(room: dict[str, int], p: Pod) -> float:
    return min((room.get(r, 0) / v for r, v in p.requests.items() if v > 0), default=0.0)


def repair(problem: Problem, start: dict[str, str | None], stop_at: float = float("inf"),
           policy: Policy = PRICED) -> dict[str, str | None]:
    """A greedy repair of `start`: each pending gang (highest priority first) goes into free
    room; or into room made by moving running pods elsewhere into free room (no pod stops; the
    policy says which classes may move for work of their priority or below); or preempts as
    kube-scheduler would (movable, lower-priority victims, budgets kept), each victim then going
    into free room elsewhere if there is any (a move), or evicted. A gang that cannot be placed
    whole changes nothing; one bound to a domain goes to the domain where it disturbs the fewest
    pods."""
    placement = dict(start)
    movable = Problem(problem.nodes, tuple(p for p in problem.pods if p.movable and p.running))
    spent: Counter[str] = Counter()  # disruptions per PodDisruptionBudget so far
    groups: dict[str, list[Pod]] = defaultdict(list)
    for p in problem.pods:
        if placement[p.name] is None and not p.running:
            groups[p.gang or p.name].append(p)
    at_home: dict[str, list[Pod]] = defaultdict(list)  # movable pods still where they run, by node
    for p in movable.pods:
        at_home[p.node or ""].append(p)
    free = Room(problem, free_room(problem.nodes, problem.pods, placement))  # kept up to date
    free.track(movable.pods, placement)
    for members in sorted(groups.values(), key=lambda g: -g[0].priority):
        if time.monotonic() > stop_at:
            break
        best: tuple[int, dict[str, str | None], Counter[str], Room] | None = None
        options = domains(problem, members)
        for nodes in options:  # the domain freed with the fewest pods disturbed
            lone = len(members) == 1
            trial = placement if lone else dict(placement)
            used = spent if lone else Counter(spent)
            room = free if lone else free.copy()
            if all(_repair_one(problem, nodes, movable, trial, used, pod, policy, at_home, room)
                   for pod in members):
                disturbed = 0 if len(options) == 1 else sum(
                    trial[p.name] != p.node for p in problem.pods if p.running)
                if best is None or disturbed < best[0]:
                    best = (disturbed, trial, used, room)
        if best is not None:
            _, placement, spent, free = best
    return placement


def _repair_one(problem: Problem, nodes: tuple[Node, ...], movable: Problem,
                placement: dict[str, str | None], spent: Counter[str], pod: Pod, policy: Policy,
                at_home: dict[str, list[Pod]], free: Room) -> bool:
    """Place `pod` on one of `nodes`, by moves or preempting there if it must; others may go anywhere.
    `free` (the room `placement` leaves) is updated with it. A lone pod that cannot be placed
    changes nothing."""
    node = free.schedule(nodes, [pod])[pod.name]
    if node is not None:
        placement[pod.name] = node
        return True
    if _make_room_by_moves(problem, nodes, at_home, placement, spent, pod, policy, free):
        return True
    if not free.could_preempt(nodes, pod):
        return False
    allowed = {b.name: b.allowed - spent[b.name] for b in problem.budgets}
    found = preemption(replace(movable, nodes=nodes), placement, free.free, allowed, pod)
    if found is None:
        return False
    hits = Counter(v.pdb for v in found[1] if v.pdb in allowed)
    if any(n > allowed[b] for b, n in hits.items()):
        return False
    node, victims = found
    for v in victims:
        placement[v.name] = None
        if v.pdb:
            spent[v.pdb] += 1
    placement[pod.name] = node
    free.free.clear()
    free.free.update(free_room(problem.nodes, problem.pods, placement))
    free.sync()
    for v in victims:
        placement[v.name] = free.schedule(problem.nodes, [v])[v.name]
    free.track(movable.pods, placement)
    return True


MOVE_TRIES = 4  # nodes per pending pod on which the repair tries to make room by moves


def _make_room_by_moves(problem: Problem, nodes: tuple[Node, ...], at_home: dict[str, list[Pod]],
                        placement: dict[str, str | None], spent: Counter[str], pod: Pod, policy: Policy,
                        free: Room) -> bool:
    """Defragment: on the few nodes closest to fitting `pod`, move running pods (largest first,
    each still where it started) into free room on other nodes (the tightest fit) until `pod`
    fits; only when every one of them finds a place, so nothing stops running. Vectorised over
    nodes: at a thousand nodes this runs once per pending pod."""
    names, index, room, capacity = free.names, free.index, free.matrix, free.capacity
    scale = 1.0 / np.maximum(capacity, 1)
    need = free.need
    want = need(pod)
    usable = free.usable(nodes, pod) & (capacity >= want).all(axis=1)
    missing = np.maximum(0, want - room).sum(axis=1).astype(float)
    missing[~usable] = np.inf
    allowed = {b.name: b.allowed - spent[b.name] for b in problem.budgets}
    for t in np.argsort(missing, kind="stable")[:MOVE_TRIES]:
        if not np.isfinite(missing[t]):
            break
        target = names[t]
        riders = sorted((q for q in at_home[target]
                         if placement[q.name] == target and _may_move_for(q, pod, policy)),
                        key=lambda q: -sum(q.requests.values()))
        trial = room.copy()
        moved: list[tuple[Pod, str]] = []
        hits: Counter[str] = Counter()
        for q in riders:
            if (trial[t] >= want).all():
                break
            if q.pdb in allowed and hits[q.pdb] + 1 > allowed[q.pdb]:
                continue
            size = need(q)
            fit = np.asarray((trial >= size).all(axis=1))
            fit[t] = False
            if q.allowed is not None:
                fit &= np.isin(names, q.allowed)
            if not fit.any():
                continue
            leftover = np.where(fit, ((trial - size) * scale).sum(axis=1), np.inf)
            to = int(np.argmin(leftover))
            trial[to] -= size
            trial[t] += size
            moved.append((q, names[to]))
            if q.pdb in allowed:
                hits[q.pdb] += 1
        if not (trial[t] >= want).all():
            continue
        trial[t] -= want
        for q, there in moved:
            placement[q.name] = there
            free.shift(q, target, there)
        placement[pod.name] = target
        free.set({i: trial[i] for i in {t, *(index[n] for _, n in moved)}})
        spent.update(hits)
        return True
    return False


def _may_move_for(q: Pod, pod: Pod, policy: Policy) -> bool:
    """A pod may always move for higher-priority work; for its own priority or below, as the policy says."""
    return q.priority < pod.priority or policy.may_move_for_lower(q)


PRICE_UNIT = 60  # the solver's integer points are 1/60 of the policy's: a restart is priced to the second


class Prices:
    """The priced policy's points, in PRICE_UNITs: value of the pods running, price of moves and evictions."""

    def __init__(self, problem: Problem, policy: Policy) -> None:
        self.problem, self.policy = problem, policy
        # per second, not per whole minute: rounded to minutes, a job 25 s old and one 5 s old cost the
        # same, and the plan restarts either
        self.restart = {name: round(policy.points_per_minute * seconds * PRICE_UNIT / 60)
                        for name, seconds in run_seconds(problem).items()}
        given = dict(policy.values or ())
        self.value: dict[int, int] = {}
        if policy.values is not None:
            self.value = {t: given.get(t, 0) * PRICE_UNIT for t in tiers(problem)}
        else:  # each class above every lower class and every price together
            total = 1 + sum(max(self.move(p), self.evict(p))
                            for p in problem.pods if p.running)
            for t in sorted(tiers(problem)):
                self.value[t] = total
                total += total * sum(p.priority == t for p in problem.pods)

    def move(self, p: Pod) -> int:
        return self.policy.move_price_of(p.priority) * PRICE_UNIT + self.restart[p.name]

    def evict(self, p: Pod) -> int:
        return self.policy.evict_price_of(p.priority) * PRICE_UNIT + self.restart[p.name]

    def score(self, placement: dict[str, str | None]) -> tuple[int, int]:
        points = 0
        for p in self.problem.pods:
            after = placement.get(p.name)
            points += self.value[p.priority] * (after is not None)
            if p.node is not None and after != p.node:
                points -= self.evict(p) if after is None else self.move(p)
        pref = sum(p.preference.get(placement.get(p.name) or "", 0) for p in self.problem.pods)
        return points, pref


def neighbourhoods(problem: Problem, placement: dict[str, str | None], deadline: float, workers: int,
                   max_vars: int, policy: Policy = STRICT,
                   ) -> tuple[list[dict[str, Any]], dict[str, str | None]]:
    """Large problems, piece by piece: take the highest-priority pending pods, the nodes where
    room could be made for them (free room plus lower-priority movable pods), solve that piece
    exactly, keep it if it is better, and go on with the next pending pods until time is up."""
    working = dict(placement)
    tried: set[str] = set()
    stages: list[dict[str, Any]] = []
    build = 0.0  # how long the last piece took to build: do not start one that cannot finish
    while deadline - time.monotonic() > max(0.05, 3 * build):
        pending = sorted((p for p in problem.pods if working[p.name] is None and p.name not in tried),
                         key=lambda p: -p.priority)
        if not pending:
            break
        seeds = _with_gangs(pending[:PIECE_PENDING], problem)
        tried.update(p.name for p in seeds)
        # pieces as large as the time left can solve (about 6,000 variables a second here)
        size = int(min(max_vars, max(1000, 6000 * (deadline - time.monotonic()))))
        t0 = time.monotonic()
        nodes = _roomiest(problem, working, seeds, size)
        # a seed the greedy start took off its node is priced by that node: the piece must hold it
        homes = {p.node for p in seeds} - {n.name for n in nodes}
        nodes += [n for n in problem.nodes if n.name in homes]
        names = {n.name for n in nodes}
        members = [replace(p, node=working[p.name]) for p in problem.pods if working[p.name] in names]
        members += seeds
        piece = Problem(tuple(nodes), tuple(members), problem.budgets, problem.taken)
        piece_deadline = min(deadline, t0 + max(0.1, (deadline - t0) / 2))
        try:
            model = _Model(piece, current(piece), policy, piece_deadline)
        except OutOfTime:
            break
        build = time.monotonic() - t0
        _, answer, _ = model.run(piece_deadline, workers)
        better = answer is not None and score(piece, answer, policy) > score(piece, current(piece), policy)
        if better and answer is not None:
            working.update(answer)
        stages.append({"stage": f"piece: {len(seeds)} pending, {len(nodes)} nodes, {len(members)} pods",
                       "status": "improved" if better else "unchanged" if answer else "no solution in time",
                       "seconds": round(time.monotonic() - t0, 3)})
    if not stages and deadline - time.monotonic() <= 0.05:
        stages.append({"stage": "pieces", "status": "skipped: budget spent"})
    return stages, working


def _with_gangs(pods: list[Pod], problem: Problem) -> list[Pod]:
    gangs = {p.gang for p in pods if p.gang}
    extra = [p for p in problem.pods if p.gang in gangs and not p.running and p not in pods]
    return pods + extra


def _roomiest(problem: Problem, working: dict[str, str | None], seeds: list[Pod],
              max_vars: int) -> list[Node]:
    """The nodes with the most room the seeds could get: free, or held by lower-priority movable pods."""
    top = max(p.priority for p in seeds)
    room = {n.name: dict(n.capacity) for n in problem.nodes}
    per_node: dict[str, int] = defaultdict(int)
    for p in problem.pods:
        node = working[p.name]
        if node is not None:
            per_node[node] += 1
            if p.priority >= top or not p.movable:
                for r, v in p.requests.items():
                    room[node][r] = room[node].get(r, 0) - v
    want = seeds[0].requests
    def fit_count(n: Node) -> float:
        return min((room[n.name].get(r, 0) / v for r, v in want.items() if v > 0), default=0.0)
    ranked = sorted((n for n in problem.nodes if fit_count(n) >= 1), key=fit_count, reverse=True)
    chosen: list[Node] = []
    pods, room_for = len(seeds), 0.0
    for n in ranked:  # enough nodes to hold the seeds one and a half times over, within the size
        if chosen and ((pods + per_node[n.name]) * (len(chosen) + 1) > max_vars
                       or room_for >= 1.5 * len(seeds)):
            break
        chosen.append(n)
        pods += per_node[n.name]
        room_for += fit_count(n)
    return chosen


class OutOfTime(Exception):
    """The budget ran out while a model was being built: on a busy machine building is slower."""


def _check(stop_at: float) -> None:
    if time.monotonic() > stop_at:
        raise OutOfTime


class _Model:
    def __init__(self, problem: Problem, hint: dict[str, str | None], policy: Policy = STRICT,
                 stop_at: float = float("inf")) -> None:
        """Raises OutOfTime when the clock passes `stop_at` before the model is built."""
        self.problem, self.policy = problem, policy
        m = self.m = cp_model.CpModel()
        self.x: dict[tuple[int, str], cp_model.IntVar] = {}
        self.placed: list[cp_model.IntVar] = []
        self.cost: list[Expr] = []
        where, self.restricted = candidates(problem, policy, hint)
        self._where = [where[p.name] for p in problem.pods]
        for i, p in enumerate(problem.pods):
            if i % 64 == 0:
                _check(stop_at)
            here = []
            for n in where[p.name]:
                self.x[i, n] = m.new_bool_var(f"x{i}_{n}")
                here.append(self.x[i, n])
            placed = m.new_bool_var(f"placed{i}")
            m.add(sum(here) == placed)
            self.placed.append(placed)
            if p.node is not None and not p.movable:  # running where it must stay
                m.add(self.x[i, p.node] == 1)
            self.cost.append(self._cost_expr(i, p, placed))
        _check(stop_at)
        self._capacity()
        _check(stop_at)
        self._gangs()
        self._budgets()
        if policy.priced:
            self._for_lower()
        self._hint(hint)

    def _cost_expr(self, i: int, p: Pod, placed: cp_model.IntVar) -> Expr:
        if p.node is None or (i, p.node) not in self.x:
            return EVICT * (1 - placed) if p.running else 0
        stay = self.x[i, p.node]
        return placed - 2 * stay + 1  # stay 0, evict 1, move 2

    def _capacity(self) -> None:
        on_node: dict[str, list[tuple[int, cp_model.IntVar]]] = defaultdict(list)
        for (i, n), var in self.x.items():
            on_node[n].append((i, var))
        for node in self.problem.nodes:
            for r, cap in node.capacity.items():
                terms = [self.problem.pods[i].requests.get(r, 0) * v for i, v in on_node[node.name]
                         if self.problem.pods[i].requests.get(r, 0)]
                if terms:
                    self.m.add(sum(terms) <= cap)

    def _gangs(self) -> None:
        """All of a gang or none; a gang with a domain label and a pending pod, all in one domain
        (a running gang is left where it is allowed to stay)."""
        members: dict[str, list[int]] = defaultdict(list)
        for i, p in enumerate(self.problem.pods):
            if p.gang:
                members[p.gang].append(i)
        nodes = {n.name: n for n in self.problem.nodes}
        for gang, idx in members.items():
            first = idx[0]
            for i in idx[1:]:
                self.m.add(self.placed[i] == self.placed[first])
            label = self.problem.pods[first].domain
            if label is None or len(idx) < 2 or all(self.problem.pods[i].running for i in idx):
                continue
            chosen: dict[str, cp_model.IntVar] = {}
            for i in idx:
                for n in self._where[i]:
                    d = nodes[n].domain(label)
                    if d not in chosen:
                        chosen[d] = self.m.new_bool_var(f"domain_{gang}_{d}")
                    self.m.add_implication(self.x[i, n], chosen[d])
            self.m.add(sum(chosen.values()) == self.placed[first])

    def _budgets(self) -> None:
        allowed = {b.name: b.allowed for b in self.problem.budgets}
        disrupted: dict[str, list[Expr]] = defaultdict(list)
        for i, p in enumerate(self.problem.pods):
            if p.pdb in allowed and p.node is not None:
                stay = self.x.get((i, p.node))
                disrupted[p.pdb].append(1 - stay if stay is not None else 1)
        for name, terms in disrupted.items():
            self.m.add(sum(terms) <= max(0, allowed[name]))

    def _for_lower(self) -> None:
        """A pod of a class the policy protects from lower-priority work is moved or evicted only
        when the plan places a pending pod of a higher priority."""
        pods = self.problem.pods
        above: dict[int, cp_model.IntVar] = {}
        for i, p in enumerate(pods):
            if p.node is None or (i, p.node) not in self.x:
                continue
            may_move = self.policy.may_move_for_lower(p)
            if may_move and p.priority in self.policy.evict_for_lower:
                continue
            if p.priority not in above:
                flag = above[p.priority] = self.m.new_bool_var(f"above{p.priority}")
                higher = [self.placed[k] for k, q in enumerate(pods)
                          if not q.running and q.priority > p.priority]
                if higher:
                    self.m.add_max_equality(flag, higher)
                else:
                    self.m.add(flag == 0)
            stay, placed, flag = self.x[i, p.node], self.placed[i], above[p.priority]
            if not may_move:
                self.m.add(placed - stay <= flag)
            if p.priority not in self.policy.evict_for_lower:
                self.m.add(1 - placed <= flag)

    def _priced(self) -> Expr:
        """Value of the pods running after the plan minus the price of its moves and evictions."""
        prices = Prices(self.problem, self.policy)
        terms: list[Expr] = []
        for i, p in enumerate(self.problem.pods):
            terms.append(prices.value[p.priority] * self.placed[i])
            if p.node is None:
                continue
            stay = self.x.get((i, p.node))
            moved = self.placed[i] - stay if stay is not None else self.placed[i]  # None: it cannot stay
            terms.append(-prices.move(p) * moved - prices.evict(p) * (1 - self.placed[i]))
        return sum(terms)

    def _hint(self, placement: dict[str, str | None]) -> None:
        self.m.clear_hints()
        for (i, n), var in self.x.items():
            self.m.add_hint(var, placement.get(self.problem.pods[i].name) == n)

    def _objectives(self) -> list[tuple[str, Expr]]:
        """One stage per tier: placed x W - disruption, W above any disruption, so placing comes
        first and disruption second, exactly the lexicographic pair; then preferences."""
        out: list[tuple[str, Expr]] = []
        for t in tiers(self.problem):
            idx = [i for i, p in enumerate(self.problem.pods) if p.priority >= t]
            weight = MOVE * len(idx) + 1
            expr = weight * sum(self.placed[i] for i in idx) - sum(self.cost[i] for i in idx)
            out.append((f"priority>={t}: placed, then fewest disrupted", expr))
        prefs = [p.preference.get(n, 0) * v for (i, n), v in self.x.items()
                 if (p := self.problem.pods[i]).preference.get(n, 0)]
        if prefs:
            out.append(("network preference", sum(prefs)))
        # among equal answers, disturb the pods that have run the least: a job near its end loses most
        ran = run_seconds(self.problem)
        lost = [ran[p.name] * (1 - self.x[i, p.node]) for i, p in enumerate(self.problem.pods)
                if ran[p.name] and p.node is not None and (i, p.node) in self.x]
        if lost:
            out.append(("least run time thrown away", -sum(lost)))
        return out

    def _tiebreak(self) -> tuple[Expr, int]:
        """Added (below every stage's own objective) so that a stage stopped by the clock still
        prefers answers that place more and disrupt less of everyone: never gratuitous evictions."""
        n = len(self.problem.pods)
        expr = (MOVE * n + 1) * sum(self.placed) - sum(self.cost)
        return expr, (MOVE * n + 1) * n + MOVE * n + 1  # the expression and a bound on its range

    def run(self, deadline: float,
            workers: int) -> tuple[list[dict[str, Any]], dict[str, str | None] | None, bool]:
        if self.policy.priced:
            prefs = [p.preference.get(n, 0) * v for (i, n), v in self.x.items()
                     if (p := self.problem.pods[i]).preference.get(n, 0)]
            objectives: list[tuple[str, Expr]] = [("priced: value placed minus the price of disruption",
                                                   self._priced())]
            if prefs:
                objectives.append(("network preference", sum(prefs)))
            tiebreak: Expr = 0
            scale = 1
        else:
            objectives = self._objectives()
            tiebreak, scale = self._tiebreak()
        stages: list[dict[str, Any]] = []
        answer: dict[str, str | None] | None = None
        proven = True
        for k, (name, expr) in enumerate(objectives):
            left = deadline - time.monotonic()
            if left <= 0.005:
                stages.append({"stage": name, "status": "skipped: budget spent"})
                proven = False
                break
            # earlier stages may use more of what is left; a stage that proves optimal fast
            # leaves the rest to the next ones
            limit = min(left, 2 * left / (len(objectives) - k))
            self.m.maximize(scale * expr + tiebreak)
            solver = cp_model.CpSolver()
            solver.parameters.max_time_in_seconds = limit
            solver.parameters.num_workers = workers
            solver.parameters.relative_gap_limit = 0.0
            t0 = time.monotonic()
            status = solver.solve(self.m)
            stage: dict[str, Any] = {"stage": name, "status": solver.status_name(status),
                     "seconds": round(time.monotonic() - t0, 3)}
            stages.append(stage)
            if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
                proven = False
                break
            value = stage["value"] = solver.value(expr)
            proven = proven and status == cp_model.OPTIMAL
            self.m.add(expr >= value)  # freeze it for later stages
            answer = {p.name: None for p in self.problem.pods}
            for (i, n), var in self.x.items():
                if solver.value(var):
                    answer[self.problem.pods[i].name] = n
            self._hint(answer)
        return stages, answer, proven and answer is not None and not self.restricted
