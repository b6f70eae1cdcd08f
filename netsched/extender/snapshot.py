"""What one extender request reads: an immutable snapshot of the cluster and its telemetry.

A request takes one `Snapshot` when it starts and reads nothing else: the node table,
free GPUs and requested CPU/memory per node, where the asked-for job's pods sit, the
active PackingPlans' pins, and the telemetry store as it was at that instant. Nothing
in it changes while the request runs, so the filters and scorers of one request agree.

Node facts that rarely change (topology domains, GPU model, allocatable GPUs) live in a
`NodeTable` of numpy arrays, so scoring 5,000 candidates is vector arithmetic; what is
derived from the table alone (GPU capability features) is computed once per table.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from netsched.api.topology import DEFAULT, Topology
from netsched.extender.pins import Pins
from netsched.extender.protocol import priority_heads
from netsched.models.gpus import gpu_features
from netsched.telemetry.aggregates import LinkAnswer, domain_ids
from netsched.telemetry.store import TelemetrySnapshot

UNKNOWN = -1  # a table index no node has
POSITIONS_KEPT = 16  # candidate lists whose table positions a table remembers
# levels (Topology.path), gpus, gpu_product, gpu_labels, cpu, memory (read_model._node_facts)
NodeFacts = dict[str, Any]
# table indices of candidate names, positions of the known names, positions of the unknown ones
Positions = tuple[np.ndarray, Sequence[int], list[int]]
_NONE = np.zeros(0, dtype=np.int32)


@dataclass(frozen=True)
class NodeTable:
    """Static node facts as arrays indexed like `names`."""

    names: list[str]
    index: dict[str, int]
    allocatable: np.ndarray
    gpu_product: list[str | None]  # the nvidia.com/gpu.product label, for the completion-time model
    gpu_labels: list[dict[str, str]]  # the node's GPU capability labels (labels.GPU_LABELS), the same
    cpu: np.ndarray  # allocatable cores and memory bytes: the model's node load is requests over these
    memory: np.ndarray
    topology: Topology = DEFAULT
    # (depth, nodes) domain ids per level, widest first: equal ids, same domain. A node alone at a level
    # (its label missing) has an id no other node has there.
    domains: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int32))
    domain_names: tuple[list[str | None], ...] = ()  # per level, by id: the label value (None: alone)
    _positions: OrderedDict[str, Positions] = field(default_factory=OrderedDict, repr=False, compare=False)

    @classmethod
    def build(cls, nodes: dict[str, NodeFacts], topology: Topology = DEFAULT) -> NodeTable:
        names = sorted(nodes)
        domains, domain_names = _domains(names, nodes, topology)
        return cls(
            names=names,
            index={n: i for i, n in enumerate(names)},
            allocatable=np.array([nodes[n]["gpus"] for n in names], dtype=np.int32),
            gpu_product=[nodes[n]["gpu_product"] for n in names],
            gpu_labels=[nodes[n].get("gpu_labels") or {} for n in names],
            cpu=np.array([nodes[n]["cpu"] for n in names], dtype=np.float64),
            memory=np.array([nodes[n]["memory"] for n in names], dtype=np.float64),
            topology=topology,
            domains=domains,
            domain_names=domain_names,
        )

    def domain_of(self, i: int, level: str) -> str | None:
        """The name (label value) of node i's domain at a level; None where the node is alone there."""
        k = self.topology.names.index(level)
        return self.domain_names[k][int(self.domains[k, i])]

    def domain_ids(self, level: str, name: str) -> np.ndarray:
        """The ids of the domains at a level with this name: several where wider domains reuse it (rack r1
        of two blocks), none where no node has it."""
        return self._ids_by_name[self.topology.names.index(level)].get(name, _NONE)

    @cached_property
    def _ids_by_name(self) -> list[dict[str, np.ndarray]]:
        found: list[dict[str, list[int]]] = [{} for _ in self.domain_names]
        for by_name, names in zip(found, self.domain_names, strict=True):
            for i, name in enumerate(names):
                if name is not None:
                    by_name.setdefault(name, []).append(i)
        return [{name: np.array(ids, dtype=np.int32) for name, ids in by_name.items()} for by_name in found]

    def positions(self, names: list[str]) -> Positions:
        """Table indices of the names in this table, with the positions in `names` of those it has and
        of those it lacks. kube-scheduler names the same candidates cycle after cycle, so the answer
        is remembered per list: joining and hashing 5,000 names costs a fifth of looking each one up."""
        key = "\n".join(names)  # a node name never holds a newline
        found = self._positions.get(key)
        if found is None:
            found = self._positions[key] = self._look_up(names)
            while len(self._positions) > POSITIONS_KEPT:
                self._positions.popitem(last=False)
        return found

    def _look_up(self, names: list[str]) -> Positions:
        found = list(map(self.index.get, names))
        if None not in found:  # the usual case: one C-speed pass, no per-name Python
            return np.fromiter(found, dtype=np.int64, count=len(found)), range(len(found)), []
        known = [pos for pos, i in enumerate(found) if i is not None]
        unknown = [pos for pos, i in enumerate(found) if i is None]
        return np.array([found[pos] for pos in known], dtype=np.int64), known, unknown

    @cached_property
    def priority_heads(self) -> np.ndarray:
        """Each node's HostPriority JSON up to its score, by table index (protocol.priority_heads)."""
        return priority_heads(self.names)

    @cached_property
    def gpu_capability(self) -> tuple[tuple[str, ...], np.ndarray]:
        """The GPU capability features of every node (names, rows by table index): computed once per
        table, which changes only when nodes do, so a request pays an index, not a table lookup."""
        names = tuple(gpu_features(None))
        rows = [gpu_features(p, labels) for p, labels in zip(self.gpu_product, self.gpu_labels, strict=True)]
        return names, np.array([[r[n] for n in names] for r in rows]).reshape(-1, len(names))


