"""The placement policies `netsched evaluate` compares, as a cost per candidate row (lower is better).

Each policy ranks the candidates of a candidate set from the features a scheduler would
have had; the evaluation picks each set's cheapest row (first on a tie) and compares its
true completion time with the best one. The learned and network-blind policies are the
model's predictions; the ones here need no model.
"""

from __future__ import annotations

import numpy as np

from netsched.extender.plugins import bin_packing, data, peers
from netsched.models.features import DATA_SCOPES, INDEX
from netsched.models.heuristic import (
    CLOSENESS,
    blend,
    job_room,
    link_quality,
    network_value,
    tightness,
    with_packing,
)
from netsched.training.dataset import Dataset


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
    """The extender's TopologyScorer ranking, recomputed from a row's features with its
    formulas (netsched.models.heuristic): peers (closeness by level, half from measured links),
    else the room for the whole job on the node, then in its rack; 30% closeness to the data;
    10% packing. Measured link quality is
    relative to the best candidate of the set, as the scorer's is relative to the request's
    candidates. The one approximation: with several peers the row has the weakest measured
    peer link, where the scorer averages each peer's own."""
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
        network = blend(np.nan_to_num(topo), link_quality(col("peer_bw_mbps"), col("peer_rtt_ms")))
    else:
        network = job_room(np.nan_to_num(col("node_free_gpus")), np.nan_to_num(col("rack_free_gpus")),
                           col("job_gpus"))
    tight = np.nan_to_num(tightness(col("node_gpus"), col("node_free_gpus"), col("gpus_per_replica")))
    data_part = _data_closeness(X, col)
    parts = [(peers.WEIGHT, network)] + ([] if data_part is None else [(data.WEIGHT, data_part)])
    return with_packing(network_value(parts), tight, bin_packing.WEIGHT)


def _data_closeness(X: np.ndarray, col) -> np.ndarray | None:
    scope = col("data_scope")[0]
    if np.isnan(scope):
        return None
    quality = link_quality(col("data_bw_mbps"), col("data_rtt_ms"))
    if scope == DATA_SCOPES["endpoint"]:
        return None if quality is None else np.nan_to_num(quality, nan=0.0)
    distance = col("data_distance")
    level = np.where(np.isnan(distance), 3, distance).astype(int)
    value = CLOSENESS[level] / CLOSENESS[int(scope)]  # relative to the best the data's place allows
    return blend(value, quality) if scope == DATA_SCOPES["node"] else value
