"""An emulation of kube-scheduler's default profile: the baseline the packer must beat.

Filter: every requested resource fits the node's free room (and the pod's allowed nodes).
Score: NodeResourcesFit LeastAllocated plus NodeResourcesBalancedAllocation over CPU and
memory (the default profile, equal weights); ties go to the first node (`schedule`, one pod
at a time, also the packer's own greedy fill). Queue and preemption: pods by priority, and a
pod that fits nowhere evicts the fewest, lowest-priority pods that make it fit
(`preemptive_schedule`, what the benchmark's scenarios start from).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import defaultdict

from netsched.packing.problem import Node, Pod, Problem

SCORED = ("cpu", "memory")


def fits(free: dict[str, int], pod: Pod) -> bool:
    return all(free.get(r, 0) >= v for r, v in pod.requests.items() if v > 0)


def free_room(nodes: tuple[Node, ...], pods: tuple[Pod, ...] | list[Pod],
              placement: dict[str, str | None] | None = None) -> dict[str, dict[str, int]]:
    """Node -> resources not requested by the pods placed on it."""
    free = {n.name: dict(n.capacity) for n in nodes}
    for p in pods:
        node = placement.get(p.name) if placement is not None else p.node
        if node is not None:
            room = free[node]
            for r, v in p.requests.items():
                room[r] = room.get(r, 0) - v
    return free


def _score(node: Node, free: dict[str, int], pod: Pod) -> float:
    fractions = []
    for r in SCORED:
        cap = node.capacity.get(r, 0)
        if cap > 0:
            fractions.append((cap - free.get(r, 0) + pod.requests.get(r, 0)) / cap)  # used after placing
    if not fractions:
        return 0.0
    least_allocated = sum(1 - f for f in fractions) / len(fractions)
    mean = sum(fractions) / len(fractions)  # the population standard deviation, in floats (fast)
    balanced = 1 - math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return least_allocated + balanced


def schedule(nodes: tuple[Node, ...], free: dict[str, dict[str, int]],
             pods: list[Pod]) -> dict[str, str | None]:
    """Place `pods` in the given order into `free` (updated in place); pod -> node or None."""
    out: dict[str, str | None] = {}
    for pod in pods:
        best, best_score = None, -1.0
        for node in nodes:
            room = free[node.name]
            if (pod.allowed is None or node.name in pod.allowed) and fits(room, pod):
                score = _score(node, room, pod)
                if score > best_score:
                    best, best_score = node, score
        out[pod.name] = best.name if best else None
        if best is not None:
            for r, v in pod.requests.items():
                free[best.name][r] = free[best.name].get(r, 0) - v
    return out


def preemptive_schedule(problem: Problem) -> dict[str, str | None]:
    """kube-scheduler started after every pod exists: running pods stay; the pending ones queue
    by priority, then arrival (the problem's order); each goes where `schedule` would put it, or, when
    it fits nowhere, preempts (DefaultPreemption's PostFilter, `preemption`). A victim is
    recreated by its controller and queues again behind its priority; pods left unschedulable
    are retried after an eviction (when they fit the room it left). Gangs are not known to it:
    each pod is on its own."""
    placement: dict[str, str | None] = {p.name: p.node for p in problem.pods}
    free = free_room(problem.nodes, problem.pods)
    allowed = {b.name: b.allowed for b in problem.budgets}
    arrival = itertools.count()
    queue = [(-p.priority, next(arrival), p) for p in problem.pods if not p.running]
    heapq.heapify(queue)
    waiting: list[Pod] = []
    while queue:
        pod = heapq.heappop(queue)[2]
        node = schedule(problem.nodes, free, [pod])[pod.name]
        if node is None:
            found = preemption(problem, placement, free, allowed, pod)
            if found is None:
                waiting.append(pod)
                continue
            node, victims = found
            for v in victims:
                placement[v.name] = None
                _give_back(free[node], v)
                if v.pdb in allowed:
                    allowed[v.pdb] -= 1
                heapq.heappush(queue, (-v.priority, next(arrival), v))
            for r, need in pod.requests.items():
                free[node][r] = free[node].get(r, 0) - need
            # room was freed: the unschedulable pods go back to the queue. Only the ones that fit
            # what the preemptor left can now be placed (every other node is as it was, and this
            # one holds a pod at least as important as the victims), so only they are retried.
            back = [w for w in waiting if (w.allowed is None or node in w.allowed) and fits(free[node], w)]
            waiting = [w for w in waiting if w not in back]
            for w in back:
                heapq.heappush(queue, (-w.priority, next(arrival), w))
        placement[pod.name] = node
    return placement


def preemption(problem: Problem, placement: dict[str, str | None], free: dict[str, dict[str, int]],
               allowed: dict[str, int], pod: Pod) -> tuple[str, list[Pod]] | None:
    """The node and victims kube-scheduler's DefaultPreemption picks for `pod`, or None.

    On each node: remove every lower-priority pod; if `pod` then fits, reprieve them, most
    important first (higher priority, then earlier start), those whose eviction would break
    their PodDisruptionBudget before the others, keeping each one that still leaves room.
    Among the nodes: fewest budget violations, then the lowest highest-priority victim, then the
    fewest victims, then the smallest sum of their priorities, then the first node."""
    on_node: dict[str, list[Pod]] = defaultdict(list)
    for p in problem.pods:
        if (where := placement.get(p.name)) is not None and p.priority < pod.priority:
            on_node[where].append(p)
    best: tuple[tuple[int, int, int, int], str, list[Pod]] | None = None
    for node in problem.nodes:
        if pod.allowed is not None and node.name not in pod.allowed or not on_node[node.name]:
            continue
        room = dict(free[node.name])
        for v in on_node[node.name]:
            _give_back(room, v)
        if not fits(room, pod):
            continue
        left = dict(allowed)
        violating, other = [], []
        for v in sorted(on_node[node.name], key=lambda v: (-v.priority, v.started or 0.0)):
            if v.pdb in left:
                left[v.pdb] -= 1
                if left[v.pdb] < 0:
                    violating.append(v)
                    continue
            other.append(v)
        victims, violations = [], 0
        for group, breaks in ((violating, 1), (other, 0)):
            for v in group:
                trial = {r: room.get(r, 0) - v.requests.get(r, 0) for r in set(room) | set(v.requests)}
                if fits(trial, pod):
                    room = trial
                else:
                    victims.append(v)
                    violations += breaks
        key = (violations, max(v.priority for v in victims), len(victims), sum(v.priority for v in victims))
        if best is None or key < best[0]:
            best = (key, node.name, victims)
    return (best[1], best[2]) if best is not None else None


def _give_back(room: dict[str, int], pod: Pod) -> None:
    for r, v in pod.requests.items():
        room[r] = room.get(r, 0) + v
