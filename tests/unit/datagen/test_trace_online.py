"""The openb trace replayed online on one small cluster, against queueing worked out by hand."""

from __future__ import annotations

import pytest

from netsched.datagen.openb import TraceNode, TracePod
from netsched.datagen.placement_policies import kube_default, netsched_served
from netsched.datagen.trace_online import replay_online, runs


def pod(name: str, gpus: int, created: int, ran: int | None, qos: str = "BE") -> TracePod:
    """A pod the real cluster scheduled at once (None: never scheduled) and that ran `ran` seconds."""
    scheduled = None if ran is None else created
    return TracePod(name, 1000, 10, gpus, 1000, (), qos, created, created + (ran or 5), scheduled)


PODS = [pod("a", 2, 0, 10), pod("b", 1, 1, 5), pod("c", 1, 2, 1, qos="LS"), pod("d", 4, 2, 3),
        pod("never-ran", 1, 0, None)]


def test_queueing_in_priority_order_by_hand():
    # one node of 2 GPUs: a holds both from 0 to 10; b (BE, at 1) and c (LS, at 2) wait; at 10 c goes
    # first, then b: delays 0, 8, 9. d asks 4 GPUs, more than any node has: never placed, never queued.
    # never-ran has no run time: left out
    out = replay_online("netsched", [TraceNode("n0", 8000, 1000, 2, "G2")], PODS, netsched_served)
    assert [p.name for p in runs(PODS)] == ["a", "b", "c", "d"] and out.pods == 4
    assert (out.placed, out.never_placed, out.waiting_at_end) == (3, 1, 2)
    assert (out.queue_p50, out.queue_p95) == (8.0, pytest.approx(8.9))
    assert out.utilisation == 1.0  # both GPUs held over the arrivals (0..2)
    assert out.waited_seconds == 9 and out.utilisation_waiting == 1.0  # b waited 1..10, both GPUs held


def test_compressed_arrivals_and_the_policies_choice_among_freed_nodes():
    nodes = [TraceNode("n0", 8000, 1000, 2, "G2"), TraceNode("n1", 8000, 1000, 4, "G2")]
    pods = [pod("a", 2, 0, 100), pod("b", 4, 10, 100), pod("c", 1, 20, 50), pod("d", 2, 30, 50)]
    # arrivals 10x faster: a, b, c, d at 0, 1, 2, 3; a fills n0 (netsched: the tightest fit), b n1; c and
    # d wait; at 100 a leaves n0, which takes c (older) but not d (2 GPUs, 1 left); at 101 b leaves n1,
    # which takes d: delays 0, 0, 98, 98
    out = replay_online("netsched", nodes, pods, netsched_served, compress=10)
    assert (out.placed, out.never_placed, out.waiting_at_end) == (4, 0, 2)
    assert (out.queue_p50, out.queue_p95) == (49.0, 98.0)
    # the default's LeastAllocated sees CPU and memory only: any node for a, and b may then wait too
    assert replay_online("kube default", nodes, pods, kube_default, compress=10).placed == 4
