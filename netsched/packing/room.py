"""Free room per node as a matrix (`Room`), and the node sets a gang may use (`domains`): what
the greedy fill and the repair look for room in.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from netsched.packing.default_scheduler import schedule
from netsched.packing.problem import Node, Pod, Problem


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
