"""Scorer: closeness to the job's data source, relative to the best a place can offer (for data
"in zone-b", every zone-b node is ideal); by measurement for an endpoint, and half by
measurement for a node that has one."""

from __future__ import annotations

import numpy as np

from netsched.api.distance import DISTANCES
from netsched.extender.locality import distance_levels
from netsched.extender.needs import data_place
from netsched.extender.plugin import Request
from netsched.extender.plugins.peers import measured_quality
from netsched.models.heuristic import CLOSENESS, DATA_WEIGHT, blend


class DataCloseness:
    name = "data"
    weight = DATA_WEIGHT

    def score(self, req: Request, idx: np.ndarray) -> np.ndarray | None:
        needs, snap = req.needs, req.snapshot
        if needs.data_endpoint:
            measured = measured_quality(req, idx, needs.data_endpoint)
            return None if measured is None else np.nan_to_num(measured, nan=0.0)
        place = data_place(needs, snap)
        if place is None:
            return None
        best = min(place.finest, DISTANCES["zone"])  # data nowhere in particular: zone-level is the best
        value: np.ndarray = CLOSENESS[distance_levels(snap.table, idx, place)] / CLOSENESS[best]
        if needs.data_kind != "node" or needs.data_name is None:
            return value
        return blend(value, measured_quality(req, idx, needs.data_name))
