"""The CP-SAT model of a packing problem (`Model`): a variable per pod and candidate node,
capacity, gangs, disruption budgets and the policy's protections as constraints, and its
objectives solved stage by stage within a deadline. Also the candidate nodes per pod
(`candidates`) and the model's size counted without building it (`model_size`).
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from netsched.packing.default_scheduler import free_room
from netsched.packing.objective import EVICT, MOVE, Prices, run_seconds, tiers
from netsched.packing.policy import STRICT, Policy
from netsched.packing.problem import Pod, Problem

Expr = cp_model.LinearExpr | int  # what the model adds up (a constant where a pod cannot be disrupted)


def model_size(problem: Problem, policy: Policy = STRICT) -> int:
    """Placement variables the model will have, at most (counted without building it)."""
    per_pod = len(problem.nodes)
    if policy.priced and policy.candidates is not None:
        per_pod = min(per_pod, policy.candidates + 2)  # the restricted ones, its own node and the hint's
    return sum(1 if p.running and not p.movable else per_pod for p in problem.pods)


def candidates(problem: Problem, policy: Policy, hint: dict[str, str | None],
               stop_at: float = float("inf")) -> tuple[dict[str, list[str]], bool]:
    """Nodes each pod may go to: where it runs, where the hint puts it, and (priced, restricted)
    the `policy.candidates` nodes with the most room it could get (for a pending pod, free room
    plus what lower-priority movable pods hold; for a running pod, free room). Only nodes that
    could hold it alone and that it may use; a running pod may always stay (node affinity is
    IgnoredDuringExecution). Also whether any pod lost a node it could use (then an optimum is
    the restricted model's, not proven for the problem). Vectorised over nodes, the clock checked
    per block of pods: at a thousand nodes and thousands of pods these are millions of fit tests.
    Raises OutOfTime when the clock passes `stop_at`."""
    names = [n.name for n in problem.nodes]
    kinds = sorted({r for n in problem.nodes for r in n.capacity}
                   | {r for p in problem.pods for r in p.requests})
    cap = np.array([[n.capacity.get(r, 0) for r in kinds] for n in problem.nodes], dtype=np.int64)
    need = np.array([[p.requests.get(r, 0) for r in kinds] for p in problem.pods],
                    dtype=np.int64).reshape(len(problem.pods), len(kinds))
    cut = False
    out: dict[str, list[str]] = {}
    limit = policy.candidates if policy.priced else None
    free = _matrix(free_room(problem.nodes, problem.pods), names, kinds) if limit is not None else cap
    reclaim: dict[int, np.ndarray] = {}
    lost: dict[int, np.ndarray] = {}  # per priority, per node: run time lost making room there
    ran = run_seconds(problem) if limit is not None else {}
    for start in range(0, len(problem.pods), BLOCK):
        _check(stop_at)
        block = need[start:start + BLOCK]
        fits = np.asarray(((block[:, None, :] <= cap[None, :, :]) | (block[:, None, :] <= 0)).all(axis=2))
        for k, p in enumerate(problem.pods[start:start + BLOCK]):
            if p.node is not None and not p.movable:
                out[p.name] = [p.node]
                continue
            ok = fits[k] if p.allowed is None else fits[k] & np.isin(names, p.allowed)
            possible = np.flatnonzero(ok)
            if limit is not None and len(possible) > limit:
                cut = True
                if p.running:
                    room, cost = free, np.zeros(len(names), dtype=np.int64)
                else:
                    if p.priority not in reclaim:
                        reclaim[p.priority] = free + _held(problem, names, kinds, p.priority)
                        lost[p.priority] = _run_time_held(problem, names, ran, p.priority)
                    room, cost = reclaim[p.priority], lost[p.priority]
                # most room first; among equals, where making room throws away the least work
                fit = _fit_count(room[possible], block[k])
                possible = possible[np.lexsort((cost[possible], -fit))[:limit]]
            keep = {names[i] for i in possible} | {n for n in (p.node, hint.get(p.name)) if n is not None}
            out[p.name] = [n for n in names if n in keep]
    return out, cut


BLOCK = 256  # pods per fit test block (and clock check)


def _matrix(room: dict[str, dict[str, int]], names: list[str], kinds: list[str]) -> np.ndarray:
    return np.array([[room[n].get(r, 0) for r in kinds] for n in names], dtype=np.int64)


def _run_time_held(problem: Problem, names: list[str], ran: dict[str, int], priority: int) -> np.ndarray:
    """Per node, the run time of the movable pods below `priority` on it: what clearing it would lose."""
    index = {n: i for i, n in enumerate(names)}
    out = np.zeros(len(names), dtype=np.int64)
    for p in problem.pods:
        if p.node is not None and p.movable and p.priority < priority:
            out[index[p.node]] += ran[p.name]
    return out


def _held(problem: Problem, names: list[str], kinds: list[str], priority: int) -> np.ndarray:
    """Per node, what the movable pods below `priority` hold."""
    index = {n: i for i, n in enumerate(names)}
    out = np.zeros((len(names), len(kinds)), dtype=np.int64)
    for p in problem.pods:
        if p.node is not None and p.movable and p.priority < priority:
            out[index[p.node]] += [p.requests.get(r, 0) for r in kinds]
    return out


def _fit_count(room: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Per row of `room`: how many times `want` fits (0 when it asks nothing)."""
    asked = want > 0
    if not asked.any():
        return np.zeros(len(room))
    return np.asarray((room[:, asked] / want[asked]).min(axis=1))


class OutOfTime(Exception):
    """The budget ran out while a model was being built: on a busy machine building is slower."""


def _check(stop_at: float) -> None:
    if time.monotonic() > stop_at:
        raise OutOfTime


class Model:
    def __init__(self, problem: Problem, hint: dict[str, str | None], policy: Policy = STRICT,
                 stop_at: float = float("inf")) -> None:
        """Raises OutOfTime when the clock passes `stop_at` before the model is built."""
        self.problem, self.policy = problem, policy
        m = self.m = cp_model.CpModel()
        self.x: dict[tuple[int, str], cp_model.IntVar] = {}
        self.placed: list[cp_model.IntVar] = []
        self.cost: list[Expr] = []
        where, self.restricted = candidates(problem, policy, hint, stop_at)
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
