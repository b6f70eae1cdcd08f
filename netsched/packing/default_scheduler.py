"""An emulation of kube-scheduler's default placement, one pod at a time, no preemption.

Filter: every requested resource fits the node's free room (and the pod's allowed nodes).
Score: NodeResourcesFit LeastAllocated plus NodeResourcesBalancedAllocation over CPU and
memory (the default profile, equal weights); ties go to the first node. This is the baseline
the packer must beat, and the packer's own first answer.
"""

from __future__ import annotations

import statistics

from netsched.packing.snapshot import Node, Pod

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
    balanced = 1 - (statistics.pstdev(fractions) if len(fractions) > 1 else 0.0)
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
