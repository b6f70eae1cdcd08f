"""The operator's finished-job records (JSON Lines, netsched.records) as dataset rows.

A record is one job that really ran: it becomes a candidate set of one row, `chosen` = 1,
for the node of its last replica (the one placed with all the others already placed, which
is how the extender scores a pod: the other replicas are its peers). Only jobs that
Succeeded with a duration are kept: a failed job's duration says nothing about speed.

What a record cannot derive from its own fields (node load, free GPUs, measured links)
comes from its `telemetry` field: a mapping from feature name (netsched.models.features)
to the value seen when that last replica was placed, e.g. {"node_free_gpus": 4,
"nic_util": 0.3, "data_bw_mbps": 9400, "peer_rtt_ms": 0.2}. Absent names are unknown
(NaN); a name that is not a feature is an error, so a typo cannot silently drop a signal.

Distances are read with the topology the record was written under (its `topology` column; netsched's
zone and rack before there was one) and put on the model's scale (Topology.model_scale), so records
of clusters with different levels train one model.
"""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path

import numpy as np

from netsched.api.gpujob import Phase
from netsched.api.topology import DEFAULT, NODE, Topology
from netsched.models.features import (
    FEATURE_NAMES,
    SCHEMA_VERSION,
    TARGET,
    SchemaError,
    comm_gb_per_hour,
    data_scope,
    kind_features,
    peer_features,
)
from netsched.models.gpus import gpu_features
from netsched.records.reader import checked_records


def record_row(record: dict) -> dict | None:
    """The dataset row of one finished-job record, or None if the job never gave a usable duration."""
    nodes = record.get("nodes") or []
    duration = record.get("duration_seconds")
    if record.get("outcome") != Phase.SUCCEEDED or not nodes or not duration or duration <= 0:
        return None
    last = len(nodes) - 1
    topology = Topology.parse(record["topology"]) if record.get("topology") else DEFAULT
    places = _places(record, topology)
    row = {
        "schema_version": SCHEMA_VERSION, "source": "operator", "job_id": record["uid"],
        "candidate_set": record["uid"], "node": nodes[last], "site": (record.get("zones") or [""])[last],
        "start_unix": datetime.fromisoformat(record["start_time"]).timestamp(), "chosen": 1,
        TARGET: float(duration),
        **dict.fromkeys(FEATURE_NAMES, math.nan),
        **_job_features(record, topology), **_peer_features(places, topology, last),
        "data_distance": _data_distance(record, places, topology, last),
        **kind_features(record.get("workload_kind")),
        **gpu_features(_at(record.get("gpu_models"), last), _at(record.get("gpu_labels"), last)),
    }
    telemetry = record.get("telemetry") or {}
    unknown = sorted(set(telemetry) - set(FEATURE_NAMES))
    if unknown:
        raise ValueError(f"telemetry names {', '.join(unknown)}, which are not features of schema "
                         f"v{SCHEMA_VERSION} (netsched.models.features.FEATURE_NAMES)")
    row.update({k: _number(v) for k, v in telemetry.items()})
    return row


def _job_features(record: dict, topology: Topology) -> dict:
    size = record.get("input_size_gb")
    if size is None:
        size = record.get("data_size_gb")
    if size is None and record.get("data_kind") is None:
        size = 0.0  # no input named at all: it reads nothing we know of
    return {
        "job_gpus": record["gpus"], "replicas": record["replicas"],
        "gpus_per_replica": record["gpus_per_replica"], "input_size_gb": _number(size),
        "comm_gb_per_hour": comm_gb_per_hour(record.get("communication_gb_per_hour"),
                                             record.get("communication_intensity")),
        "expected_seconds": _number(record.get("expected_duration_seconds")),
        "data_scope": data_scope(record.get("data_kind"), topology),
    }


def _places(record: dict, topology: Topology) -> dict[str, list[str]]:
    """Each replica's place at node and at every level of the record's topology, narrowest first."""
    domains = record.get("domains") or {"rack": record.get("racks") or [], "zone": record.get("zones") or []}
    return {NODE: record["nodes"], **{name: domains.get(name) or [] for name in reversed(topology.names)}}


def _data_distance(record: dict, places: dict[str, list[str]], topology: Topology, last: int) -> float:
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


def _peer_features(places: dict[str, list[str]], topology: Topology, last: int) -> dict:
    """The peer shares from each earlier replica's distance to the last: the narrowest level whose
    domain (label value) both have."""
    if last == 0:
        return {"peer_count": 0.0}
    levels = list(places)  # node, then narrowest to widest
    distances = [next((d for d, level in enumerate(levels) if _same(places[level], p, last)), topology.far)
                 for p in range(last)]
    shares = peer_features(np.array([topology.model_scale(d) for d in distances]))
    return {k: float(v) for k, v in shares.items()}


def _same(labels: list[str], a: int, b: int) -> bool:
    return len(labels) > max(a, b) and bool(labels[a]) and labels[a] == labels[b]


def _at(values: list | None, i: int):
    """values[i], or None where the record has no such entry (an older record, an unlabelled node)."""
    return values[i] if values and i < len(values) else None


def _number(value) -> float:
    return math.nan if value is None else float(value)


def rows_from_records(path: Path) -> list[dict]:
    """The dataset rows of the usable records of an operator records file (none before the first job
    succeeds: train and retrain then say how many they need, netsched.training.train.MIN_JOBS)."""
    rows = []
    for where, record in checked_records(path):
        try:
            row = record_row(record)
        except KeyError as exc:
            raise SchemaError(f"{where}: no field {exc}; see netsched.records.format.ROW_FIELDS") from None
        except (TypeError, ValueError) as exc:
            raise SchemaError(f"{where}: {exc}") from None
        if row is not None:
            rows.append(row)
    return rows
