"""Node scorers for prioritize: each has a name and `score(pod, candidates, snapshot)`
returning 0..MAX_SCORE per candidate. Equal inputs give equal scores.

TopologyScorer keeps a job's replicas close: a node scores by how near it is to
the nodes already holding the job's other pods (same node > same rack > same
zone > elsewhere). The first replica has no peers, so it goes where the most GPUs
are free in its rack, leaving room for the rest of the job next to it. Ties break
towards packing GPUs tightly, keeping whole nodes free for large pods.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Protocol

from netsched.extender.protocol import MAX_SCORE, PodRef
from netsched.extender.snapshot import ClusterSnapshot, NodeInfo

SAME_NODE, SAME_RACK, SAME_ZONE, ELSEWHERE = 1.0, 0.8, 0.4, 0.0
PACKING_WEIGHT = 0.1  # a tie-break: never outweighs one step of proximity


class Scorer(Protocol):
    name: str

    def score(self, pod: PodRef, candidates: list[str], snapshot: ClusterSnapshot) -> dict[str, int]: ...


def closeness(a: NodeInfo, b: NodeInfo) -> float:
    if a.name == b.name:
        return SAME_NODE
    if a.rack is not None and a.rack == b.rack:
        return SAME_RACK
    if a.zone is not None and a.zone == b.zone:
        return SAME_ZONE
    return ELSEWHERE


class TopologyScorer:
    name = "topology"

    def score(self, pod: PodRef, candidates: list[str], snapshot: ClusterSnapshot) -> dict[str, int]:
        nodes = [snapshot.nodes[n] for n in candidates if n in snapshot.nodes]
        peers = [snapshot.nodes[p] for p in snapshot.peers(pod.namespace, pod.job) if p in snapshot.nodes]
        if peers:
            nearness = {n.name: sum(closeness(n, p) for p in peers) / len(peers) for n in nodes}
        else:
            nearness = _rack_room(nodes, snapshot)
        scores = {}
        for n in nodes:
            value = (1 - PACKING_WEIGHT) * nearness[n.name] + PACKING_WEIGHT * _tightness(n, pod.gpus)
            scores[n.name] = round(MAX_SCORE * value)
        return scores


def _rack_room(nodes: list[NodeInfo], snapshot: ClusterSnapshot) -> dict[str, float]:
    """Free GPUs in each candidate's rack, relative to the roomiest rack."""
    free: dict[str | None, int] = defaultdict(int)
    for info in snapshot.nodes.values():
        free[info.rack or info.name] += info.gpus_free
    most = max((free[n.rack or n.name] for n in nodes), default=0) or 1
    return {n.name: free[n.rack or n.name] / most for n in nodes}


def _tightness(node: NodeInfo, gpus: int) -> float:
    """1 when the pod uses exactly the node's free GPUs, less as more would be left over."""
    if node.gpus_allocatable <= 0:
        return 0.0
    left = max(node.gpus_free - gpus, 0)
    return 1 - left / node.gpus_allocatable
