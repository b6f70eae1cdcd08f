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
from netsched.models.heuristic import CLOSENESS, blend, combine, link_quality, rack_room, tightness
from netsched.telemetry.store import TelemetryStore


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
            network = factors["rack_room"] = rack_room(rack_free(view, idx), needs.job_gpus or pod.gpus)
        data = _data_closeness(needs, view, idx, telemetry)
        if data is not None:
            factors["data"] = data
        tight = factors["packing"] = tightness(view.table.allocatable[idx], view.free[idx], pod.gpus)
        value, network = combine(network, data, tight)
        return Scored(value, network, factors)


def _peer_closeness(view: View, idx: np.ndarray, telemetry: TelemetryStore) -> np.ndarray:
    total = np.zeros(len(idx))
    known = [p for p in view.peers if p in view.table.index]
    for peer in sorted(set(known)):
        place = Place.of_node(view.table, view.table.index[peer])
        value = CLOSENESS[closeness_levels(view.table, idx, place)]
        total += known.count(peer) * _blend_measured(value, view, idx, peer, telemetry)
    return total / max(len(known), 1)


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
    return blend(topo, _measured_quality(view, idx, target, telemetry))


def _measured_quality(view: View, idx: np.ndarray, target: str,
                      telemetry: TelemetryStore) -> np.ndarray | None:
    """0..1 per candidate from fresh measurements towards target; NaN where unmeasured."""
    links = measured(view, idx, target, telemetry)
    return None if links is None else link_quality(*links)
