"""How far candidate nodes are from a place: a peer's node, or a data source's domain at a topology level.

Distances are the configured topology's (netsched.api.topology): 0 the same node, k when the narrowest
level shared is the k-th narrowest, `far` when none is. Computed for all candidates at once from the
node table's domain ids.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netsched.api.topology import NODE, Topology
from netsched.extender.snapshot import UNKNOWN, NodeTable


@dataclass(frozen=True, eq=False)
class Place:
    within: tuple[np.ndarray, ...]  # per level, widest first: ids of the place's domains (empty: none)
    node: int = UNKNOWN  # table index, when the place is a node
    label: str = ""  # for messages: "node gpu-a1-0", "rack rack-a1"

    @classmethod
    def of_node(cls, table: NodeTable, i: int) -> Place:
        return cls(tuple(table.domains[:, i:i + 1]), i, f"node {table.names[i]}")

    def finest(self, topology: Topology) -> int:
        """The shortest distance a node can be from this place."""
        if self.node != UNKNOWN:
            return 0
        inside = [k for k, ids in enumerate(self.within) if len(ids)]
        return topology.depth - inside[-1] if inside else topology.far


def distance_levels(table: NodeTable, idx: np.ndarray, place: Place) -> np.ndarray:
    """Each candidate's distance from the place: the narrowest level they share."""
    topology = table.topology
    levels = np.full(len(idx), topology.far, dtype=np.int8)
    for k, ids in enumerate(place.within):  # widest first: a narrower level shared overwrites a wider
        if len(ids):
            at = table.domains[k, idx]
            levels[at == ids[0] if len(ids) == 1 else np.isin(at, ids)] = topology.depth - k
    if place.node != UNKNOWN:
        levels[idx == place.node] = 0
    return levels


def model_distances(topology: Topology, distances: np.ndarray) -> np.ndarray:
    """Distances on the completion-time model's fixed scale (Topology.model_scale), whatever the depth."""
    scale = np.array([topology.model_scale(d) for d in range(topology.far + 1)])
    on_scale: np.ndarray = scale[np.asarray(distances, dtype=np.int64)]
    return on_scale


def place_of(table: NodeTable, kind: str, name: str) -> Place | None:
    """A data source's place by node or by a level's domain name; None when the cluster has no such
    thing. A domain name that wider domains share (rack r1 of two blocks) is each of them."""
    if kind == NODE:
        i = table.index.get(name)
        return None if i is None else Place.of_node(table, i)
    topology = table.topology
    if kind not in topology.names:
        return None
    k = topology.names.index(kind)
    ids = table.domain_ids(kind, name)
    if not len(ids):
        return None
    members = np.isin(table.domains[k], ids)
    within = tuple(np.unique(table.domains[j, members]) if j < k else ids if j == k else ids[:0]
                   for j in range(topology.depth))
    return Place(within, label=f"{kind} {name}")
