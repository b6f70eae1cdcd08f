"""A pod's network needs, read from its annotations (the filter plugins check them).

The GPUJob operator writes these annotations from the job's spec; any pod may
carry them by hand too.

- `netsched.io/max-peer-distance`: node, rack or zone; every pod of the job that close to the others
- `netsched.io/data-source`: `node:<n>`, `rack:<r>`, `zone:<z>` or `endpoint:<host:port>`, where
  the input lives
- `netsched.io/max-data-distance`: node, rack or zone; the node must be that close to the data
- `netsched.io/max-peer-rtt-ms`, `netsched.io/min-peer-bandwidth-mbps`: measured RTT (bandwidth)
  to every peer's node at most (at least) this
- `netsched.io/max-data-rtt-ms`, `netsched.io/min-data-bandwidth-mbps`: the same towards the data
- `netsched.io/job-gpus`: GPUs the whole job needs, so its first pod goes where the rest fits

Nothing about a node's place in the network changes when pods are preempted, so every
failure of these needs is reported as unresolvable.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from netsched.api.distance import LIMITS as DISTANCES
from netsched.api.labels import (
    DATA_SOURCE,
    JOB_GPUS,
    MAX_DATA_DISTANCE,
    MAX_DATA_RTT_MS,
    MAX_PEER_DISTANCE,
    MAX_PEER_RTT_MS,
    MIN_DATA_BANDWIDTH_MBPS,
    MIN_PEER_BANDWIDTH_MBPS,
    whole_number,
)
from netsched.extender.locality import Place, place_of
from netsched.extender.snapshot import Snapshot

LIMITS = {  # annotation -> (towards, measure, bound)
    MAX_PEER_RTT_MS: ("peer", "rtt_ms", "max"),
    MIN_PEER_BANDWIDTH_MBPS: ("peer", "bandwidth_mbps", "min"),
    MAX_DATA_RTT_MS: ("data", "rtt_ms", "max"),
    MIN_DATA_BANDWIDTH_MBPS: ("data", "bandwidth_mbps", "min"),
}
DATA_KINDS = ("node", "rack", "zone", "endpoint")
DECIMAL = re.compile(r"[0-9]*\.?[0-9]+")


class InvalidNeeds(ValueError):
    """An annotation has a value netsched cannot use; the message names it and the fix."""


@dataclass(frozen=True)
class Limit:
    annotation: str
    towards: str  # "peer" or "data"
    measure: str  # attribute of LinkStats
    bound: str  # "max" or "min"
    value: float


@dataclass(frozen=True)
class NetworkNeeds:
    max_peer_distance: str | None = None
    data_kind: str | None = None
    data_name: str | None = None
    max_data_distance: str | None = None
    limits: tuple[Limit, ...] = ()
    job_gpus: int | None = None  # a hint for scoring, not a hard need

    @property
    def data_endpoint(self) -> str | None:
        return self.data_name if self.data_kind == "endpoint" else None

    def __bool__(self) -> bool:
        return bool(self.max_peer_distance or self.max_data_distance or self.limits)


def parse_needs(annotations: dict[str, str]) -> NetworkNeeds:
    peer = _distance(annotations, MAX_PEER_DISTANCE)
    data_kind = data_name = None
    if DATA_SOURCE in annotations:
        data_kind, _, data_name = annotations[DATA_SOURCE].partition(":")
        if data_kind not in DATA_KINDS or not data_name:
            raise InvalidNeeds(
                f"annotation {DATA_SOURCE}={annotations[DATA_SOURCE]!r} must be <kind>:<name> with kind "
                f"one of {', '.join(DATA_KINDS)}, e.g. zone:zone-a or endpoint:10.0.0.5:9000"
            )
    data_distance = _distance(annotations, MAX_DATA_DISTANCE)
    if data_distance and data_kind in (None, "endpoint"):
        raise InvalidNeeds(
            f"annotation {MAX_DATA_DISTANCE} needs {DATA_SOURCE} to name a node, rack or zone; "
            "for an endpoint use max-data-rtt-ms or min-data-bandwidth-mbps"
        )
    limits = tuple(_limit(annotations, key) for key in LIMITS if key in annotations)
    if any(lim.towards == "data" for lim in limits) and data_kind is None:
        raise InvalidNeeds(f"data RTT and bandwidth limits need annotation {DATA_SOURCE}")
    return NetworkNeeds(peer, data_kind, data_name, data_distance, limits, _job_gpus(annotations))


def _job_gpus(annotations: dict[str, str]) -> int | None:
    value = annotations.get(JOB_GPUS)
    if value is None:
        return None
    gpus = whole_number(value)
    if gpus is None or gpus < 1:
        raise InvalidNeeds(f"annotation {JOB_GPUS}={value!r} must be a whole number of GPUs, at least 1")
    return gpus


def _distance(annotations: dict[str, str], key: str) -> str | None:
    value = annotations.get(key)
    if value is not None and value not in DISTANCES:
        raise InvalidNeeds(f"annotation {key}={value!r} must be one of {', '.join(DISTANCES)}")
    return value


def _limit(annotations: dict[str, str], key: str) -> Limit:
    text = annotations[key]
    value = float(text) if DECIMAL.fullmatch(text) else math.nan  # float() takes "١", " 5" and "1_0" too
    if not math.isfinite(value) or value <= 0:
        raise InvalidNeeds(f"annotation {key}={annotations[key]!r} must be a positive number")
    return Limit(key, *LIMITS[key], value)


def data_place(needs: NetworkNeeds, snap: Snapshot) -> Place | None:
    if needs.data_kind in (None, "endpoint") or needs.data_name is None:
        return None
    return place_of(snap.table, needs.data_kind, needs.data_name)
