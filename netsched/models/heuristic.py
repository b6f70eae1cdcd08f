"""The topology heuristic's constants and formulas, in one place.

The extender's TopologyScorer scores candidate nodes with them, and `netsched evaluate`
recomputes the same ranking from dataset rows (netsched.training.policies), which may not
import the extender: both read this module, so the policy evaluated is the policy served.
"""

from __future__ import annotations

from typing import cast

import numpy as np

CLOSENESS = np.array([1.0, 0.8, 0.4, 0.0])  # by distance level: same node, rack, zone, farther
PACKING_WEIGHT = 0.1  # of a score: using a node's free GPUs exactly
DATA_WEIGHT = 0.3  # of the network value: closeness to the job's data
PEER_WEIGHT = 1 - DATA_WEIGHT  # of the network value: closeness to the job's peers (or room for it)
MEASURED_WEIGHT = 0.5  # of a closeness: taken from the measured link when there is one
RTT_FLOOR_MS = 0.5  # added to RTTs so sub-millisecond jitter between near nodes counts for nothing


def link_quality(bw: np.ndarray, rtt: np.ndarray) -> np.ndarray | None:
    """0..1 per candidate from measured bandwidth and RTT, relative to the best candidate's;
    NaN where unmeasured, None when nothing is."""
    if np.isnan(bw).all():
        return None
    best = np.nanmax(bw)
    with np.errstate(invalid="ignore", divide="ignore"):
        bw_q = bw / best if best > 0 else np.zeros(len(bw))
        rtt_q = (np.nanmin(rtt) + RTT_FLOOR_MS) / (rtt + RTT_FLOOR_MS)
    return 0.5 * bw_q + 0.5 * rtt_q


def blend(closeness: np.ndarray, quality: np.ndarray | None) -> np.ndarray:
    """Half measured link quality, half topology, where the link is measured."""
    if quality is None:
        return closeness
    blended = (1 - MEASURED_WEIGHT) * closeness + MEASURED_WEIGHT * quality
    return np.where(np.isnan(quality), closeness, blended)


def rack_room(rack_free: np.ndarray, job_gpus: float | np.ndarray) -> np.ndarray:
    """How much of the job fits in the candidate's rack, 0..1."""
    return np.minimum(rack_free / np.maximum(job_gpus, 1), 1.0)


def tightness(allocatable: np.ndarray, free: np.ndarray, gpus: float | np.ndarray) -> np.ndarray:
    """1 when the pod uses exactly the node's free GPUs, less as more would be left over."""
    left = np.maximum(free - gpus, 0)
    return np.where(allocatable > 0, 1 - left / np.maximum(allocatable, 1), 0.0)


def network_value(parts: list[tuple[float, np.ndarray]]) -> np.ndarray:
    """The weighted mean of the network parts that apply (weight, value per candidate); one part alone
    is the value itself."""
    if len(parts) == 1:
        return parts[0][1]
    total = sum(weight for weight, _ in parts)
    return cast(np.ndarray, sum(weight * value for weight, value in parts) / total)


def with_packing(network: np.ndarray, tight: np.ndarray) -> np.ndarray:
    """The score: the network value, with packing's share as the tie-break."""
    return (1 - PACKING_WEIGHT) * network + PACKING_WEIGHT * tight


def combine(network: np.ndarray, data: np.ndarray | None, tight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(score, network value) from the peer (or rack room) part, the data part if any, and packing."""
    parts = [(PEER_WEIGHT, network)] + ([] if data is None else [(DATA_WEIGHT, data)])
    network = network_value(parts)
    return with_packing(network, tight), network
