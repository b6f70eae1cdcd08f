"""Filter: every pod of a job within `netsched.io/max-peer-distance` (node or a topology level) of the
job's pods already placed. Before the first pod is placed, anywhere goes."""

from __future__ import annotations

import numpy as np

from netsched.api.labels import MAX_PEER_DISTANCE
from netsched.api.topology import NODE
from netsched.extender.locality import Place, distance_levels
from netsched.extender.plugin import Filter, Request
from netsched.extender.plugins.peer_distance.annotation import max_peer_distance
from netsched.extender.snapshot import Snapshot


class PeerDistance(Filter):
    name = "peer_distance"
    reads = (max_peer_distance,)

    def binds(self, req: Request) -> bool:
        return req.need(max_peer_distance) is not None

    def reject(self, req: Request, idx: np.ndarray) -> dict[int, str]:
        distance, snap = req.need(max_peer_distance), req.snapshot
        if not distance or not snap.peers:
            return {}
        table = snap.table
        limit = table.topology.distance_of(distance)
        ok = np.ones(len(idx), dtype=bool)
        for peer in sorted(set(snap.peers)):
            if peer in table.index:
                ok &= distance_levels(table, idx, Place.of_node(table, table.index[peer])) <= limit
        where = sorted({_where(snap, p, distance) for p in snap.peers})
        return {int(pos): (f"netsched: {table.names[idx[pos]]} is not in the same {distance} as job "
                           f"{req.pod.job}'s pods ({', '.join(where)}; {MAX_PEER_DISTANCE}={distance})")
                for pos in np.flatnonzero(~ok)}


def _where(snap: Snapshot, node: str, distance: str) -> str:
    i = snap.table.index.get(node)
    if distance == NODE or i is None:
        return node
    found = snap.table.domain_of(i, distance)
    return found or f"{node} (no {distance} label)"
