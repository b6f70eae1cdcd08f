"""The priced disruption policy: one weighted objective, moves and evictions priced by run time."""

from __future__ import annotations

from dataclasses import replace

import pytest

from netsched.packing.default_scheduler import free_room
from netsched.packing.policy import PRICED, STRICT, DisruptionPolicy, Policy, read_policy
from netsched.packing.problem import Budget, Node, Pod, Problem
from netsched.packing.solver import current, repair, score, solve
from netsched.testing.packing_scenarios import failing, scenario

GPU = "nvidia.com/gpu"
NOW = 1_800_000_000.0
HOUR = 3600.0


def node(name: str, gpus: int = 8) -> Node:
    return Node(name, {GPU: gpus, "cpu": 64000})


def pod(name: str, gpus: int, priority: int = 0, on: str | None = None, ran: float = 0.0, **kw) -> Pod:
    return Pod(name, {GPU: gpus, "cpu": 1000}, priority, on, started=NOW - ran if on else None, **kw)


def scattered() -> Problem:
    """Two high pods of 4 GPUs on two nodes leave no room for a low pod of 8: moving one makes room."""
    return Problem((node("n1"), node("n2")), (
        pod("high-a", 4, 100, "n1"), pod("high-b", 4, 100, "n2"), pod("low", 8, 0)), taken=NOW)


def test_strict_never_moves_a_higher_pod_for_lower_work_priced_does():
    problem = scattered()
    assert solve(problem, budget=2.0, policy=STRICT).source == "current"
    plan = solve(problem, budget=2.0, policy=PRICED)
    assert plan.source in ("solver", "repair") and plan.placement["low"] is not None
    assert len(plan.changes(problem)["moves"]) == 1 and plan.changes(problem)["evictions"] == []


def test_the_classes_the_policy_protects_from_lower_work_stay_put():
    plan = solve(scattered(), budget=2.0, policy=Policy(priced=True, move_for_lower=frozenset({0})))
    assert plan.source == "current" and plan.placement["low"] is None


def test_a_job_near_its_end_is_not_evicted_while_a_just_started_one_of_its_priority_could_be():
    problem = Problem((node("n1"), node("n2")), (
        pod("old", 8, 0, "n1", ran=10 * HOUR), pod("young", 8, 0, "n2", ran=60.0), pod("high", 8, 100)),
        taken=NOW)
    for policy in (PRICED, STRICT):  # strict, too, among equal answers disturbs what ran least
        for order in (problem, Problem(problem.nodes, problem.pods[::-1], taken=NOW)):
            plan = solve(order, budget=2.0, policy=policy)
            assert plan.changes(order)["evictions"] == [("young", "n2")] and plan.placement["high"] == "n2"


def test_a_plan_below_the_minimum_gain_is_not_proposed():
    values = ((0, 10), (100, 50))
    problem = Problem((node("n1"),), (pod("low", 8, 0, "n1", ran=HOUR), pod("high", 8, 100)), taken=NOW)
    # placing high gains 50, evicting low loses 10 and costs 1 + 60 (an hour of run time)
    assert solve(problem, budget=2.0, policy=Policy(priced=True, values=values)).source == "current"
    cheap = Policy(priced=True, values=values, points_per_minute=0.0)  # gain 50 - 10 - 1 = 39
    assert solve(problem, budget=2.0, policy=cheap).placement["high"] == "n1"
    assert solve(problem, budget=2.0, policy=Policy(priced=True, values=values, points_per_minute=0.0,
                                                    min_gain=40)).source == "current"


def test_budgets_and_protected_pods_hold_under_the_priced_policy():
    problem = Problem((node("n1"), node("n2")), (
        pod("guarded", 8, 0, "n1", pdb="keep"), pod("fixed", 8, 0, "n2", movable=False), pod("high", 8, 100)),
        (Budget("keep", 0),), taken=NOW)
    assert solve(problem, budget=2.0, policy=PRICED).placement["high"] is None


def test_the_greedy_repair_preempts_like_kube_scheduler_and_moves_victims_into_free_room():
    problem = Problem((node("n1"), node("n2", gpus=4)), (
        pod("low", 4, 0, "n1"), pod("mid", 4, 50, "n1"), pod("high", 8, 100)), taken=NOW)
    # both must go from n1; the higher victim gets the free room elsewhere first
    assert repair(problem, current(problem)) == {"low": None, "mid": "n2", "high": "n1"}


@pytest.mark.parametrize("nodes", [4, 32])
def test_the_priced_plan_is_valid_and_never_worse_than_now_by_its_own_objective(nodes):
    """How long a solve takes is measured by bench/packing_bench.py, not here."""
    problem = next(s for seed in range(30) if failing(s := scenario(nodes, 8, 4, 1.0, seed)))
    plan = solve(problem, budget=0.5, policy=PRICED)
    assert plan.score == score(problem, plan.placement, PRICED) >= score(problem, current(problem), PRICED)
    free = free_room(problem.nodes, problem.pods, plan.placement)
    assert all(v >= 0 for room in free.values() for v in room.values())
    # classes the policy does not let be evicted for lower work lose pods only to higher pods placed
    placed = {p.priority for p in problem.pods if not p.running and plan.placement[p.name]}
    for p in problem.pods:
        if p.running and plan.placement[p.name] is None:
            assert any(q > p.priority for q in placed)


