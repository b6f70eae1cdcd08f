"""The default-scheduler emulation: kube-scheduler's queue by priority and its preemption."""

from __future__ import annotations

import pytest

from netsched.packing.default_scheduler import preemptive_schedule
from netsched.packing.problem import Budget, Node, Pod, Problem

GPU = "nvidia.com/gpu"


def node(name: str, gpus: int = 8) -> Node:
    return Node(name, {GPU: gpus, "cpu": 64000, "memory": 10**12})


def pod(name: str, gpus: int, priority: int = 0, on: str | None = None, **kw) -> Pod:
    return Pod(name, {GPU: gpus, "cpu": 1000, "memory": 10**9}, priority, on, **kw)


def test_the_queue_takes_the_highest_priority_first_whatever_the_arrival_order():
    problem = Problem((node("n1"),), (pod("low", 8, 0), pod("high", 8, 100)))
    assert preemptive_schedule(problem) == {"low": None, "high": "n1"}


def test_within_a_priority_pods_go_in_arrival_order():
    problem = Problem((node("n1"),), (pod("first", 8, 0), pod("second", 8, 0)))
    assert preemptive_schedule(problem) == {"first": "n1", "second": None}


def test_a_pod_that_fits_nowhere_preempts_the_fewest_lowest_priority_victims():
    problem = Problem((node("n1"), node("n2")), (
        pod("a", 4, 10, "n1"), pod("b", 4, 10, "n1"),  # n1: two victims of priority 10
        pod("c", 8, 0, "n2"),  # n2: one victim of priority 0
        pod("high", 8, 100)))
    placement = preemptive_schedule(problem)
    assert placement["high"] == "n2" and placement["c"] is None and placement["a"] == placement["b"] == "n1"


def test_victims_are_reprieved_most_important_first_so_only_what_is_needed_goes():
    problem = Problem((node("n1"),), (pod("low", 4, 0, "n1"), pod("mid", 4, 50, "n1"), pod("high", 4, 100)))
    assert preemptive_schedule(problem) == {"low": None, "mid": "n1", "high": "n1"}


def test_a_victim_is_recreated_and_queues_again_it_may_land_elsewhere_or_preempt_lower_pods():
    problem = Problem((node("n1"), node("n2", gpus=4)), (
        pod("low", 4, 0, "n2"), pod("mid", 8, 50, "n1"), pod("high", 8, 100)))
    # high takes n1 from mid; mid fits nowhere and low is below it: mid would need 8 on n2 (4): stays pending
    assert preemptive_schedule(problem) == {"low": "n2", "mid": None, "high": "n1"}
    problem = Problem((node("n1"), node("n2")), (
        pod("low", 8, 0, "n2"), pod("mid", 8, 50, "n1"), pod("high", 8, 100, allowed=("n1",))))
    assert preemptive_schedule(problem) == {"low": None, "mid": "n2", "high": "n1"}


@pytest.mark.parametrize("allowed, expect", [
    pytest.param(0, "n2", id="budget-spent: the node without a budget is chosen"),
    pytest.param(1, "n1", id="budget-allows: fewer victims win"),
])
def test_nodes_whose_victims_break_a_disruption_budget_come_last(allowed, expect):
    problem = Problem((node("n1"), node("n2")), (
        pod("guarded", 8, 0, "n1", pdb="keep"),
        pod("x", 4, 0, "n2"), pod("y", 4, 0, "n2"),
        pod("high", 8, 100)), (Budget("keep", allowed),))
    assert preemptive_schedule(problem)["high"] == expect


def test_a_budget_does_not_stop_preemption_when_nothing_else_makes_room():
    problem = Problem((node("n1"),), (pod("guarded", 8, 0, "n1", pdb="keep"), pod("high", 8, 100)),
                      (Budget("keep", 0),))
    assert preemptive_schedule(problem) == {"guarded": None, "high": "n1"}


def test_no_preemption_for_equal_priority_and_not_outside_the_allowed_nodes():
    problem = Problem((node("n1"), node("n2")), (
        pod("same", 8, 100, "n1"), pod("low", 8, 0, "n2"), pod("high", 8, 100, allowed=("n1",))))
    assert preemptive_schedule(problem) == {"same": "n1", "low": "n2", "high": None}
