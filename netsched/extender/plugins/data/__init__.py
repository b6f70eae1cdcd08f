"""Scorer: closeness to the job's data source, relative to the best a place can offer (for data
"in zone-b", every zone-b node is ideal; data in a narrower domain is best on its own nodes, and
never asks for more than its widest level); by measurement for an endpoint, and half by measurement
for a node that has one."""

from __future__ import annotations

import numpy as np

from netsched.extender.locality import distance_levels
from netsched.extender.plugin import Request, Scorer
from netsched.extender.plugins.data.annotation import data_source
from netsched.extender.plugins.peers import measured_quality
from netsched.models.heuristic import blend, closeness

WEIGHT = 0.3  # of the network value: closeness to the job's data (the peers' part is the rest)


class DataCloseness(Scorer):
    name = "data"
    weight = WEIGHT
    reads = (data_source,)

    def score(self, req: Request, idx: np.ndarray) -> np.ndarray | None:
        source, snap = req.need(data_source), req.snapshot
        if source is None:
            return None
        if source.endpoint:
            measured = measured_quality(req, idx, source.endpoint)
            return None if measured is None else np.nan_to_num(measured, nan=0.0)
        place = source.place(snap.table)
        if place is None:
            return None
        topology = snap.table.topology
        best = min(place.finest(topology), topology.depth)
        near = closeness(np.array([best, *distance_levels(snap.table, idx, place)]), topology)
        value: np.ndarray = near[1:] / near[0]
        if source.kind != "node":
            return value
        return blend(value, measured_quality(req, idx, source.name))
