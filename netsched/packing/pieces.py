"""Problems too large for one model, solved piece by piece (`neighbourhoods`): the
highest-priority pending pods with the nodes where room could be made for them, each piece one
small exact model, kept when it is better.
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from dataclasses import replace
from typing import Any

from netsched.packing.cpsat_model import Model, OutOfTime
from netsched.packing.objective import score
from netsched.packing.policy import STRICT, Policy
from netsched.packing.problem import Node, Pod, Problem, current

PIECE_PENDING = 8  # pending pods per piece: small pieces solve exactly within a fraction of a second


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
        nodes = _roomiest(problem, working, seeds, size, policy)
        names = {n.name for n in nodes}
        members = [replace(p, node=working[p.name]) for p in problem.pods if working[p.name] in names]
        # a seed the start took off its node (evicted) enters as pending: with it running at home
        # beside the pod that took its room, and neither allowed to make way, the piece had no
        # solution. Its eviction is the start's, priced when the whole answer is rated.
        members += [replace(p, node=None) for p in seeds]
        piece = Problem(tuple(nodes), tuple(members), problem.budgets, problem.taken)
        piece_deadline = min(deadline, t0 + max(0.1, (deadline - t0) / 2))
        try:
            model = Model(piece, current(piece), policy, piece_deadline)
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
              max_vars: int, policy: Policy = STRICT) -> list[Node]:
    """The nodes where room could be made for the seeds, taken alternately from two rankings: the
    most room the first seed could get (free, plus what the pods that may make way for it hold), and
    the most free room (where those pods can go: moves only shift room, so the piece's free room must
    hold the seeds). Enough nodes that both hold the seeds one and a half times over, within the size.
    Room is compared in shares of each node's capacity, never in raw units."""
    top = max(p.priority for p in seeds)
    free = {n.name: dict(n.capacity) for n in problem.nodes}
    held: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    per_node: dict[str, int] = defaultdict(int)
    for p in problem.pods:
        node = working[p.name]
        if node is not None:
            per_node[node] += 1
            for r, v in p.requests.items():
                free[node][r] = free[node].get(r, 0) - v
                if _makes_way(p, top, policy):
                    held[node][r] += v
    want = seeds[0].requests
    asked = {r: sum(p.requests.get(r, 0) for p in seeds) for r in {r for p in seeds for r in p.requests}}
    asked = {r: v for r, v in asked.items() if v > 0}

    def fit_count(n: Node) -> float:
        return min(((free[n.name].get(r, 0) + held[n.name][r]) / v for r, v in want.items() if v > 0),
                   default=0.0)

    def free_share(n: Node) -> float:
        return sum(max(0, free[n.name].get(r, 0)) / max(1, n.capacity.get(r, 0)) for r in asked)

    by_room = sorted((n for n in problem.nodes if fit_count(n) >= 1), key=fit_count, reverse=True)
    by_free = sorted((n for n in problem.nodes if free_share(n) > 0), key=free_share, reverse=True)
    order = [n for pair in itertools.zip_longest(by_room, by_free) for n in pair if n is not None]
    chosen: list[Node] = []
    seen: set[str] = set()
    pods, room_for = len(seeds), 0.0
    gathered: dict[str, int] = defaultdict(int)
    for n in order:
        if n.name in seen:
            continue
        if chosen and ((pods + per_node[n.name]) * (len(chosen) + 1) > max_vars
                       or (room_for >= 1.5 * len(seeds)
                           and all(gathered[r] >= 1.5 * v for r, v in asked.items()))):
            break
        seen.add(n.name)
        chosen.append(n)
        pods += per_node[n.name]
        room_for += fit_count(n)
        for r in asked:
            gathered[r] += max(0, free[n.name].get(r, 0))
    return chosen


def _makes_way(p: Pod, top: int, policy: Policy) -> bool:
    """May `p` be moved or evicted for pods of priority `top`? Below it, if it is movable; at or above
    it, priced, as the policy lets it move for lower work; strict, at its own priority (its tier's
    placements come first)."""
    if not p.movable:
        return False
    if p.priority < top:
        return True
    return policy.may_move_for_lower(p) if policy.priced else p.priority == top
