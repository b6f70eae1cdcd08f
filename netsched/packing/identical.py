"""Pods placed first, over identical nodes: the priced packer's placement stage.

When every node is alike (same capacity, none singled out by a pod's allowed nodes, a gang's
topology domain, a protected pod or a network preference), which node a pod lands on does not change how many
pods of each priority can run; only the moves it costs. The full model cannot see that: each
packing exists once per permutation of the nodes, and CP-SAT spends the budget among copies.
Here the nodes are interchangeable bins and the copies are cut (the i-th pod, in a fixed order,
goes to one of the first i bins). The bins are then laid onto the real nodes where the pods
that already run there are worth the most, and the priced model takes the result as its hint,
to choose the cheapest moves among the placements it keeps.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable

from ortools.sat.python import cp_model

from netsched.packing.policy import Policy
from netsched.packing.problem import Pod, Problem


def applies(problem: Problem, policy: Policy) -> bool:
    """Nodes interchangeable and the objective placements first (the priced default's values);
    disruption rules this model cannot see (budgets, classes that may not move, domains) rule it out.
    Node labels are not compared: the problem reads them only for gang domains, ruled out below, and
    every live node has labels of its own (its hostname), so comparing them would rule out every
    live cluster."""
    if not (policy.priced and policy.identical and policy.values is None):
        return False
    if len(problem.nodes) < 2 or problem.budgets:
        return False
    first = problem.nodes[0]
    if any(n.capacity != first.capacity for n in problem.nodes):
        return False
    # the model lets any running pod move for any work: true when the policy lets each of them
    return not any((p.running and not (p.movable and policy.may_move_for_lower(p))) or p.allowed is not None
                   or p.preference or (p.gang and p.domain) for p in problem.pods)


def size(problem: Problem) -> int:
    """Placement variables the model has: pod i (in its order) may use the first i bins."""
    n = len(problem.nodes)
    return sum(min(i + 1, n) for i in range(len(problem.pods)))


def place(problem: Problem, policy: Policy, hint: dict[str, str | None], stay: Callable[[str], int],
          deadline: float, workers: int) -> tuple[dict[str, str | None] | None, bool]:
    """The most pods placed, by priority class highest first (lexicographically), with the
    policy's eviction rules; laid onto the nodes so that the pods that stay are worth the most
    (`stay(pod)`: what moving it would cost). Also whether the placement counts are proven optimal.
    None when no answer was found by the deadline (building the model counts)."""
    cap = problem.nodes[0].capacity
    pods = sorted(problem.pods, key=lambda p: (
        -p.priority, -sum(v / cap[r] for r, v in p.requests.items() if cap.get(r)), p.name))
    bins = len(problem.nodes)
    m = cp_model.CpModel()
    x: dict[tuple[int, int], cp_model.IntVar] = {}
    placed = []
    for i, p in enumerate(pods):
        if i % 64 == 0 and time.monotonic() > deadline:  # building is slow on a busy machine
            return None, False
        if any(v > cap.get(r, 0) for r, v in p.requests.items()):
            placed.append(m.new_constant(0))
            continue
        here = [x.setdefault((i, b), m.new_bool_var(f"x{i}_{b}")) for b in range(min(i + 1, bins))]
        placed.append(m.new_bool_var(f"placed{i}"))
        m.add(sum(here) == placed[-1])
    for b in range(bins):
        for r, c in cap.items():
            terms = [p.requests[r] * x[i, b] for i, p in enumerate(pods) if (i, b) in x and p.requests.get(r)]
            if terms:
                m.add(sum(terms) <= c)
    gangs: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(pods):
        if p.gang:
            gangs[p.gang].append(i)
    for idx in gangs.values():
        for i in idx[1:]:
            m.add(placed[i] == placed[idx[0]])
    _evictions(m, pods, placed, policy)
    if time.monotonic() > deadline:
        return None, False
    weight, total = {}, 1
    for t in sorted({p.priority for p in pods}):
        weight[t] = total
        total *= 1 + sum(p.priority == t for p in pods)
    m.maximize(sum(weight[p.priority] * placed[i] for i, p in enumerate(pods)))
    _hint(m, x, placed, pods, hint)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.0, deadline - time.monotonic())
    solver.parameters.num_workers = workers
    # presolve costs most of a second on this model and gains little: the hint is a full packing
    solver.parameters.cp_model_presolve = False
    status = solver.solve(m)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, False
    content: dict[int, list[int]] = defaultdict(list)
    for (i, b), var in x.items():
        if solver.value(var):
            content[b].append(i)
    nodes = _lay(problem, pods, content, stay)
    answer: dict[str, str | None] = {p.name: None for p in pods}
    for b, members in content.items():
        for i in members:
            answer[pods[i].name] = nodes[b]
    return answer, status == cp_model.OPTIMAL


def _evictions(m: cp_model.CpModel, pods: list[Pod], placed: list[cp_model.IntVar], policy: Policy) -> None:
    """A running pod stops only for a pending pod of higher priority that the plan places
    (or when its class may be evicted for lower work)."""
    above: dict[int, cp_model.IntVar] = {}
    for i, p in enumerate(pods):
        if not p.running or p.priority in policy.evict_for_lower:
            continue
        if p.priority not in above:
            flag = above[p.priority] = m.new_bool_var(f"above{p.priority}")
            higher = [placed[k] for k, q in enumerate(pods) if not q.running and q.priority > p.priority]
            if higher:
                m.add_max_equality(flag, higher)
            else:
                m.add(flag == 0)
        m.add(1 - placed[i] <= above[p.priority])


def _hint(m: cp_model.CpModel, x: dict[tuple[int, int], cp_model.IntVar], placed: list[cp_model.IntVar],
          pods: list[Pod], hint: dict[str, str | None]) -> None:
    """The hint's placement with its nodes renumbered to satisfy the cut: bins in the order of
    the first pod each holds, so pod i is always in one of the first i bins."""
    rank: dict[str, int] = {}
    for p in pods:
        node = hint.get(p.name)
        if node is not None and node not in rank:
            rank[node] = len(rank)
    for (i, b), var in x.items():
        node = hint.get(pods[i].name)
        m.add_hint(var, node is not None and rank[node] == b)
    for i, p in enumerate(pods):
        if (i, 0) in x:
            m.add_hint(placed[i], hint.get(p.name) is not None)


def _lay(problem: Problem, pods: list[Pod], content: dict[int, list[int]],
         stay: Callable[[str], int]) -> dict[int, str]:
    """Bin -> node, greedily by what stays: the pair whose pods already run there and are worth
    the most first (a bin with nothing running takes a node left over)."""
    worth: dict[tuple[int, str], int] = defaultdict(int)
    for b, members in content.items():
        for i in members:
            if (node := pods[i].node) is not None:
                worth[b, node] += stay(pods[i].name)
    out: dict[int, str] = {}
    used: set[str] = set()
    for (b, node), _ in sorted(worth.items(), key=lambda kv: -kv[1]):
        if b not in out and node not in used:
            out[b] = node
            used.add(node)
    spare = iter(n.name for n in problem.nodes if n.name not in used)
    for b in sorted(content):
        if b not in out:
            out[b] = next(spare)
    return out
