"""A pod's network needs, read from its annotations, and the hard checks the filter runs.

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

Measured limits need fresh telemetry: a link with no measurement younger than the
store's bound fails the node, with a reason that says so. Nothing about a node's
place in the network changes when pods are preempted, so every failure is
reported as unresolvable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from netsched.api.labels import (
    DATA_SOURCE,
    JOB_GPUS,
    MAX_DATA_DISTANCE,
    MAX_DATA_RTT_MS,
    MAX_PEER_DISTANCE,
    MAX_PEER_RTT_MS,
    MIN_DATA_BANDWIDTH_MBPS,
    MIN_PEER_BANDWIDTH_MBPS,
)
from netsched.extender.cache import View
from netsched.extender.locality import LEVELS, Place, closeness_levels, place_of
from netsched.telemetry.store import TelemetryStore

LIMITS = {  # annotation -> (towards, measure, bound)
    MAX_PEER_RTT_MS: ("peer", "rtt_ms", "max"),
    MIN_PEER_BANDWIDTH_MBPS: ("peer", "bandwidth_mbps", "min"),
    MAX_DATA_RTT_MS: ("data", "rtt_ms", "max"),
    MIN_DATA_BANDWIDTH_MBPS: ("data", "bandwidth_mbps", "min"),
}
DATA_KINDS = ("node", "rack", "zone", "endpoint")
DISTANCES = ("node", "rack", "zone")


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
    if not value.isdigit() or int(value) < 1:
        raise InvalidNeeds(f"annotation {JOB_GPUS}={value!r} must be a whole number of GPUs, at least 1")
    return int(value)


def _distance(annotations: dict[str, str], key: str) -> str | None:
    value = annotations.get(key)
    if value is not None and value not in DISTANCES:
        raise InvalidNeeds(f"annotation {key}={value!r} must be one of {', '.join(DISTANCES)}")
    return value


def _limit(annotations: dict[str, str], key: str) -> Limit:
    try:
        value = float(annotations[key])
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise InvalidNeeds(f"annotation {key}={annotations[key]!r} must be a positive number")
    return Limit(key, *LIMITS[key], value)


def data_place(needs: NetworkNeeds, view: View) -> Place | None:
    if needs.data_kind in (None, "endpoint"):
        return None
    return place_of(view.table, needs.data_kind, needs.data_name)


def check(needs: NetworkNeeds, view: View, idx: np.ndarray, job: str | None,
          telemetry: TelemetryStore) -> dict[int, str]:
    """Reasons, by position in idx, for every candidate that fails a hard need."""
    reasons: dict[int, str] = {}
    names = view.table.names
    if needs.max_peer_distance and view.peers:
        _check_peer_distance(needs.max_peer_distance, view, idx, job, reasons)
    if needs.max_data_distance:
        place = data_place(needs, view)
        if place is None:
            msg = (f"netsched: data source {needs.data_kind} {needs.data_name!r} ({DATA_SOURCE}) "
                   "is not in this cluster's topology; fix the annotation")
            return dict.fromkeys(range(len(idx)), msg)
        far = closeness_levels(view.table, idx, place) < LEVELS[needs.max_data_distance]
        for pos in np.flatnonzero(far):
            reasons.setdefault(int(pos), f"netsched: {names[idx[pos]]} is not within the "
                               f"{needs.max_data_distance} of the input data ({place.label}; "
                               f"{MAX_DATA_DISTANCE}={needs.max_data_distance})")
    for limit in needs.limits:
        targets = sorted(set(view.peers)) if limit.towards == "peer" else [needs.data_name]
        for target in targets:  # the first target a node fails is the one its reason names
            _check_limit(limit, target, view, idx, measured(view, idx, target, telemetry), reasons)
    return reasons


def measured(view: View, idx: np.ndarray, target: str,
             telemetry: TelemetryStore) -> tuple[np.ndarray, np.ndarray] | None:
    """Fresh bandwidth (Mbit/s) and RTT (ms) from each candidate to target, NaN where unmeasured;
    None when no node has a fresh measurement towards target."""
    if not telemetry:
        return None
    bw, rtt = telemetry.aligned(target, view.table.index, len(view.table.names))
    if np.isnan(bw).all():
        return None
    return bw[idx], rtt[idx]


def _check_limit(limit: Limit, target: str, view: View, idx: np.ndarray,
                 links: tuple[np.ndarray, np.ndarray] | None, reasons: dict[int, str]) -> None:
    names = view.table.names
    got = np.full(len(idx), np.nan) if links is None else links[0 if limit.measure == "bandwidth_mbps" else 1]
    with np.errstate(invalid="ignore"):
        bad = (got > limit.value) if limit.bound == "max" else (got < limit.value)
    unit = "ms RTT" if limit.measure == "rtt_ms" else "Mbit/s"
    for pos in np.flatnonzero(np.isnan(got) | bad):
        node = names[idx[pos]]
        if pos in reasons or node == target:  # a pod next to its peer on one node needs no network
            continue
        if np.isnan(got[pos]):
            reasons[int(pos)] = (f"netsched: no fresh measurement from {node} to {limit.towards} {target} "
                                 f"({limit.annotation}={limit.value:g} cannot be checked)")
        else:
            reasons[int(pos)] = (f"netsched: {node} to {limit.towards} {target} measures {got[pos]:g} "
                                 f"{unit}, {limit.bound} allowed {limit.value:g} ({limit.annotation})")


def _check_peer_distance(distance: str, view: View, idx: np.ndarray, job: str | None,
                         reasons: dict[int, str]) -> None:
    table, need = view.table, LEVELS[distance]
    ok = np.ones(len(idx), dtype=bool)
    for peer in sorted(set(view.peers)):
        if peer in table.index:
            ok &= closeness_levels(table, idx, Place.of_node(table, table.index[peer])) >= need
    where = sorted({_where(view, p, distance) for p in view.peers})
    for pos in np.flatnonzero(~ok):
        reasons[int(pos)] = (f"netsched: {table.names[idx[pos]]} is not in the same {distance} as job "
                             f"{job}'s pods ({', '.join(where)}; {MAX_PEER_DISTANCE}={distance})")


def _where(view: View, node: str, distance: str) -> str:
    i = view.table.index.get(node)
    if distance == "node" or i is None:
        return node
    found = view.table.rack_of(i) if distance == "rack" else view.table.zone_of(i)
    return found or f"{node} (no {distance} label)"
