"""How close candidate nodes are to a place: a peer's node, a data source's rack or zone.

Closeness levels: 3 same node, 2 same rack, 1 same zone, 0 elsewhere. Computed for
all candidates at once from the node table's arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netsched.extender.snapshot import UNKNOWN, NodeTable

LEVELS = {"node": 3, "rack": 2, "zone": 1, "any": 0}


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
        """The closest level this place can be matched at."""
        return 3 if self.node != UNKNOWN else 2 if self.rack != UNKNOWN else 1 if self.zone != UNKNOWN else 0


def closeness_levels(table: NodeTable, idx: np.ndarray, place: Place) -> np.ndarray:
    levels = np.zeros(len(idx), dtype=np.int8)
    if place.zone != UNKNOWN:
        levels[table.zone[idx] == place.zone] = 1
    if place.rack != UNKNOWN:
        levels[table.rack[idx] == place.rack] = 2
    if place.node != UNKNOWN:
        levels[idx == place.node] = 3
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
