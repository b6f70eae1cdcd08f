"""The greedy answers that hint the models: pending pods into free room, nothing moving
(`greedy`), and the repair that also makes room by moving running pods or preempting as
kube-scheduler would (`repair`).
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import replace

import numpy as np

from netsched.packing.default_scheduler import free_room, preemption
from netsched.packing.policy import PRICED, Policy
from netsched.packing.problem import Node, Pod, Problem, current
from netsched.packing.room import Room, domains


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
    any_mobile = any(policy.may_move_for_lower(p) for p in movable.pods)  # some pod moves for its equals
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
            if all(_repair_one(problem, nodes, movable, trial, used, pod, policy, at_home, room, any_mobile)
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
                at_home: dict[str, list[Pod]], free: Room, any_mobile: bool = True) -> bool:
    """Place `pod` on one of `nodes`, by moves or preempting there if it must; others may go anywhere.
    `free` (the room `placement` leaves) is updated with it. A lone pod that cannot be placed
    changes nothing."""
    node = free.schedule(nodes, [pod])[pod.name]
    if node is not None:
        placement[pod.name] = node
        return True
    if _make_room_by_moves(problem, nodes, at_home, placement, spent, pod, policy, free, any_mobile):
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
                        free: Room, any_mobile: bool = True) -> bool:
    """Defragment: on the few nodes closest to fitting `pod` (the least missing, in shares of each
    node's capacity), move running pods (largest first,
    each still where it started) into free room on other nodes (the tightest fit) until `pod`
    fits; only when every one of them finds a place, so nothing stops running. Vectorised over
    nodes: at a thousand nodes this runs once per pending pod."""
    names, index, room, capacity = free.names, free.index, free.matrix, free.capacity
    scale = 1.0 / np.maximum(capacity, 1)
    need = free.need
    want = need(pod)
    usable = free.usable(nodes, pod) & (capacity >= want).all(axis=1)
    # what is missing in shares of the node: in raw units a MiB or a millicore short would weigh as
    # much as a whole GPU short, and memory would decide which nodes are tried
    missing = (np.maximum(0, want - room) * scale).sum(axis=1)
    if free.held is not None and not any_mobile:
        # only lower-priority pods may make way: a node where even they all gone leave too little is
        # no try (at a thousand nodes, the nearest misses are often nodes full of its equals)
        lower = [k for k, q in enumerate(free.priorities) if q < pod.priority]
        could = room + free.held[lower].sum(axis=0) if lower else room
        usable &= (could >= want).all(axis=1)
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
