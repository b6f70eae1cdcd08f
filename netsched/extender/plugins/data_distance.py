"""Filter: the node within `netsched.io/max-data-distance` (node, rack or zone) of the job's data
source (`netsched.io/data-source`). A data source the cluster does not have refuses the pod
everywhere: no node can be checked against it."""

from __future__ import annotations

import numpy as np

from netsched.api.distance import DISTANCES
from netsched.api.labels import DATA_SOURCE, MAX_DATA_DISTANCE
from netsched.extender.locality import distance_levels
from netsched.extender.needs import data_place
from netsched.extender.plugin import Refused, Request


class DataDistance:
    name = "data_distance"

    def reject(self, req: Request, idx: np.ndarray) -> dict[int, str]:
        needs, snap = req.needs, req.snapshot
        if not needs.max_data_distance:
            return {}
        place = data_place(needs, snap)
        if place is None:
            raise Refused(f"netsched: data source {needs.data_kind} {needs.data_name!r} ({DATA_SOURCE}) "
                          "is not in this cluster's topology; fix the annotation")
        far = distance_levels(snap.table, idx, place) > DISTANCES[needs.max_data_distance]
        return {int(pos): (f"netsched: {snap.table.names[idx[pos]]} is not within the "
                           f"{needs.max_data_distance} of the input data ({place.label}; "
                           f"{MAX_DATA_DISTANCE}={needs.max_data_distance})")
                for pos in np.flatnonzero(far)}
