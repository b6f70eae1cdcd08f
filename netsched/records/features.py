"""A finished-job record's completion-time model features (netsched.models.features): what training
learns from (netsched.training.record_rows) and what `netsched report` predicts with.

The row is for the job's last replica (the one placed with all the others already placed, which is how
the extender scores a pod: the other replicas are its peers). What a record cannot derive from its own
fields (node load, free GPUs, measured links) comes from its `telemetry` field: a mapping from feature
name to the value seen when that last replica was placed; absent names are unknown (NaN), and a name
that is not a feature is an error, so a typo cannot silently drop a signal.

Distances are read with the topology the record was written under (its `topology` column; netsched's
zone and rack before there was one) and put on the model's scale (Topology.model_scale), so records of
clusters with different levels train one model.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from netsched.api.topology import DEFAULT, NODE, Topology
from netsched.models.features import (
    FEATURE_NAMES,
    SCHEMA_VERSION,
    comm_gb_per_hour,
    data_scope,
    kind_features,
    peer_features,
)
from netsched.models.gpus import gpu_features

Record = dict[str, Any]


def record_features(record: Record) -> dict[str, float]:
    """Every feature of the record's last replica, in schema order (NaN where the record says nothing)."""
    nodes = record.get("nodes") or []
    last = len(nodes) - 1
    topology = record_topology(record)
    places = record_places(record, topology)
    out: dict[str, float] = {
        **dict.fromkeys(FEATURE_NAMES, math.nan),
        **job_features(record, topology), **_peer_features(places, topology, last),
        "data_distance": _data_distance(record, places, topology, last),
        **kind_features(record.get("workload_kind")),
        **gpu_features(_at(record.get("gpu_models"), last), _at(record.get("gpu_labels"), last)),
    }
    telemetry = record.get("telemetry") or {}
    unknown = sorted(set(telemetry) - set(FEATURE_NAMES))
    if unknown:
        raise ValueError(f"telemetry names {', '.join(unknown)}, which are not features of schema "
                         f"v{SCHEMA_VERSION} (netsched.models.features.FEATURE_NAMES)")
    out.update({k: _number(v) for k, v in telemetry.items()})
    return out


def record_topology(record: Record) -> Topology:
    """The topology the record was written under (netsched's zone and rack before records named one)."""
    text = record.get("topology")
    return _parsed(text) if text else DEFAULT


@lru_cache(maxsize=64)
def _parsed(text: str) -> Topology:
    return Topology.parse(text)


def job_features(record: Record, topology: Topology) -> dict[str, float]:
    size = record.get("input_size_gb")
    if size is None:
        size = record.get("data_size_gb")
    if size is None and record.get("data_kind") is None:
        size = 0.0  # no input named at all: it reads nothing we know of
    return {
        "job_gpus": float(record["gpus"]), "replicas": float(record["replicas"]),
        "gpus_per_replica": float(record["gpus_per_replica"]), "input_size_gb": _number(size),
        "comm_gb_per_hour": comm_gb_per_hour(record.get("communication_gb_per_hour"),
                                             record.get("communication_intensity")),
        "expected_seconds": _number(record.get("expected_duration_seconds")),
        "data_scope": data_scope(record.get("data_kind"), topology),
    }


def record_places(record: Record, topology: Topology) -> dict[str, list[str]]:
    """Each replica's place at node and at every level of the record's topology, narrowest first."""
    domains = record.get("domains") or {"rack": record.get("racks") or [], "zone": record.get("zones") or []}
    return {NODE: record["nodes"], **{name: domains.get(name) or [] for name in reversed(topology.names)}}


def _data_distance(record: Record, places: dict[str, list[str]], topology: Topology, last: int) -> float:
    """The last replica's own distance to the data. The record's data_distance is the finest level
    that every replica shares with the data: the last one's when it runs alone, only a bound on it
    otherwise. So its level is read from where the data is, at each level from the data's own kind
    up: known from the record's location, from a replica sitting with the data, or from that bound.
    NaN where the record leaves it open (and for an endpoint or no data)."""
    kind, location = record.get("data_kind"), record.get("data_location")
    if kind not in topology.limits or not location:
        return math.nan
    recorded = topology.distances.get(record.get("data_distance") or "", math.nan)
    if last == 0:
        return _scaled(recorded, topology)  # one replica: the record's level is its own
    bound = math.inf if math.isnan(recorded) else recorded
    with_data = [i for i, place in enumerate(places[kind]) if place == location]
    limits = topology.limits
    for level in limits[limits.index(kind):]:
        where = location if level == kind else next((places[level][i] for i in with_data
                                                     if i < len(places[level]) and places[level][i]), None)
        mine = places[level][last] if last < len(places[level]) else ""
        if topology.distances[level] >= bound or (where is not None and mine == where):
            return _scaled(topology.distances[level], topology)
        if where is None or not mine:
            return math.nan
    return _scaled(topology.far, topology)


def _scaled(distance: float, topology: Topology) -> float:
    return math.nan if math.isnan(distance) else topology.model_scale(int(distance))


def _peer_features(places: dict[str, list[str]], topology: Topology, last: int) -> dict[str, float]:
    """The peer shares from each earlier replica's distance to the last: the narrowest level whose
    domain (label value) both have."""
    if last <= 0:
        return {"peer_count": 0.0}
    levels = list(places)  # node, then narrowest to widest
    distances = [next((d for d, level in enumerate(levels) if _same(places[level], p, last)), topology.far)
                 for p in range(last)]
    shares = peer_features(np.array([topology.model_scale(d) for d in distances]))
    return {k: float(v) for k, v in shares.items()}


def _same(labels: list[str], a: int, b: int) -> bool:
    return len(labels) > max(a, b) and bool(labels[a]) and labels[a] == labels[b]


def _at(values: list[Any] | None, i: int) -> Any:
    """values[i], or None where the record has no such entry (an older record, an unlabelled node)."""
    return values[i] if values and 0 <= i < len(values) else None


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)
