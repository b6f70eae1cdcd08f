"""The completion-time model's feature schema, versioned: what a row knows when a job is placed.

One row describes one (job, candidate node) pair at placement time. The same ordered
feature list is used by the simulator, the testbed runner, the operator's job records
(through `netsched.training.record_rows`), training and the extender's predictor, so a model
trained on one source scores rows from another. Any change to the names, their order
or their meaning bumps SCHEMA_VERSION; artifacts and datasets of another version are
refused, never silently reinterpreted.

Conventions: an empty value (NaN) means unknown or not applicable (no data source, no
peers yet, link not measured); distance levels are 0 same node, 1 same rack, 2 same
zone, 3 farther; bandwidth is Mbit/s, RTT ms, loads and utilisation 0..1; a node's GPU is
four capability numbers from netsched.models.gpus (never a family flag: a GPU the model never
saw still says how fast it is).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np

from netsched.api.topology import DEFAULT, Topology
from netsched.models.errors import SchemaError as SchemaError  # where every user of the features finds it
from netsched.models.gpus import GPU_FEATURES

SCHEMA_VERSION = 2  # 2: GPU capability numbers for the GPU-family flags, exchange in GB/h for 3 levels

WORKLOAD_KINDS = ("training", "inference", "etl", "batch")
COMM_LEVELS = {"low": 10.0, "medium": 100.0, "high": 600.0}  # the GB/h a job stating only a level stands for
ENDPOINT_SCOPE = 3.0  # data at an endpoint: as far as data goes on the model's scale


def data_scope(kind: str | None, topology: Topology = DEFAULT) -> float:
    """data_scope of data known to a node, a level of `topology` or an endpoint, on the model's scale
    (Topology.model_scale); NaN for none."""
    if kind == "endpoint":
        return ENDPOINT_SCOPE
    return topology.model_scale(topology.distances[kind]) if kind in topology.limits else math.nan


# netsched's own levels (node, rack, zone, far) on the model's scale: the simulated worlds of datagen
DATA_SCOPES = {kind: data_scope(kind) for kind in (*DEFAULT.limits, "endpoint")}
DISTANCES = {name: DEFAULT.model_scale(d) for name, d in DEFAULT.distances.items()}


@dataclass(frozen=True)
class Feature:
    name: str
    group: str  # job, node or network
    doc: str
    heavy_tailed: bool = False  # positive and spanning decades: log1p-scaled for linear and kNN models


FEATURES: tuple[Feature, ...] = (
    Feature("job_gpus", "job", "GPUs of the whole job (replicas x GPUs per replica)"),
    Feature("replicas", "job", "replicas (pods) of the job"),
    Feature("gpus_per_replica", "job", "GPUs the placed pod asks for"),
    Feature("input_size_gb", "job", "input data read by the job, GB (0: none)", heavy_tailed=True),
    Feature("comm_gb_per_hour", "job", "GB each replica exchanges with the others per hour of work "
            "(spec.workload.communicationGBPerHour; a level low/medium/high counts as COMM_LEVELS)",
            heavy_tailed=True),
    *(Feature(f"kind_{k}", "job", f"1 if the workload kind is {k}") for k in WORKLOAD_KINDS),
    Feature("expected_seconds", "job", "the job's own duration hint (spec.workload.expectedDurationSeconds)",
            heavy_tailed=True),
    Feature("data_scope", "job", "where the input lives on the model's scale (Topology.model_scale): 0 a "
            "node, 1 the narrowest level (a rack), 2 the widest (a zone), between for levels between, 3 an "
            "endpoint"),
    *(Feature(name, "node", doc, heavy_tailed=True) for name, (_, doc) in GPU_FEATURES.items()),
    Feature("node_gpus", "node", "the node's allocatable GPUs"),
    Feature("node_free_gpus", "node", "GPUs free on the node before placing"),
    Feature("rack_free_gpus", "node", "GPUs free in the node's rack before placing"),
    Feature("node_cpu_load", "node", "CPU requested / allocatable on the node"),
    Feature("node_mem_load", "node", "memory requested / allocatable on the node"),
    Feature("data_distance", "network", "distance from the node to the input on the model's scale "
            "(Topology.model_scale: 0 node, 1 narrowest level, 2 widest, 3 far; none for an endpoint)"),
    Feature("data_bw_mbps", "network", "measured bandwidth node -> input", heavy_tailed=True),
    Feature("data_rtt_ms", "network", "measured RTT node -> input", heavy_tailed=True),
    Feature("peer_count", "network", "the job's pods already placed (0 for the first)"),
    Feature("peer_frac_node", "network", "share of those pods on this very node"),
    Feature("peer_frac_rack", "network", "share on another node of this node's narrowest level (its rack)"),
    Feature("peer_frac_zone", "network", "share sharing a wider level (its zone), outside the narrowest"),
    Feature("peer_bw_mbps", "network", "lowest measured bandwidth to a peer's node", heavy_tailed=True),
    Feature("peer_rtt_ms", "network", "highest measured RTT to a peer's node", heavy_tailed=True),
    Feature("nic_util", "network", "the node's NIC utilisation (busiest direction)"),
)
FEATURE_NAMES: tuple[str, ...] = tuple(f.name for f in FEATURES)
NETWORK_BLIND: tuple[str, ...] = tuple(f.name for f in FEATURES if f.group != "network")
INDEX = {name: i for i, name in enumerate(FEATURE_NAMES)}
TARGET = "duration_seconds"  # what the model learns from a row: the job's run time there, in seconds


def feature_matrix(values: Mapping[str, float | np.ndarray], rows: int,
                   names: tuple[str, ...] = FEATURE_NAMES) -> np.ndarray:
    """A (rows, len(names)) float64 matrix in schema order; scalars (job features) are broadcast.

    The extender builds its batch with this: job features as scalars, node and network
    features as arrays over the candidates; a missing name is an error, not a silent NaN."""
    require(values, names)
    out = np.empty((rows, len(names)), dtype=np.float64)
    for j, name in enumerate(names):
        out[:, j] = values[name]
    return out


def require(values: Mapping[str, object], names: tuple[str, ...]) -> None:
    missing = [n for n in names if n not in values]
    if missing:
        raise SchemaError(f"feature values missing for {', '.join(missing)} (schema v{SCHEMA_VERSION}); "
                          "pass NaN for an unknown value")


def kind_features(kind: str | None) -> dict[str, float]:
    return {f"kind_{k}": float(k == kind) for k in WORKLOAD_KINDS}


def comm_gb_per_hour(gb_per_hour: object, level: object) -> float:
    """comm_gb_per_hour from what a job states: its GB/h if a non-negative number, else what its
    level stands for (COMM_LEVELS), else NaN (unknown)."""
    try:
        number = float(gb_per_hour)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = math.nan
    if math.isfinite(number) and number >= 0:
        return number
    return COMM_LEVELS.get(level, math.nan) if isinstance(level, str) else math.nan


def peer_features(distances: np.ndarray) -> dict[str, float | np.ndarray]:
    """peer_count and the peer_frac_* shares from the distance of each of the job's placed pods to the
    candidate on the model's scale (Topology.model_scale: 0 node, 1 the narrowest level, up to 2 the
    widest, 3 far; rows: pods, one per pod; columns: candidates, or a vector for one candidate)."""
    k = len(distances)
    if k == 0:
        return {"peer_count": 0.0, "peer_frac_node": np.nan, "peer_frac_rack": np.nan,
                "peer_frac_zone": np.nan}
    d = np.asarray(distances)

    def share(within: np.ndarray) -> float | np.ndarray:
        out = within.sum(axis=0) / k
        return out if np.ndim(out) else float(out)

    return {"peer_count": float(k), "peer_frac_node": share(d == 0), "peer_frac_rack": share(d == 1),
            "peer_frac_zone": share((d > 1) & (d <= 2))}


@overload
def weakest_link(bandwidths: Sequence[float], rtts: Sequence[float]) -> tuple[float, float]: ...
@overload
def weakest_link(bandwidths: Sequence[np.ndarray],
                 rtts: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]: ...
def weakest_link(bandwidths: Sequence[Any], rtts: Sequence[Any]) -> tuple[Any, Any]:
    """peer_bw_mbps and peer_rtt_ms: the lowest bandwidth and the highest RTT over the links a pod's
    exchange with its peers crosses (one entry per peer's node: floats, or arrays over candidates),
    ignoring unknown (NaN) entries; NaN where no link is known. A peer on the candidate itself
    crosses no link: callers leave it out or pass NaN."""
    if not bandwidths:
        return math.nan, math.nan
    with np.errstate(all="ignore"):
        bw = np.fmin.reduce(np.asarray(bandwidths, dtype=float), axis=0)
        rtt = np.fmax.reduce(np.asarray(rtts, dtype=float), axis=0)
    return (bw if np.ndim(bw) else float(bw)), (rtt if np.ndim(rtt) else float(rtt))
