"""Filter: the node within `netsched.io/max-data-distance` (node or a topology level) of the job's data
source (`netsched.io/data-source`). A data source the cluster does not have refuses the pod
everywhere: no node can be checked against it."""

from __future__ import annotations

import numpy as np

from netsched.api.labels import DATA_SOURCE, MAX_DATA_DISTANCE
from netsched.extender.locality import distance_levels
from netsched.extender.plugin import Filter, Refused, Request
from netsched.extender.plugins.data.annotation import data_source
from netsched.extender.plugins.data_distance.annotation import max_data_distance


class DataDistance(Filter):
    name = "data_distance"
    reads = (data_source, max_data_distance)

    def binds(self, req: Request) -> bool:
        return req.need(max_data_distance) is not None

    def reject(self, req: Request, idx: np.ndarray) -> dict[int, str]:
        distance, snap = req.need(max_data_distance), req.snapshot
        if not distance:
            return {}
        source = req.need(data_source)
        assert source is not None  # max_data_distance needs one
        place = source.place(snap.table)
        if place is None:
            raise Refused(f"netsched: data source {source.kind} {source.name!r} ({DATA_SOURCE}) "
                          "is not in this cluster's topology; fix the annotation")
        far = distance_levels(snap.table, idx, place) > snap.table.topology.distance_of(distance)
        return {int(pos): (f"netsched: {snap.table.names[idx[pos]]} is not within the "
                           f"{distance} of the input data ({place.label}; "
                           f"{MAX_DATA_DISTANCE}={distance})")
                for pos in np.flatnonzero(far)}
