"""The priced packer's fast paths: the greedy fill and repair over a node x resource matrix, and the
placements over identical nodes; each checked against the plain computation or a proven optimum."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from netsched.packing import identical
from netsched.packing.cpsat_model import Model, OutOfTime
from netsched.packing.default_scheduler import free_room, schedule
from netsched.packing.objective import tiers
from netsched.packing.policy import PRICED, STRICT
from netsched.packing.problem import Budget, Node, Pod, Problem, current
from netsched.packing.repair import greedy, repair
from netsched.packing.solver import solve
from netsched.testing.packing_scenarios import failing, scenario


def placed_by_tier(problem: Problem, placement: dict[str, str | None]) -> tuple[int, ...]:
    return tuple(sum(placement[p.name] is not None for p in problem.pods if p.priority >= t)
                 for t in tiers(problem))


def assert_valid(problem: Problem, placement: dict[str, str | None]) -> None:
    """Within every node's capacity; a running pod stops only for a placed pending pod above it."""
    free = free_room(problem.nodes, problem.pods, placement)
    assert all(v >= 0 for room in free.values() for v in room.values())
    for p in problem.pods:
        if p.running and placement[p.name] is None:
            assert any(not q.running and placement[q.name] and q.priority > p.priority for q in problem.pods)


def first_failing(nodes: int, ppn: int, util: float, **kw) -> Problem:
    return next(s for seed in range(50) if failing(s := scenario(nodes, ppn, 4, util, seed, **kw)))


def test_the_greedy_fill_makes_the_default_schedulers_choices():
    """The matrix only rules nodes out: the node chosen is the one `schedule` picks over all nodes."""
    ran = first_failing(16, 8, 0.9)
    problem = replace(ran, pods=tuple(replace(p, node=None) for p in ran.pods))  # all pending
    order = sorted(problem.pods, key=lambda p: -p.priority)
    expected = schedule(problem.nodes, free_room(problem.nodes, ()), order)
    assert greedy(problem) == expected
    assert sum(v is not None for v in expected.values()) > len(problem.pods) // 2  # not vacuous


def test_the_repair_stays_within_capacity_and_places_at_least_what_the_default_left():
    problem = first_failing(60, 10, 1.0, gpus=True)
    placement = repair(problem, greedy(problem))
    assert_valid(problem, placement)
    assert placed_by_tier(problem, placement) > placed_by_tier(problem, current(problem))


def test_identical_placements_are_proven_valid_and_the_solve_reaches_them():
    problem = first_failing(4, 4, 0.95)
    assert identical.applies(problem, PRICED)
    found, proven = identical.place(problem, PRICED, current(problem), lambda _: 1, time.monotonic() + 30, 2)
    assert found is not None and proven
    assert_valid(problem, found)
    assert placed_by_tier(problem, found) > placed_by_tier(problem, current(problem))
    plan = solve(problem, budget=1.0, policy=PRICED)
    assert placed_by_tier(problem, plan.placement) == placed_by_tier(problem, found)
    assert_valid(problem, plan.placement)


def test_bins_go_to_the_nodes_their_pods_run_on():
    nodes = (Node("n1", {"cpu": 10}), Node("n2", {"cpu": 10}))
    problem = Problem(nodes, (Pod("big", {"cpu": 5}, 0, "n2"), Pod("small", {"cpu": 4}, 0, "n1"),
                              Pod("new", {"cpu": 7}, 100)))
    worth = {"big": 5, "small": 1}.__getitem__  # what moving each would cost
    found, proven = identical.place(problem, PRICED, current(problem), worth, time.monotonic() + 30, 2)
    assert proven and found is not None
    assert found == {"big": "n2", "small": "n2", "new": "n1"}  # the cheaper pod moves to make room


@pytest.mark.parametrize("change", [
    pytest.param(lambda p: replace(p, nodes=(replace(p.nodes[0], capacity={"cpu": 1}), *p.nodes[1:])),
                 id="nodes-differ"),
    pytest.param(lambda p: replace(p, budgets=(Budget("pdb", 0),)), id="disruption-budget"),
    pytest.param(lambda p: replace(p, pods=(replace(p.pods[0], movable=False), *p.pods[1:])),
                 id="protected-pod"),
])
def test_placements_over_identical_nodes_only_where_no_rule_tells_nodes_apart(change):
    problem = first_failing(4, 4, 0.95)
    assert identical.applies(problem, PRICED) and not identical.applies(problem, STRICT)
    assert not identical.applies(change(problem), PRICED)
    assert not identical.applies(problem, replace(PRICED, identical=False))


def test_nodes_that_differ_only_in_their_labels_are_identical_unless_a_gang_names_a_domain():
    """Every live node has a hostname label of its own: that alone must not rule the stage out."""
    problem = first_failing(4, 4, 0.95)
    labelled = replace(problem, nodes=tuple(
        replace(n, labels={"kubernetes.io/hostname": n.name, "topology.kubernetes.io/zone": f"z{i % 2}"})
        for i, n in enumerate(problem.nodes)))
    assert identical.applies(labelled, PRICED)
    pending = next(p for p in labelled.pods if not p.running)
    in_a_zone = replace(labelled, pods=tuple(
        replace(p, gang="g", domain="topology.kubernetes.io/zone") if p is pending else p
        for p in labelled.pods))
    assert not identical.applies(in_a_zone, PRICED)


def test_a_model_whose_building_passes_the_deadline_is_given_up_and_the_plan_stays_valid():
    problem = first_failing(32, 8, 1.0)
    with pytest.raises(OutOfTime):
        Model(problem, current(problem), PRICED, stop_at=time.monotonic() - 1)
    found, proven = identical.place(problem, PRICED, current(problem), lambda _: 1, time.monotonic() - 1, 2)
    assert found is None and not proven
