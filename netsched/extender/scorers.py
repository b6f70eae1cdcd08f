"""Node scorers: each has a name and `score(pod, needs, view, idx, telemetry)` returning a
`Scored` for the candidates at table indices `idx`. Equal inputs give equal scores.

TopologyScorer keeps a job's replicas close to each other and to their data:

- peers: closeness to each node already holding a pod of the job (same node 1.0,
  same rack 0.8, same zone 0.4, elsewhere 0), averaged over the pods. Where the
  telemetry store has a fresh measurement for the link, half of that pair's value
  comes from the measurement instead: bandwidth relative to the best candidate's
  and RTT relative to the lowest (plus 0.5 ms, so sub-millisecond jitter between
  equally near nodes does not count as a difference).
- first replica (no peers yet): whether the rest of the job fits in the candidate's
  rack: its free GPUs over the job's GPUs (`netsched.io/job-gpus`, else the pod's),
  capped at 1.
- data: with a data source, 30% of the network value is closeness to it (by
  topology, or by measurement for an endpoint).
- packing: 10% goes to using a node's free GPUs exactly, keeping whole nodes free
  for large pods. It never outweighs a step of proximity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from netsched.extender.cache import UNKNOWN, View
from netsched.extender.locality import Place, closeness_levels
from netsched.extender.needs import NetworkNeeds, data_place, measured
from netsched.extender.protocol import MAX_SCORE, PodRef
from netsched.telemetry.store import TelemetryStore

CLOSENESS = np.array([0.0, 0.4, 0.8, 1.0])  # by level: elsewhere, zone, rack, node
PACKING_WEIGHT = 0.1
DATA_WEIGHT = 0.3
MEASURED_WEIGHT = 0.5
RTT_FLOOR_MS = 0.5


@dataclass
class Scored:
    value: np.ndarray  # 0..1 per candidate; higher is better
    network: np.ndarray  # the network part alone, which the shortlist ranks by
    factors: dict[str, np.ndarray] = field(default_factory=dict)  # named parts, for explanations
    scorer: str = "topology"  # which scorer produced it (a model scorer may fall back)

    def scores(self) -> np.ndarray:
        """0..MAX_SCORE integers, as kube-scheduler wants them."""
        return np.rint(np.clip(self.value, 0, 1) * MAX_SCORE).astype(np.int64)


class Scorer(Protocol):
    name: str

    def score(self, pod: PodRef, needs: NetworkNeeds, view: View, idx: np.ndarray,
              telemetry: TelemetryStore) -> Scored: ...


class TopologyScorer:
    name = "topology"

    def score(self, pod: PodRef, needs: NetworkNeeds, view: View, idx: np.ndarray,
              telemetry: TelemetryStore) -> Scored:
        factors: dict[str, np.ndarray] = {}
        if view.peers:
            network = factors["peers"] = _peer_closeness(view, idx, telemetry)
        else:
            network = factors["rack_room"] = _rack_room(view, idx, needs.job_gpus or pod.gpus)
        data = _data_closeness(needs, view, idx, telemetry)
        if data is not None:
            factors["data"] = data
            network = (1 - DATA_WEIGHT) * network + DATA_WEIGHT * data
        tight = factors["packing"] = _tightness(view, idx, pod.gpus)
        return Scored((1 - PACKING_WEIGHT) * network + PACKING_WEIGHT * tight, network, factors)


def _peer_closeness(view: View, idx: np.ndarray, telemetry: TelemetryStore) -> np.ndarray:
    total = np.zeros(len(idx))
    known = [p for p in view.peers if p in view.table.index]
    for peer in sorted(set(known)):
        place = Place.of_node(view.table, view.table.index[peer])
        value = CLOSENESS[closeness_levels(view.table, idx, place)]
        total += known.count(peer) * _blend_measured(value, view, idx, peer, telemetry)
    return total / max(len(known), 1)


def _rack_room(view: View, idx: np.ndarray, need: int) -> np.ndarray:
    """How much of the job fits in each candidate's rack (the node itself when unracked)."""
    return np.minimum(rack_free(view, idx) / max(need, 1), 1.0)


def rack_free(view: View, idx: np.ndarray) -> np.ndarray:
    """Free GPUs in each candidate's rack (the node's own when it has no rack label)."""
    table = view.table
    racks = np.where(table.rack != UNKNOWN, table.rack, len(table.rack_names) + np.arange(len(table.rack)))
    return np.bincount(racks, weights=view.free)[racks[idx]]


def _data_closeness(needs: NetworkNeeds, view: View, idx: np.ndarray,
                    telemetry: TelemetryStore) -> np.ndarray | None:
    if needs.data_endpoint:
        measured = _measured_quality(view, idx, needs.data_endpoint, telemetry)
        return None if measured is None else np.nan_to_num(measured, nan=0.0)
    place = data_place(needs, view)
    if place is None:
        return None
    # relative to the best a place can offer: for data "in zone-b", any zone-b node is ideal
    value = CLOSENESS[closeness_levels(view.table, idx, place)] / CLOSENESS[max(place.finest, 1)]
    if needs.data_kind != "node":
        return value
    return _blend_measured(value, view, idx, needs.data_name, telemetry)


def _blend_measured(topo: np.ndarray, view: View, idx: np.ndarray, target: str,
                    telemetry: TelemetryStore) -> np.ndarray:
    measured = _measured_quality(view, idx, target, telemetry)
    if measured is None:
        return topo
    blended = (1 - MEASURED_WEIGHT) * topo + MEASURED_WEIGHT * measured
    return np.where(np.isnan(measured), topo, blended)


def _measured_quality(view: View, idx: np.ndarray, target: str,
                      telemetry: TelemetryStore) -> np.ndarray | None:
    """0..1 per candidate from fresh measurements towards target; NaN where unmeasured."""
    links = measured(view, idx, target, telemetry)
    if links is None or np.isnan(links[0]).all():
        return None
    bw, rtt = links
    best = np.nanmax(bw)
    with np.errstate(invalid="ignore", divide="ignore"):
        bw_q = bw / best if best > 0 else np.zeros(len(idx))
        rtt_q = (np.nanmin(rtt) + RTT_FLOOR_MS) / (rtt + RTT_FLOOR_MS)
    return 0.5 * bw_q + 0.5 * rtt_q


def _tightness(view: View, idx: np.ndarray, gpus: int) -> np.ndarray:
    """1 when the pod uses exactly the node's free GPUs, less as more would be left over."""
    alloc = view.table.allocatable[idx]
    left = np.maximum(view.free[idx] - gpus, 0)
    return np.where(alloc > 0, 1 - left / np.maximum(alloc, 1), 0.0)
