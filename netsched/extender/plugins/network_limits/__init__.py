"""Filter: measured RTT and bandwidth limits towards the job's peers and its data
(`netsched.io/max-peer-rtt-ms`, `min-peer-bandwidth-mbps`, `max-data-rtt-ms`,
`min-data-bandwidth-mbps`). The value checked is the fresh pair's, else the reverse pair's or a domain
aggregate's (netsched.telemetry.aggregates), and a reason says which; a link with none of them fails
the node, with a reason that says so; a pod next to its peer on one node crosses no link and passes."""

from __future__ import annotations

import numpy as np

from netsched.extender.link_origin import origin
from netsched.extender.plugin import Filter, Request
from netsched.extender.plugins.data.annotation import data_source
from netsched.extender.plugins.network_limits.annotation import Limit, limits
from netsched.extender.snapshot import NodeTable
from netsched.telemetry.aggregates import PAIR, LinkAnswer


class NetworkLimits(Filter):
    name = "network_limits"
    reads = (limits, data_source)

    def binds(self, req: Request) -> bool:
        return bool(req.need(limits))

    def reject(self, req: Request, idx: np.ndarray) -> dict[int, str]:
        snap, source = req.snapshot, req.need(data_source)
        reasons: dict[int, str] = {}
        for limit in req.need(limits):
            targets = sorted(set(snap.peers)) if limit.towards == "peer" else [source.name if source else ""]
            for target in targets:  # the first target a node fails is the one its reason names
                _check(limit, target, snap.table, idx, snap.links(target), reasons)
        return reasons


def _check(limit: Limit, target: str, table: NodeTable, idx: np.ndarray,
           links: LinkAnswer | None, reasons: dict[int, str]) -> None:
    """links: towards target from every node (by table index)."""
    names = table.names
    got = np.full(len(idx), np.nan) if links is None else (links.bw if limit.measure == "bandwidth_mbps"
                                                            else links.rtt)[idx]
    with np.errstate(invalid="ignore"):
        bad = (got > limit.value) if limit.bound == "max" else (got < limit.value)
    unit = "ms RTT" if limit.measure == "rtt_ms" else "Mbit/s"
    for pos in np.flatnonzero(np.isnan(got) | bad):
        node = names[idx[pos]]
        if pos in reasons or node == target:
            continue
        if np.isnan(got[pos]):
            reasons[int(pos)] = (f"netsched: no fresh measurement from {node} to {limit.towards} {target} "
                                 f"nor enough between their domains "
                                 f"({limit.annotation}={limit.value:g} cannot be checked)")
        else:
            how = ("" if links is None or links.origin[idx[pos]] == PAIR
                   else f" ({origin(table, links, int(idx[pos]), target)})")
            reasons[int(pos)] = (f"netsched: {node} to {limit.towards} {target} measures {got[pos]:g} "
                                 f"{unit}{how}, {limit.bound} allowed {limit.value:g} ({limit.annotation})")
