"""The packer's pass through a fake API server: what it reads, and the PackingPlan and Event it writes."""

from __future__ import annotations

import pytest

from netsched.api import plans
from netsched.operator.packer import Packer, PackerConfig
from netsched.testing.builders import make_node, make_pod
from netsched.testing.kube import FakeKube

PLAN = {"apiVersion": f"{plans.GROUP}/{plans.VERSION}", "kind": plans.KIND, "metadata": {"name": "pack-1"},
        "spec": {}, "status": {"phase": "Evicting"}}


def full_node(*waiting: dict) -> FakeKube:
    """One 8-GPU node held by a low-priority pod, and the given pods waiting."""
    low = make_pod("low", "n1", gpus=8, priority=10, owner="ReplicaSet")
    return FakeKube([make_node("n1"), low, *waiting])


def solves(packer: Packer, result: str) -> float:
    return packer.metrics.registry.get_sample_value("netsched_packer_solves_total", {"result": result}) or 0


def test_a_waiting_pod_that_only_an_eviction_places_gets_a_plan_and_an_event():
    kube = full_node(make_pod("urgent", gpus=8, priority=1000, unschedulable=True))
    packer = Packer(kube, PackerConfig(budget=2.0))
    packer._pack()
    [plan] = kube.list(plans.PLURAL)
    assert plan["metadata"]["name"].startswith("pack-") and plan["spec"]["counts"] == {
        "evictions": 1, "moves": 0, "placements": 1}
    assert [e["pod"] for e in plan["spec"]["evictions"]] == ["ml/low"]
    [event] = kube.list("events", "default")  # a cluster-scoped object's events live there
    assert event["reason"] == "Planned" and event["involvedObject"]["name"] == plan["metadata"]["name"]
    assert event["message"].startswith(
        "1 pod(s) wait for room, 1 at priority 1000 (ml/urgent): evict 1, move 0, place 1 (solver, ")
    assert solves(packer, "plan") == 1 and kube.get("pods", "ml", "low") is not None  # planned, not evicted


def test_no_solve_while_a_plan_is_active():
    kube = full_node(make_pod("urgent", gpus=8, priority=1000, unschedulable=True))
    kube.add(PLAN, plans.PLURAL)
    Packer(kube)._pack()
    assert [(c.verb, c.plural) for c in kube.calls] == [("list", plans.PLURAL)]


@pytest.mark.parametrize("waiting", [
    pytest.param(make_pod("peer", gpus=8, priority=10, unschedulable=True), id="not-more-important"),
    pytest.param(make_pod("huge", gpus=16, priority=1000, unschedulable=True), id="fits-nowhere"),
])
def test_nothing_to_gain_writes_nothing_and_the_same_cluster_is_not_solved_again(waiting):
    kube = full_node(waiting)
    packer = Packer(kube, PackerConfig(budget=2.0))
    packer._pack()
    packer._pack()
    assert kube.list(plans.PLURAL) == [] and kube.list("events") == []
    assert solves(packer, "no_gain") == 1 and solves(packer, "plan") == 0
    kube.add(make_pod("another", gpus=8, priority=1000, unschedulable=True))
    packer._pack()  # a new cluster state is worth a solve
    assert solves(packer, "no_gain") + solves(packer, "plan") == 2


def test_no_waiting_pod_no_solve():
    kube = full_node()
    packer = Packer(kube)
    packer._pack()
    assert solves(packer, "no_gain") == solves(packer, "plan") == 0
    assert {c.plural for c in kube.made("list")} == {plans.PLURAL, "nodes", "pods", "poddisruptionbudgets"}
