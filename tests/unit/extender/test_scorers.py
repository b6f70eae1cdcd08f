import random

from netsched.extender.protocol import MAX_SCORE, PodRef
from netsched.extender.scorers import TopologyScorer
from netsched.extender.snapshot import ClusterSnapshot, NodeInfo


def make_node(name: str, zone: str = "zone-a", rack: str = "rack-a1", gpus: int = 8, free: int = 8):
    return NodeInfo(name, zone, rack, "NVIDIA-H100-80GB-HBM3", gpus, free)


def make_pod(gpus: int = 2, job: str | None = "train") -> PodRef:
    return PodRef("ml", "train-1", "uid", gpus, job)


def snapshot(*nodes: NodeInfo, peers: tuple[str, ...] = ()) -> ClusterSnapshot:
    return ClusterSnapshot({n.name: n for n in nodes}, {"ml/train": peers} if peers else {})


CLUSTER = (
    make_node("a1-0", free=2), make_node("a1-1"),
    make_node("a2-0", rack="rack-a2"), make_node("b1-0", zone="zone-b", rack="rack-b1"),
)


def test_nodes_closer_to_the_jobs_peers_score_strictly_higher():
    snap = snapshot(*CLUSTER, peers=("a1-0",))
    scores = TopologyScorer().score(make_pod(), [n.name for n in CLUSTER], snap)
    # peer's node > same rack > same zone > other zone
    ordered = [scores[n] for n in ("a1-0", "a1-1", "a2-0", "b1-0")]
    assert ordered == sorted(set(ordered), reverse=True), scores


def test_replicas_follow_their_peers_into_another_zone():
    snap = snapshot(*CLUSTER, peers=("b1-0", "b1-0"))
    scores = TopologyScorer().score(make_pod(), [n.name for n in CLUSTER], snap)
    assert max(scores, key=scores.get) == "b1-0"
    assert scores["b1-0"] > max(v for n, v in scores.items() if n != "b1-0")


def test_first_replica_goes_to_the_rack_with_most_free_gpus():
    nodes = (make_node("a1-0", free=1), make_node("a1-1", free=1),
             make_node("b1-0", zone="zone-b", rack="rack-b1", free=6),
             make_node("b1-1", zone="zone-b", rack="rack-b1", free=8))
    scores = TopologyScorer().score(make_pod(gpus=1), [n.name for n in nodes], snapshot(*nodes))
    assert min(scores["b1-0"], scores["b1-1"]) > max(scores["a1-0"], scores["a1-1"])


def test_packing_breaks_ties_towards_the_fuller_node():
    nodes = (make_node("full", free=2), make_node("empty", free=8))
    scores = TopologyScorer().score(make_pod(gpus=2, job=None), ["full", "empty"], snapshot(*nodes))
    assert scores["full"] > scores["empty"]


def test_scores_are_deterministic_bounded_and_skip_unknown_nodes():
    rng = random.Random(1)
    nodes = [make_node(f"n{i}", zone=f"z{i % 3}", rack=f"r{i % 7}", free=rng.randint(0, 8))
             for i in range(40)]
    snap = ClusterSnapshot({n.name: n for n in nodes}, {"ml/train": ("n3", "n10")})
    names = [n.name for n in nodes] + ["not-in-snapshot"]
    first = TopologyScorer().score(make_pod(), names, snap)
    shuffled = names[:]
    rng.shuffle(shuffled)
    assert TopologyScorer().score(make_pod(), shuffled, snap) == first
    assert "not-in-snapshot" not in first
    assert all(0 <= s <= MAX_SCORE for s in first.values())