def _domains(names: list[str], nodes: dict[str, NodeFacts],
             topology: Topology) -> tuple[np.ndarray, tuple[list[str | None], ...]]:
    """Domain ids per level (NodeTable.domains) and each id's name."""
    return domain_ids([nodes[n]["levels"] for n in names], topology.depth)


@dataclass(frozen=True)
class Snapshot:
    table: NodeTable
    free: np.ndarray  # free GPUs per table index (a copy: safe to read after the lock)
    peers: tuple[str, ...]  # nodes holding the asked-for job's pods, one entry per pod
    age: float
    stale: bool
    synced: bool
    pins: Pins = Pins()
    requested: np.ndarray | None = None  # CPU cores and memory bytes requested per table index (2 rows)
    telemetry: TelemetrySnapshot | None = None  # None: no telemetry store at all
    held: np.ndarray | None = None  # GPUs per table index held for other jobs' replicas (holds.Hold)
    holders: dict[int, str] = field(default_factory=dict)  # table index -> a job holding GPUs there
    _links: dict[str, LinkAnswer | None] = field(default_factory=dict, repr=False)

    @cached_property
    def unheld_free(self) -> np.ndarray:
        """Free GPUs per table index that no other job's hold keeps."""
        return self.free if self.held is None else np.maximum(self.free - self.held, 0)

    def unheld(self, idx: np.ndarray) -> np.ndarray:
        """Free GPUs of the candidates idx that no other job's hold keeps."""
        free: np.ndarray = self.unheld_free[idx]
        return free

    def links(self, target: str) -> LinkAnswer | None:
        """Bandwidth (Mbit/s) and RTT (ms) from every node (by table index) to target, with where each
        came from: the fresh pair, the reverse pair or a domain aggregate (telemetry.aggregates), NaN
        where none is; None when no node has an answer towards target. Read once per target."""
        if target not in self._links:
            found = None
            if self.telemetry:
                found = self.telemetry.answer(target, self.table.index, self.table.domains)
                found = None if np.isnan(found.bw).all() else found
            self._links[target] = found
        return self._links[target]

    def links_read(self) -> dict[str, LinkAnswer]:
        """The links this request has read so far, by target, those with an answer."""
        return {target: found for target, found in self._links.items() if found is not None}

    def measured(self, idx: np.ndarray, target: str) -> LinkAnswer | None:
        """`links(target)` at the candidates idx."""
        links = self.links(target)
        return None if links is None else links.at(idx)

    def nic(self, idx: np.ndarray) -> np.ndarray:
        """NIC utilisation of the candidates idx, NaN where unknown or stale."""
        if not self.telemetry:
            return np.full(len(idx), np.nan)
        nic: np.ndarray = self.telemetry.nic_aligned(self.table.index, len(self.table.names))[idx]
        return nic

    def domain_free(self, idx: np.ndarray, level: str | None = None) -> np.ndarray:
        """Free GPUs in each candidate's domain at a level (the narrowest unless named; the node's own
        where it is alone there), less those held for other jobs."""
        topology = self.table.topology
        domains = self.table.domains[topology.names.index(level) if level else topology.depth - 1]
        free: np.ndarray = np.bincount(domains, weights=self.unheld_free)[domains[idx]]
        return free
