"""How far candidate nodes are from a place: a peer's node, a data source's rack or zone.

Distance levels (netsched.api.distance): 0 same node, 1 same rack, 2 same zone, 3 farther.
Computed for all candidates at once from the node table's arrays.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from netsched.api.distance import DISTANCES, FAR, LIMITS
from netsched.extender.plugin import InvalidNeeds
from netsched.extender.snapshot import UNKNOWN, NodeTable


@dataclass(frozen=True)
class Place:
    node: int = UNKNOWN  # table index
    rack: int = UNKNOWN
    zone: int = UNKNOWN
    label: str = ""  # for messages: "node gpu-a1-0", "rack rack-a1", "zone zone-b"

    @classmethod
    def of_node(cls, table: NodeTable, i: int) -> Place:
        return cls(i, int(table.rack[i]), int(table.zone[i]), f"node {table.names[i]}")

    @property
    def finest(self) -> int:
        """The shortest distance a node can be from this place."""
        for level, known in (("node", self.node), ("rack", self.rack), ("zone", self.zone)):
            if known != UNKNOWN:
                return DISTANCES[level]
        return FAR


def distance_levels(table: NodeTable, idx: np.ndarray, place: Place) -> np.ndarray:
    levels = np.full(len(idx), FAR, dtype=np.int8)
    if place.zone != UNKNOWN:
        levels[table.zone[idx] == place.zone] = DISTANCES["zone"]
    if place.rack != UNKNOWN:
        levels[table.rack[idx] == place.rack] = DISTANCES["rack"]
    if place.node != UNKNOWN:
        levels[idx == place.node] = DISTANCES["node"]
    return levels


def place_of(table: NodeTable, kind: str, name: str) -> Place | None:
    """A data source's place by node, rack or zone name; None when the cluster has no such thing."""
    if kind == "node":
        i = table.index.get(name)
        return None if i is None else Place.of_node(table, i)
    if kind == "rack":
        if name not in table.rack_names:
            return None
        rack = table.rack_names.index(name)
        zones = table.zone[table.rack == rack]
        return Place(rack=rack, zone=int(zones[0]) if len(zones) else UNKNOWN, label=f"rack {name}")
    if kind == "zone":
        return None if name not in table.zone_names else Place(
            zone=table.zone_names.index(name), label=f"zone {name}")
    return None


def distance_annotation(annotations: Mapping[str, str], key: str) -> str | None:
    """A node, rack or zone distance annotation (max-peer-distance, max-data-distance), None if unset."""
    value = annotations.get(key)
    if value is not None and value not in LIMITS:
        raise InvalidNeeds(f"annotation {key}={value!r} must be one of {', '.join(LIMITS)}")
    return value
