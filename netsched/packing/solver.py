"""The packer's top-level search (`solve`) and its answer (`Plan`): room for higher-priority pods,
with the fewest pods moved or evicted. It weighs the current placement, the greedy answers
(`repair`), the pods added by moves and swaps (`swaps`), the placements over identical nodes
(`identical`) and the CP-SAT model's (`cpsat_model`, or in pieces: `pieces`), each rated by the
policy's objective (`objective`).

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
from dataclasses import dataclass, field
from typing import Any, TypedDict

from netsched.packing import identical, swaps
from netsched.packing.cpsat_model import Model, OutOfTime, model_size
from netsched.packing.objective import PRICE_UNIT, Prices, score
from netsched.packing.pieces import neighbourhoods
from netsched.packing.policy import STRICT, Policy
from netsched.packing.problem import Problem, current
from netsched.packing.repair import greedy, repair

VARS_PER_SECOND = 10000
SWAPS_SHARE = 0.4  # of what is left, at most, for adding pending pods by moves and swaps (`swaps`)
IDENTICAL_SHARE = 0.5  # of what is left then, for the placements over identical nodes (the rest prices them)
SWAP_CELLS_PER_SECOND = 10_000_000  # pod x node fit tests the swaps' set-up makes a second, busy machine
SWAP_SETUP_SHARE = 0.25  # of what is left, at most, for that set-up in a problem solved in pieces
MAX_VARS = 20000  # placement variables one model may have; larger problems are solved in pieces


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
    stages = []
    # the pods the policy lets move for any work, outside every disruption budget
    mobile = {p.name for p in problem.pods if policy.priced and policy.repair and p.running
              and p.movable and p.pdb is None and policy.may_move_for_lower(p)}
    left = deadline - time.monotonic()
    # first, where it fits the time: a model, whole or in pieces, finds such chains of moves far more
    # slowly. Its set-up (a fit test per pod and node, not clock-checked) takes a quarter of a second at
    # 1,000 nodes x 10,000 pods: too large for the budget left, the pieces get the time instead.
    cells = len(problem.pods) * len(problem.nodes)
    if mobile and any(hint[p.name] is None for p in problem.pods) and (
            whole or cells <= SWAP_CELLS_PER_SECOND * SWAP_SETUP_SHARE * left):
        stage, added = _swaps(problem, mobile, hint, time.monotonic() + SWAPS_SHARE * left)
        stages.append(stage)
        options.append((rate(added), "solver", added))
        hint = max(options, key=lambda o: o[0])[2]
    if whole:
        left = deadline - time.monotonic()
        if (identical.applies(problem, policy) and any(hint[p.name] is None for p in problem.pods)
                and identical.size(problem) <= IDENTICAL_SHARE * VARS_PER_SECOND * left):
            stage, found = _placements_first(problem, policy, hint, deadline, workers)
            stages.append(stage)
            if found is not None:
                options.append((rate(found), "solver", found))
                hint = max(options, key=lambda o: o[0])[2]
        try:
            more, answer, proven = Model(problem, hint, policy, deadline).run(deadline, workers)
        except OutOfTime:
            more, answer, proven = [{"stage": "the model", "status": "skipped: budget spent"}], None, False
        stages += more
    else:
        more, answer = neighbourhoods(problem, hint, deadline, workers, max_vars, policy)
        stages += more
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
