"""The placement policies `netsched evaluate` compares, as a cost per candidate row (lower is better).

Each policy ranks the candidates of a candidate set from the features a scheduler would
have had; the evaluation picks each set's cheapest row (first on a tie) and compares its
true completion time with the best one. The learned and network-blind policies are the
model's predictions; the ones here need no model.
"""

from __future__ import annotations

import numpy as np

from netsched.models.dataset import Dataset
from netsched.models.features import DATA_SCOPES, INDEX

# The extender's TopologyScorer constants (netsched/extender/scorers.py), by distance level
# 0 same node, 1 same rack, 2 same zone, 3 farther: its CLOSENESS array read backwards.
CLOSENESS = np.array([1.0, 0.8, 0.4, 0.0])
PACKING_WEIGHT, DATA_WEIGHT, MEASURED_WEIGHT, RTT_FLOOR_MS = 0.1, 0.3, 0.5, 0.5


def least_allocated_balanced(cpu: np.ndarray, mem: np.ndarray) -> np.ndarray:
    """kube-scheduler's default score: NodeResourcesFit LeastAllocated plus BalancedAllocation, over
    CPU and memory requested/allocatable. The same formula as netsched.packing.default_scheduler,
    written again here because models may not import packing (a sibling layer). The pod's own
    request is left out (rows do not carry it): on equally sized nodes that shifts no ranking.
    An unknown load counts as 0."""
    cpu, mem = np.nan_to_num(cpu), np.nan_to_num(mem)
    least_allocated = ((1 - cpu) + (1 - mem)) / 2
    balanced = 1 - np.abs(cpu - mem) / 2  # the population std of two values
    return least_allocated + balanced


def default_scheduler_cost(ds: Dataset) -> np.ndarray:
    return -least_allocated_balanced(ds.X[:, INDEX["node_cpu_load"]], ds.X[:, INDEX["node_mem_load"]])


def random_cost(ds: Dataset, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random(len(ds))


def oracle_cost(ds: Dataset) -> np.ndarray:
    return ds.y


def heuristic_cost(ds: Dataset, sets: list[np.ndarray]) -> np.ndarray:
    """The extender's TopologyScorer ranking, recomputed from a row's features.

    Re-implemented rather than imported (models may not import the extender) and checked
    against it by hand: peers (closeness by level, half from measured links), else the room
    in the rack; 30% closeness to the data; 10% packing. Measured link quality is relative to
    the best candidate of the set, as the scorer's is relative to the request's candidates.
    The one approximation: with several peers the row has the weakest measured peer link,
    where the scorer averages each peer's own."""
    cost = np.empty(len(ds))
    for rows in sets:
        cost[rows] = -_topology_score(ds.X[rows])
    return cost


def _topology_score(X: np.ndarray) -> np.ndarray:
    def col(name: str) -> np.ndarray:
        return X[:, INDEX[name]]

    if (col("peer_count") > 0).any():
        topo = (CLOSENESS[0] * col("peer_frac_node") + CLOSENESS[1] * col("peer_frac_rack")
                + CLOSENESS[2] * col("peer_frac_zone"))
        network = _blend(np.nan_to_num(topo), _quality(col("peer_bw_mbps"), col("peer_rtt_ms")))
    else:
        network = np.minimum(np.nan_to_num(col("rack_free_gpus")) / np.maximum(col("job_gpus"), 1), 1.0)
    data = _data_closeness(X, col)
    if data is not None:
        network = (1 - DATA_WEIGHT) * network + DATA_WEIGHT * data
    alloc, left = col("node_gpus"), np.maximum(col("node_free_gpus") - col("gpus_per_replica"), 0)
    tight = np.nan_to_num(np.where(alloc > 0, 1 - left / np.maximum(alloc, 1), 0.0))
    return (1 - PACKING_WEIGHT) * network + PACKING_WEIGHT * tight


def _data_closeness(X: np.ndarray, col) -> np.ndarray | None:
    scope = col("data_scope")[0]
    if np.isnan(scope):
        return None
    quality = _quality(col("data_bw_mbps"), col("data_rtt_ms"))
    if scope == DATA_SCOPES["endpoint"]:
        return None if quality is None else np.nan_to_num(quality, nan=0.0)
    distance = col("data_distance")
    level = np.where(np.isnan(distance), 3, distance).astype(int)
    value = CLOSENESS[level] / CLOSENESS[int(scope)]  # relative to the best the data's place allows
    return _blend(value, quality) if scope == DATA_SCOPES["node"] else value


def _blend(topo: np.ndarray, quality: np.ndarray | None) -> np.ndarray:
    if quality is None:
        return topo
    return np.where(np.isnan(quality), topo, (1 - MEASURED_WEIGHT) * topo + MEASURED_WEIGHT * quality)


def _quality(bw: np.ndarray, rtt: np.ndarray) -> np.ndarray | None:
    """0..1 from measured bandwidth and RTT relative to the set's best; NaN where unmeasured."""
    if np.isnan(bw).all():
        return None
    best = np.nanmax(bw)
    with np.errstate(invalid="ignore", divide="ignore"):
        bw_q = bw / best if best > 0 else np.zeros(len(bw))
        rtt_q = (np.nanmin(rtt) + RTT_FLOOR_MS) / (rtt + RTT_FLOOR_MS)
    return 0.5 * bw_q + 0.5 * rtt_q
