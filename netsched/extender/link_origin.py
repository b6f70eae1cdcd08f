"""Words for where a link value came from (telemetry.aggregates' origin codes), for explanations and
filter reasons: "bandwidth 9.1 Gbit/s, RTT 0.40 ms to gpu-3 (median of 12 probes rack r1 -> rack r4)"."""

from __future__ import annotations

import numpy as np

from netsched.extender.snapshot import NodeTable
from netsched.telemetry.aggregates import NONE, PAIR, REVERSE, LinkAnswer, level_of


def origin(table: NodeTable, links: LinkAnswer, i: int, target: str) -> str:
    """Where the value at table index i towards target came from: "measured", "measured <target> ->
    <node>" (the reverse pair) or "median of N probes <from> -> <to>" (an aggregate, saying so when a
    NIC's link speed lowered it)."""
    code, node = int(links.origin[i]), table.names[i]
    if code == PAIR:
        return "measured"
    if code == REVERSE:
        return f"measured {target} -> {node}"
    found = level_of(code)
    if code == NONE or found is None:
        return "not measured"
    kind, k = found
    source = node if kind == "node" else _domain(table, k, i)
    j = table.index.get(target)
    to = _domain(table, k, j) if j is not None else target
    capped = "" if np.isnan(links.cap[i]) else ", lowered to what the slower NIC's link speed allows"
    return f"median of {int(links.samples[i])} probes {source} -> {to}{capped}"


def _domain(table: NodeTable, k: int, i: int) -> str:
    level = table.topology.names[k]
    name = table.domain_names[k][table.domains[k][i]] if k < len(table.domain_names) else None
    return f"{level} {name}" if name is not None else f"{level} of {table.names[i]}"


def bandwidth(mbps: float) -> str:
    return f"{mbps / 1000:.1f} Gbit/s" if mbps >= 1000 else f"{mbps:.0f} Mbit/s"


def describe(table: NodeTable, links: LinkAnswer, i: int, target: str) -> str | None:
    """The link from table index i to target in words, None when unknown."""
    if int(links.origin[i]) == NONE:
        return None
    return (f"bandwidth {bandwidth(float(links.bw[i]))}, RTT {float(links.rtt[i]):.2f} ms to {target} "
            f"({origin(table, links, i, target)})")


NOTES = 3  # links named per candidate: an event stays one readable line


def link_notes(table: NodeTable, read: dict[str, LinkAnswer], i: int) -> list[str]:
    """The links from table index i that a request read (`Snapshot.links_read`), in words."""
    notes = (describe(table, links, i, target) for target, links in sorted(read.items())
             if target != table.names[i])
    return [note for note in notes if note is not None][:NOTES]
