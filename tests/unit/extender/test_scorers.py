import random

import numpy as np
import pytest

from netsched.extender.engine import Extender
from netsched.extender.protocol import MAX_SCORE
from netsched.telemetry.store import TelemetryStore
from netsched.testing.extender import CLUSTER, NAMES, args, cache_of, node, pod


def scores(cache, p, names=NAMES, telemetry=None):
    return Extender(cache, telemetry=telemetry, shortlist=0).prioritize(args(p, names)).as_dict()


def test_nodes_closer_to_the_jobs_peers_score_strictly_higher():
    cache = cache_of(CLUSTER, [pod("peer", "a1-0", gpus=6, job="train")])
    s = scores(cache, pod("next", job="train"))
    ordered = [s["a1-0"], s["a1-1"], s["a2-0"], s["b1-0"]]  # peer's node > rack > zone > other zone
    assert ordered == sorted(set(ordered), reverse=True), s


def test_replicas_follow_their_peers_into_another_zone():
    peers = [pod(f"r{i}", "b1-0", gpus=1, job="train") for i in range(2)]
    cache = cache_of(CLUSTER, peers)
    s = scores(cache, pod("r2", gpus=1, job="train"))
    assert s["b1-0"] > max(v for n, v in s.items() if n != "b1-0")


def test_peers_of_other_jobs_and_namespaces_do_not_count():
    cache = cache_of(CLUSTER, [pod("x", "b1-0", job="train", ns="other"), pod("y", "b1-0", job="eval")])
    unrelated = cache_of(CLUSTER, [pod("x", "b1-0"), pod("y", "b1-0")])  # the same GPUs in use
    same_job = cache_of(CLUSTER, [pod("x", "b1-0", job="train"), pod("y", "b1-0", job="train")])
    r = pod("r", gpus=1, job="train")
    assert scores(cache, r) == scores(unrelated, r) != scores(same_job, r)


def test_first_replica_goes_to_a_rack_where_the_whole_job_fits():
    busy = [pod(f"busy{i}", "a1-0" if i % 2 else "a1-1", gpus=7) for i in range(2)]
    first = pod("first", gpus=1, job="train", annotations={"netsched.io/job-gpus": "4"})
    s = scores(cache_of(CLUSTER, busy), first)
    assert min(s["a2-0"], s["b1-0"]) > max(s["a1-0"], s["a1-1"])


def test_packing_breaks_ties_towards_the_fuller_node():
    cache = cache_of([node("full"), node("empty")], [pod("x", "full", gpus=6)])
    s = scores(cache, pod("p", gpus=2), ["full", "empty"])
    assert s["full"] > s["empty"]


def test_a_zone_data_source_pulls_the_first_replica_into_its_zone():
    p = pod("first", job="train", annotations={"netsched.io/data-source": "zone:zone-b"})
    s = scores(cache_of(CLUSTER), p)
    assert max(s, key=s.get) == "b1-0"


def test_measured_bandwidth_ranks_nodes_of_the_same_rack():
    nodes = [node("peer"), node("slow"), node("fast")]
    telemetry = TelemetryStore()
    telemetry.record("slow", "peer", rtt_ms=0.5, bandwidth_mbps=5)
    telemetry.record("fast", "peer", rtt_ms=0.5, bandwidth_mbps=80)
    cache = cache_of(nodes, [pod("r0", "peer", gpus=8, job="train")])
    s = scores(cache, pod("r1", job="train"), ["slow", "fast"], telemetry)
    assert s["fast"] > s["slow"]
    blind = scores(cache, pod("r1", job="train"), ["slow", "fast"])
    assert blind["slow"] == blind["fast"]


def test_scores_are_deterministic_bounded_and_skip_unknown_nodes():
    rng = random.Random(1)
    nodes = [node(f"n{i}", zone=f"z{i % 3}", rack=f"r{i % 7}") for i in range(40)]
    pods = [pod(f"q{i}", f"n{rng.randrange(40)}", gpus=rng.randint(1, 3)) for i in range(30)]
    pods += [pod("j0", "n3", job="train"), pod("j1", "n10", job="train")]
    cache = cache_of(nodes, pods)
    names = [f"n{i}" for i in range(40)] + ["not-in-cache"]
    first = scores(cache, pod("r", job="train"), names)
    shuffled = names[:]
    rng.shuffle(shuffled)
    assert scores(cache, pod("r", job="train"), shuffled) == first
    assert "not-in-cache" not in first
    assert all(0 <= v <= MAX_SCORE for v in first.values())
    assert len(set(np.array(list(first.values())))) > 2  # not all equal: the scores say something


def test_a_step_of_locality_outweighs_kube_schedulers_own_plugins():
    """kube-scheduler counts an extender point as weight 5 x 10 = 50 of its own: same node over same
    rack must beat NodeResourcesFit plus BalancedAllocation (200 at most), the other steps their
    usual spread."""
    cache = cache_of(CLUSTER, [pod("peer", "a1-0", gpus=2, job="train")])
    s = scores(cache, pod("next", gpus=2, job="train"))
    assert s["a1-0"] - s["a1-1"] >= 5 and s["a1-1"] - s["a2-0"] >= 2 and s["a2-0"] - s["b1-0"] >= 1, s


@pytest.mark.parametrize("hint", [{"netsched.io/job-gpus": "8"}, {"netsched.io/replicas": "4"}, {}])
def test_a_jobs_first_pod_goes_to_a_node_with_room_for_the_whole_job(hint):
    """Room for 8 GPUs on a1-1 and b1-0 only; packing alone would pick the tighter a1-0. Without a
    size hint a labelled pod counts as a job that fills a node."""
    cache = cache_of(CLUSTER, [pod("x", "a1-0", gpus=6), pod("y", "a2-0", gpus=4)])
    s = scores(cache, pod("first", gpus=2, job="train", annotations=hint))
    assert min(s["a1-1"], s["b1-0"]) > max(s["a1-0"], s["a2-0"]), s
    assert s["a1-1"] - s["a1-0"] >= 3, s  # the whole job on one node, not three quarters in the rack


def test_a_pod_without_a_job_still_packs():
    cache = cache_of(CLUSTER, [pod("x", "a1-0", gpus=6)])
    s = scores(cache, pod("single", gpus=2))
    assert max(s, key=s.get) == "a1-0"
