"""What a placement is worth under a policy, higher is better: the strict policy's tuple per
priority tier (`score`) and the priced policy's points (`Prices`), with the run time a restart
throws away (`run_seconds`). Every answer the packer weighs is rated here, the current placement
included.
"""

from __future__ import annotations

import time

from netsched.packing.policy import STRICT, Policy
from netsched.packing.problem import Pod, Problem

MOVE, EVICT = 2, 1  # the strict policy's disruption of a pod: stay 0, evict 1, move 2


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