def test_old_snapshots_without_start_times_load_and_new_ones_round_trip():
    old = Problem.from_json({"nodes": [{"name": "n1", "capacity": {GPU: 8}}],
                             "pods": [{"name": "p", "requests": {GPU: 1}, "node": "n1"}]})
    assert old.pods[0].started is None and old.taken is None
    new = scattered()
    assert Problem.from_json(new.to_json()) == new


# ---- the policy an admin writes -------------------------------------------------------------------
def classed(name: str, gpus: int, priority: int, cls: str, on: str | None = None) -> Pod:
    return replace(pod(name, gpus, priority, on), priority_class=cls)


def test_a_written_policy_resolves_class_names_to_the_priorities_their_pods_carry():
    problem = Problem((node("n1"), node("n2"), node("n3", gpus=4)), (
        classed("prod-a", 4, 100, "prod", "n1"), classed("prod-b", 4, 100, "prod", "n2"),
        classed("batch", 4, 10, "batch", "n3"), classed("low", 8, 0, "best-effort")), taken=NOW)
    written = DisruptionPolicy.from_doc({
        "mode": "priced", "minGain": 3, "pointsPerMinute": 0.5, "classes": [
            {"priorityClassName": "prod", "moveForLower": False, "evictPrice": 9},
            {"priority": 10, "evictForLower": True},
            {"priorityClassName": "not-in-this-cluster", "moveForLower": False}]})
    policy = written.resolve(problem)
    assert policy.priced and policy.min_gain == 3 and policy.points_per_minute == 0.5
    assert policy.move_for_lower == frozenset({0, 10}) and policy.evict_for_lower == frozenset({10})
    assert (policy.move_price_of(100), policy.evict_price_of(100)) == (1, 9)
    assert (policy.move_price_of(10), policy.evict_price_of(10)) == (1, 1)
    # room for low takes moving a prod pod onto the other, which the prod rule forbids for lower work
    assert solve(problem, budget=2.0, policy=policy).placement["low"] is None
    unruled = DisruptionPolicy.from_doc({"mode": "priced"}).resolve(problem)
    plan = solve(problem, budget=2.0, policy=unruled)
    assert plan.placement["low"] in ("n1", "n2") and plan.changes(problem)["evictions"] == []
    assert [m[0] for m in plan.changes(problem)["moves"]] in (["prod-a"], ["prod-b"])


def test_the_default_and_strict_policies_resolve_to_strict():
    problem = scattered()
    assert DisruptionPolicy.from_doc(None).resolve(problem) is STRICT
    assert DisruptionPolicy.from_doc({"mode": "strict"}).resolve(problem) is STRICT
    assert DisruptionPolicy.from_doc({"mode": "priced"}).resolve(problem) == PRICED


@pytest.mark.parametrize("doc, says", [
    pytest.param("priced", "expected a mapping with 'mode'", id="not-a-mapping"),
    pytest.param({"mode": "lenient"}, "mode is 'lenient'; use 'strict'", id="unknown-mode"),
    pytest.param({"mode": "priced", "minGian": 3}, "unknown field(s) minGian", id="misspelt-field"),
    pytest.param({"minGain": -1}, "minGain must be a whole number of at least 0", id="negative-gain"),
    pytest.param({"movePrice": True}, "movePrice must be a whole number", id="bool-price"),
    pytest.param({"pointsPerMinute": "fast"}, "pointsPerMinute must be a number", id="text-rate"),
    pytest.param({"classes": {"prod": {}}}, "classes must be a list", id="classes-not-a-list"),
    pytest.param({"classes": [{"moveForLower": False}]}, "classes[0]: give exactly one of priorityClassName",
                 id="rule-without-class"),
    pytest.param({"classes": [{"priority": 1, "priorityClassName": "x"}]}, "give exactly one of",
                 id="rule-with-both"),
    pytest.param({"classes": [{"priority": 1, "moveForLower": "no"}]}, "moveForLower must be true or false",
                 id="rule-flag-not-bool"),
])
def test_a_policy_it_cannot_use_is_refused_naming_the_field(doc, says):
    with pytest.raises(ValueError, match="^the chart's policy: ") as err:
        DisruptionPolicy.from_doc(doc, "the chart's policy")
    assert says in str(err.value)


def test_a_policy_file_is_read_and_a_broken_one_named(tmp_path):
    good = tmp_path / "policy.yaml"
    good.write_text("mode: priced\nclasses:\n  - {priorityClassName: prod, moveForLower: false}\n")
    assert read_policy(good).mode == "priced" and read_policy(good).classes[0].name == "prod"
    bad = tmp_path / "broken.yaml"
    bad.write_text("mode: [priced\n")
    with pytest.raises(ValueError, match=f"disruption policy {bad}: not YAML or JSON"):
        read_policy(bad)
    with pytest.raises(ValueError, match="cannot read it"):
        read_policy(tmp_path / "missing.yaml")


def test_the_repair_makes_room_by_moves_only_where_the_policy_lets_pods_move():
    problem = Problem((node("n1"), node("n2")), (pod("a", 4, 0, "n1"), pod("b", 4, 0, "n2"), pod("c", 8, 0)),
                      taken=NOW)
    # c's equals may move for it: one goes to the other
    moved = repair(problem, current(problem), policy=PRICED)
    other = {"n1": "n2", "n2": "n1"}[moved["c"]]
    assert moved["a"] == moved["b"] == other
    pinned = repair(problem, current(problem), policy=Policy(priced=True, move_for_lower=frozenset()))
    assert pinned == current(problem)
