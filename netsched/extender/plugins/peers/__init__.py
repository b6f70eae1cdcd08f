"""Scorer: closeness to each node already holding a pod of the job (same node 1.0, same narrowest level
0.4, same widest level 0.15, levels between in between, elsewhere 0; netsched.models.heuristic.closeness),
averaged over the pods. Where telemetry has a fresh measurement of
the link, half of that pair's value comes from the measurement instead: bandwidth relative to the
best candidate's and RTT relative to the lowest (netsched.models.heuristic)."""

from __future__ import annotations

import numpy as np

from netsched.extender.locality import Place, distance_levels
from netsched.extender.plugin import Request, Scorer
from netsched.models.heuristic import blend, closeness, link_quality

WEIGHT = 0.7  # of the network value: closeness to the job's peers (the data's part is the rest)


class PeerCloseness(Scorer):
    name = "peers"
    weight = WEIGHT
    reads = ()

    def score(self, req: Request, idx: np.ndarray) -> np.ndarray | None:
        snap = req.snapshot
        if not snap.peers:
            return None
        total = np.zeros(len(idx))
        known = [p for p in snap.peers if p in snap.table.index]
        for peer in sorted(set(known)):
            place = Place.of_node(snap.table, snap.table.index[peer])
            value = closeness(distance_levels(snap.table, idx, place), snap.table.topology)
            total += known.count(peer) * blend(value, measured_quality(req, idx, peer))
        return total / max(len(known), 1)


def measured_quality(req: Request, idx: np.ndarray, target: str) -> np.ndarray | None:
    """0..1 per candidate from fresh measurements towards target; NaN where unmeasured, None when
    nothing is."""
    links = req.snapshot.measured(idx, target)
    return None if links is None else link_quality(links.bw, links.rtt)
