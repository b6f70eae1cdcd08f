"""The openb replay on a few nodes and pods, against allocations worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from netsched.datagen.gpu_cluster import Ask, GpuCluster
from netsched.datagen.openb import TraceNode, TracePod
from netsched.datagen.placement_policies import POLICIES
from netsched.datagen.trace_packer import NetschedReplay
from netsched.datagen.trace_replay import Replay, arrivals


def node(name: str, gpus: int, memory: int = 1000) -> TraceNode:
    return TraceNode(name, 8000, memory, gpus, "G2")


def pod(name: str, gpus: float, memory: int = 10, qos: str = "BE") -> TracePod:
    whole = gpus >= 1 or gpus == 0
    return TracePod(name, 1000, memory, int(gpus) if whole else 1, 1000 if whole else round(gpus * 1000),
                    (), qos, 0, None, None)


def test_best_fit_by_hand():
    # 6 GPUs. a (1) fits n0 tighter; b (2) only n1; c (4) nowhere; d (half a GPU) the fuller n0's free
    # GPU; e (1) only n1's: placed 1 + 2 + 0.5 (+ 1 once e arrives) of 6
    nodes = [node("n0", 2), node("n1", 4)]
    replay = Replay("BestFit", nodes, POLICIES["BestFit"]([]), seed=0)
    out = replay.run([pod("a", 1), pod("b", 2), pod("c", 4), pod("d", 0.5), pod("e", 1)])
    assert out.ratio == {0.9: 3 / 6, 0.95: 3 / 6, 1.0: 3 / 6, 1.1: 3 / 6, 1.3: 4.5 / 6}
    assert out.unallocated[1.0] == 3.0 and (out.placed, out.pending) == (4, 1)
    where = {k.split(":")[1]: (replay.cluster.names[n], s) for k, (n, s, _) in replay.cluster.held.items()}
    assert where == {"a": ("n0", (0,)), "b": ("n1", (0, 1)), "d": ("n0", (1,)), "e": ("n1", (2,))}


def test_netsched_evicts_best_effort_for_a_latency_sensitive_pod_by_hand():
    # a (BE) takes n0 (first of equals), b (BE) cannot join it (memory) and takes n1; c (LS, 2 GPUs) fits
    # nowhere: at 90% arrived the packer evicts a (lower priority) for it, and a fits nowhere else; d
    # (2 GPUs, BE) never fits. 3 of 4 GPUs placed from then on.
    nodes = [node("n0", 2, memory=100), node("n1", 2, memory=100)]
    replay = NetschedReplay(nodes, seed=0, budget=2.0)
    out = replay.run([pod("a", 1, 60), pod("b", 1, 50), pod("c", 2, 10, qos="LS"), pod("d", 2)])
    assert out.ratio == dict.fromkeys((0.9, 0.95, 1.0, 1.1, 1.3), 0.75)
    assert (out.evicted, out.moved, out.placed, out.pending) == (1, 0, 2, 2)
    assert sorted(k.split(":")[1] for k in replay.waiting) == ["a", "d"]


def test_netsched_asks_a_whole_gpu_for_a_share_and_counts_the_share():
    replay = NetschedReplay([node("n0", 1)], seed=0, packer=False)
    out = replay.run([pod("a", 0.5), pod("b", 0.5), pod("c", 0.5)])
    assert out.ratio[1.0] == 0.5 and out.pending == 2  # a holds the GPU, b waits; others would share it


def test_fgd_keeps_whole_gpus_whole():
    # every pod in the workload asks a whole GPU: half a GPU goes where it leaves no whole GPU broken
    cluster = GpuCluster([node("n0", 2), node("n1", 1)])
    half = Ask(1000, 10, 1, 500)
    cluster.place("x", 0, half, (0,))
    fgd = POLICIES["FGD"]([Ask(1000, 10, 1, 1000)] * 9 + [half])
    choice = fgd(cluster, half, np.array([0, 1]), np.random.default_rng(0))
    assert choice == (0, (0,))


def test_arrivals_reach_the_load_with_the_same_pods_per_seed():
    pods = [pod("a", 1), pod("b", 0.5), pod("c", 0)]
    first, again = arrivals(pods, 10, seed=3), arrivals(pods, 10, seed=3)
    assert first == again and sum(p.gpu_request for p in first) >= 13
    assert sum(p.gpu_request for p in first[:-1]) < 13


@pytest.mark.parametrize("name", list(POLICIES))
def test_every_policy_places_only_where_the_pod_fits(name):
    nodes = [node("n0", 2, memory=100), node("n1", 4, memory=100)]
    pods = [pod("a", 1, 40), pod("b", 0.3), pod("c", 2, 70), pod("d", 0), pod("e", 0.8), pod("f", 1)]
    replay = Replay(name, nodes, POLICIES[name]([Ask.of(p) for p in pods]), seed=1)
    replay.run(pods * 2)
    c = replay.cluster
    assert (c.cpu >= 0).all() and (c.mem >= 0).all() and ((c.gpu >= 0) | (c.gpu == -1)).all()


def test_clustering_puts_pods_of_one_gpu_shape_together():
    # a (one GPU) opens a node; b (a share) avoids it for an idle one; c (one GPU) joins a
    replay = Replay("Clustering", [node("n0", 2), node("n1", 2), node("n2", 2)],
                    POLICIES["Clustering"]([]), seed=4)
    replay.run([pod("a", 1), pod("b", 0.5), pod("c", 1)])
    where = {k.split(":")[1]: n for k, (n, _, _) in replay.cluster.held.items()}
    assert where["c"] == where["a"] != where["b"]
