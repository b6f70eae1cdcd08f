"""The CP-SAT packer on small cases whose best answer is known."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from netsched.packing import cpsat_model, objective, pieces, repair, solver
from netsched.packing.cpsat_model import model_size
from netsched.packing.default_scheduler import free_room
from netsched.packing.objective import score
from netsched.packing.policy import PRICED
from netsched.packing.problem import Budget, Node, Pod, Problem
from netsched.packing.solver import MAX_VARS, VARS_PER_SECOND, solve
from netsched.testing.packing_scenarios import failing, scenario

GPU = "nvidia.com/gpu"


def node(name: str, gpus: int = 8) -> Node:
    return Node(name, {GPU: gpus, "cpu": 64000})


def pod(name: str, gpus: int, priority: int = 0, on: str | None = None, **kw) -> Pod:
    return Pod(name, {GPU: gpus, "cpu": 1000}, priority, on, **kw)


def test_a_high_priority_pod_gets_room_by_moving_a_low_one_rather_than_evicting_it():
    problem = Problem((node("n1"), node("n2")),
                      (pod("low-a", 4, 0, "n1"), pod("low-b", 4, 0, "n2"), pod("high", 8, 100)))
    plan = solve(problem, budget=2.0)
    changes = plan.changes(problem)
    assert plan.source == "solver" and plan.proven_optimal
    assert [pod for pod, _ in changes["placements"]] == ["high"]
    assert plan.placement["low-a"] == plan.placement["low-b"] != plan.placement["high"]
    assert len(changes["moves"]) == 1 and changes["evictions"] == []  # 4+4 fit on one node: a move


def test_when_only_an_eviction_makes_room_the_lowest_priority_pod_goes():
    problem = Problem((node("n1"),), (pod("low", 4, 0, "n1"), pod("mid", 4, 50, "n1"), pod("high", 4, 100)))
    plan = solve(problem, budget=2.0)
    assert plan.changes(problem)["evictions"] == [("low", "n1")] and plan.placement["high"] == "n1"


@pytest.mark.parametrize("pods, budgets, expect_high", [
    pytest.param((pod("low", 8, 0, "n1", pdb="keep"), pod("high", 8, 100)), (Budget("keep", 0),), None,
                 id="pdb-forbids-the-eviction"),
    pytest.param((pod("low", 8, 0, "n1", pdb="keep"), pod("high", 8, 100)), (Budget("keep", 1),), "n1",
                 id="pdb-allows-one"),
    pytest.param((pod("low", 8, 0, "n1", movable=False), pod("high", 8, 100)), (), None,
                 id="protected-pod-stays"),
])
def test_pdbs_and_protected_pods_are_respected(pods, budgets, expect_high):
    problem = Problem((node("n1"),), pods, budgets)
    assert solve(problem, budget=2.0).placement["high"] == expect_high


def test_a_gang_is_placed_whole_or_not_at_all():
    problem = Problem((node("n1"), node("n2")),
                      tuple(pod(f"g{i}", 8, 100, gang="g") for i in range(3)) + (pod("solo", 4, 0),))
    plan = solve(problem, budget=2.0)
    assert [plan.placement[f"g{i}"] for i in range(3)] == [None, None, None]  # 3 x 8 GPUs > 16
    assert plan.placement["solo"] is not None


def test_network_preference_breaks_ties_last():
    problem = Problem((node("n1"), node("n2")), (pod("p", 4, 0, preference={"n2": 10}),))
    assert solve(problem, budget=2.0).placement["p"] == "n2"


@pytest.mark.parametrize("nodes, budget, whole", [
    pytest.param(16, 0.3, True, id="one-model"),
    pytest.param(50, 0.1, False, id="in-pieces"),  # 20,000 variables: too many to build in 0.1 s
])
def test_the_plan_is_feasible_whichever_way_the_budget_sends_the_solve(nodes, budget, whole):
    """How long a solve takes is measured by bench/packing_bench.py, not here."""
    problem = next(s for seed in range(30) if failing(s := scenario(nodes, 8, 4, 1.05, seed)))
    assert (model_size(problem) <= min(MAX_VARS, VARS_PER_SECOND * budget)) == whole
    plan = solve(problem, budget=budget)
    assert plan.score == score(problem, plan.placement)
    free = free_room(problem.nodes, problem.pods, plan.placement)
    assert all(v >= 0 for room in free.values() for v in room.values())


def test_a_spent_budget_starts_no_solver_stage_and_keeps_a_valid_answer(monkeypatch):
    """The solver's clock, not this machine's speed, decides: past the deadline nothing starts."""
    readings = iter([0.0])  # the start; every later reading is long past the deadline
    clock = SimpleNamespace(monotonic=lambda: next(readings, 100.0), time=lambda: 1_800_000_000.0)
    for module in (solver, objective, repair, cpsat_model, pieces):  # every clock the solve reads
        monkeypatch.setattr(module, "time", clock)
    problem = Problem((node("n1"), node("n2")),
                      (pod("low-a", 4, 0, "n1"), pod("low-b", 4, 0, "n2"), pod("high", 8, 100)))
    plan = solve(problem, budget=2.0)
    assert plan.source in ("current", "greedy") and plan.stages
    assert all(s["status"] == "skipped: budget spent" for s in plan.stages)
    assert plan.placement["low-a"] == "n1" and plan.placement["low-b"] == "n2"
    assert plan.score == score(problem, plan.placement)


def test_a_running_pod_outside_its_allowed_nodes_may_stay_and_is_not_moved_for_free():
    problem = Problem((node("n1"), node("n2")), (pod("p", 4, 0, "n1", allowed=("n2",)), pod("q", 4, 0)))
    plan = solve(problem, budget=2.0)
    assert plan.placement["p"] == "n1" and plan.changes(problem)["moves"] == []


def test_a_bad_snapshot_is_refused_with_the_field_named():
    with pytest.raises(ValueError, match="runs on unknown node 'ghost'"):
        Problem.from_json({"nodes": [], "pods": [{"name": "p", "requests": {}, "node": "ghost"}]})
    with pytest.raises(ValueError, match="missing field 'requests'"):
        Problem.from_json({"nodes": [], "pods": [{"name": "p"}]})


def test_a_pod_the_greedy_start_evicted_enters_a_piece_as_pending():
    # the greedy start evicted "low" for "high"; the piece may place "low" again but never runs it at home
    problem = Problem((node("n1"), node("n2"), node("n3"), node("n4")),
                      (pod("low", 4, 0, "n1"), pod("keep", 4, 100, "n1"), pod("high", 8, 100)))
    working = {"low": None, "keep": "n1", "high": None}
    _, answer = pieces.neighbourhoods(problem, working, time.monotonic() + 5.0, 1, MAX_VARS, PRICED)
    assert answer["keep"] == "n1" and answer["high"] in ("n2", "n3", "n4")
