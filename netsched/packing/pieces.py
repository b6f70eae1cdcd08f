"""Problems too large for one model, solved piece by piece (`neighbourhoods`): the
highest-priority pending pods with the nodes where room could be made for them, each piece one
small exact model, kept when it is better.
"""

from __future__ import annotations

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
