"""Measured limits towards the job's peers and its data: `netsched.io/max-peer-rtt-ms`,
`min-peer-bandwidth-mbps`, `max-data-rtt-ms`, `min-data-bandwidth-mbps` (positive numbers; the data
limits need `netsched.io/data-source`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from netsched.api import annotations as read
from netsched.api.labels import (
    DATA_SOURCE,
    MAX_DATA_RTT_MS,
    MAX_PEER_RTT_MS,
    MIN_DATA_BANDWIDTH_MBPS,
    MIN_PEER_BANDWIDTH_MBPS,
)
from netsched.api.topology import DEFAULT, Topology
from netsched.extender.plugin import InvalidNeeds

LIMITS = {  # annotation -> (towards, measure, bound)
    MAX_PEER_RTT_MS: ("peer", "rtt_ms", "max"),
    MIN_PEER_BANDWIDTH_MBPS: ("peer", "bandwidth_mbps", "min"),
    MAX_DATA_RTT_MS: ("data", "rtt_ms", "max"),
    MIN_DATA_BANDWIDTH_MBPS: ("data", "bandwidth_mbps", "min"),
}


@dataclass(frozen=True)
class Limit:
    annotation: str
    towards: str  # "peer" or "data"
    measure: str  # attribute of LinkStats
    bound: str  # "max" or "min"
    value: float


def limits(annotations: Mapping[str, str], topology: Topology = DEFAULT) -> tuple[Limit, ...]:
    found = tuple(_limit(annotations, key) for key in LIMITS if key in annotations)
    if any(lim.towards == "data" for lim in found) and DATA_SOURCE not in annotations:
        raise InvalidNeeds(f"data RTT and bandwidth limits need annotation {DATA_SOURCE}")
    return found


def _limit(annotations: Mapping[str, str], key: str) -> Limit:
    try:
        value = read.network_limit(annotations, key)
    except read.BadAnnotation as exc:
        raise InvalidNeeds(str(exc)) from exc
    assert value is not None  # only an annotation the pod has is read
    return Limit(key, *LIMITS[key], value)
