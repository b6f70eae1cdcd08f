"""The packing problem, what the packer solves over: nodes, pods (running and pending),
PodDisruptionBudgets.

Pure data, read from and written to JSON (the snapshot file `netsched pack` reads), so a
live cluster read for the packer, a benchmark scenario and a test case are the same thing.
Resources are integers in their smallest unit (CPU millicores, memory bytes, GPUs, any
extended resource).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Node:
    name: str
    capacity: dict[str, int]  # allocatable
    labels: dict[str, str] = field(default_factory=dict)

    def domain(self, label: str) -> str:
        """The node's value of a topology label; a node without it is a domain of its own."""
        return self.labels.get(label, self.name)


@dataclass(frozen=True)
class Pod:
    name: str  # namespace/name
    requests: dict[str, int]
    priority: int = 0
    node: str | None = None  # where it runs now; None = pending
    movable: bool = True  # False: protected, it stays where it is
    gang: str | None = None  # pods of one gang are placed all together or not at all
    pdb: str | None = None  # the PodDisruptionBudget that covers it
    allowed: tuple[str, ...] | None = None  # nodes its selector/affinity allows; None = any
    preference: dict[str, int] = field(default_factory=dict)  # node -> 0..10 (network score), last tier
    started: float | None = None  # when it started running (Unix seconds); None = unknown or pending
    domain: str | None = None  # node label its whole gang must share (node, rack or zone); None = any
    priority_class: str | None = None  # its PriorityClass's name, for policies written by class
    stateless: bool = False  # a replica its controller recreates with no work lost (a ReplicaSet's)

    @property
    def running(self) -> bool:
        return self.node is not None


@dataclass(frozen=True)
class Budget:
    """A PodDisruptionBudget: at most `allowed` of its pods may be evicted or moved."""
    name: str
    allowed: int


@dataclass(frozen=True)
class Problem:
    nodes: tuple[Node, ...]
    pods: tuple[Pod, ...]
    budgets: tuple[Budget, ...] = ()
    taken: float | None = None  # when (Unix seconds), for pods' run times; None = now

    def to_json(self) -> dict[str, Any]:
        return {"nodes": [asdict(n) for n in self.nodes], "pods": [asdict(p) for p in self.pods],
                "budgets": [asdict(b) for b in self.budgets], "taken": self.taken}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Problem:
        """Read a snapshot file's document; a missing or mistyped field raises ValueError naming it."""
        try:
            nodes = tuple(Node(n["name"], _resources(n["capacity"], f"node {n['name']}"),
                               dict(n.get("labels") or {})) for n in doc["nodes"])
            pods = tuple(_pod(p) for p in doc["pods"])
            budgets = tuple(Budget(b["name"], int(b["allowed"])) for b in doc.get("budgets") or ())
        except KeyError as exc:
            raise ValueError(f"snapshot: missing field {exc}") from exc
        except (TypeError, AttributeError) as exc:
            raise ValueError(f"snapshot: malformed entry: {exc}") from exc
        names = {n.name for n in nodes}
        for p in pods:
            if p.node is not None and p.node not in names:
                raise ValueError(f"snapshot: pod {p.name} runs on unknown node {p.node!r}")
        taken = doc.get("taken")
        return cls(nodes, pods, budgets, float(taken) if taken is not None else None)


def _resources(value: dict[str, Any], where: str) -> dict[str, int]:
    if not isinstance(value, dict):
        raise ValueError(f"snapshot: {where}: resources must be an object of integers")
    try:
        return {k: int(v) for k, v in value.items()}
    except (TypeError, ValueError) as exc:
        raise ValueError(f"snapshot: {where}: resources must be integers ({exc})") from exc


def _pod(p: dict[str, Any]) -> Pod:
    allowed = p.get("allowed")
    return Pod(p["name"], _resources(p["requests"], f"pod {p['name']}"), int(p.get("priority", 0)),
               p.get("node"), bool(p.get("movable", True)), p.get("gang"), p.get("pdb"),
               tuple(allowed) if allowed is not None else None,
               {k: int(v) for k, v in (p.get("preference") or {}).items()},
               float(p["started"]) if p.get("started") is not None else None, p.get("domain"),
               p.get("priority_class"), bool(p.get("stateless", False)))


def current(problem: Problem) -> dict[str, str | None]:
    """The placement as it stands: each pod on the node it runs on, None while pending."""
    return {p.name: p.node for p in problem.pods}
