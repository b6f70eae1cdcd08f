"""The topology heuristic's constants and formulas, in one place.

The extender's TopologyScorer scores candidate nodes with them, and `netsched evaluate`
recomputes the same ranking from dataset rows (netsched.training.policies): both read this
module, so the policy evaluated is the policy served. The weights of its parts are the scorer
plugins' own (netsched.extender.plugins), passed in: models may not import the extender.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from netsched.api.topology import DEFAULT, Topology

# By distance level: same node, rack, zone, farther. kube-scheduler adds an extender's 0..10 times
# its weight (5) times 10 to its own plugins' 0..100 each, so one extender point is worth 50; the
# gaps here (5.4, 2.25 and 1.35 points of a score at the peers' weight alone, 0.7) keep a job on one
# node against NodeResourcesFit plus BalancedAllocation (at most 200 between two nodes) and a step of
# rack or zone against their usual spread of a few dozen points.
CLOSENESS = np.array([1.0, 0.4, 0.15, 0.0])


def closeness(distances: np.ndarray, topology: Topology = DEFAULT) -> np.ndarray:
    """CLOSENESS at each distance of the topology's scale. Read on the model's fixed scale
    (Topology.model_scale): the narrowest level is a rack's step and the widest a zone's whatever the
    depth, and levels between fall between them; with the default levels it is CLOSENESS itself."""
    scale = [topology.model_scale(d) for d in range(topology.far + 1)]
    by_distance = np.interp(scale, np.arange(len(CLOSENESS)), CLOSENESS)
    found: np.ndarray = by_distance[distances]
    return found


MEASURED_WEIGHT = 0.5  # of a closeness: taken from the measured link when there is one
RTT_FLOOR_MS = 0.5  # added to RTTs so sub-millisecond jitter between near nodes counts for nothing


def link_quality(bw: np.ndarray, rtt: np.ndarray) -> np.ndarray | None:
    """0..1 per candidate from measured bandwidth and RTT, relative to the best candidate's;
    NaN where unmeasured, None when nothing is."""
    if np.isnan(bw).all():
        return None
    best = np.nanmax(bw)
    with np.errstate(invalid="ignore", divide="ignore"):
        bw_q: np.ndarray = bw / best if best > 0 else np.zeros(len(bw))
        rtt_q: np.ndarray = (np.nanmin(rtt) + RTT_FLOOR_MS) / (rtt + RTT_FLOOR_MS)
    return 0.5 * bw_q + 0.5 * rtt_q


def blend(closeness: np.ndarray, quality: np.ndarray | None) -> np.ndarray:
    """Half measured link quality, half topology, where the link is measured."""
    if quality is None:
        return closeness
    blended = (1 - MEASURED_WEIGHT) * closeness + MEASURED_WEIGHT * quality
    return np.where(np.isnan(quality), closeness, blended)


def job_room(node_free: np.ndarray, rack_free: np.ndarray, job_gpus: float | np.ndarray) -> np.ndarray:
    """For a job's first pod: how close the job's GPUs would be to it, 0..1, if the job filled the
    candidate node first and its rack next. The share that fits on the node counts as same node,
    the rest that fits in the rack as same rack, anything beyond as farther: 1 where the whole job
    fits on the node, CLOSENESS[1] where it fits only in the rack."""
    job = np.maximum(job_gpus, 1)
    on_node = np.minimum(node_free / job, 1.0)
    in_rack = np.maximum(np.minimum(rack_free / job, 1.0) - on_node, 0.0)
    room: np.ndarray = CLOSENESS[0] * on_node + CLOSENESS[1] * in_rack
    return room


def tightness(allocatable: np.ndarray, free: np.ndarray, gpus: float | np.ndarray) -> np.ndarray:
    """1 when the pod uses exactly the node's free GPUs, less as more would be left over; 0 where
    they are too few (e.g. held for another job's replicas)."""
    left = free - gpus
    fits = (allocatable > 0) & (left >= 0)
    return np.where(fits, 1 - np.maximum(left, 0) / np.maximum(allocatable, 1), 0.0)


def network_value(parts: list[tuple[float, np.ndarray]]) -> np.ndarray:
    """The weighted mean of the network parts that apply (weight, value per candidate); one part alone
    is the value itself."""
    if len(parts) == 1:
        return parts[0][1]
    total = sum(weight for weight, _ in parts)
    return cast(np.ndarray, sum(weight * value for weight, value in parts) / total)


def with_packing(network: np.ndarray, tight: np.ndarray, weight: float) -> np.ndarray:
    """The score: the network value, with packing's share (`weight` of the score) as the tie-break."""
    return (1 - weight) * network + weight * tight
