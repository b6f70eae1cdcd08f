"""The priced disruption policy: one weighted objective, moves and evictions priced by run time; the
default (priced, stateless replicas move, a job's work is lost only for higher-priority work)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from netsched.packing.default_scheduler import free_room
from netsched.packing.objective import PRICE_UNIT, Prices, run_seconds, score
from netsched.packing.policy import PRICED, STRICT, DisruptionPolicy, Policy, read_policy
from netsched.packing.problem import Budget, Node, Pod, Problem, current
from netsched.packing.repair import repair
from netsched.packing.solver import solve, splits_a_gang
from netsched.testing.packing_scenarios import failing, scenario

CHART_VALUES = Path(__file__).parents[3] / "charts" / "netsched" / "values.yaml"
GPU = "nvidia.com/gpu"
NOW = 1_800_000_000.0
HOUR = 3600.0


def node(name: str, gpus: int = 8) -> Node:
    return Node(name, {GPU: gpus, "cpu": 64000})


def pod(name: str, gpus: int, priority: int = 0, on: str | None = None, ran: float = 0.0, **kw) -> Pod:
    return Pod(name, {GPU: gpus, "cpu": 1000}, priority, on, started=NOW - ran if on else None, **kw)


def scattered(stateless: bool = False) -> Problem:
    """Two high pods of 4 GPUs on two nodes leave no room for a low pod of 8: moving one makes room."""
    return Problem((node("n1"), node("n2")), (
        pod("high-a", 4, 100, "n1", stateless=stateless), pod("high-b", 4, 100, "n2", stateless=stateless),
        pod("low", 8, 0)), taken=NOW)


def test_strict_never_moves_a_higher_pod_for_lower_work_the_default_moves_only_a_stateless_one():
    for stateless in (False, True):
        assert solve(scattered(stateless), budget=2.0, policy=STRICT).source == "current"
    assert solve(scattered(), budget=2.0, policy=PRICED).source == "current"  # a job's work stays
    problem = scattered(stateless=True)
    plan = solve(problem, budget=2.0, policy=PRICED)
    assert plan.source in ("solver", "repair") and plan.placement["low"] is not None
    assert len(plan.changes(problem)["moves"]) == 1 and plan.changes(problem)["evictions"] == []


def test_the_classes_the_policy_protects_from_lower_work_stay_put():
    plan = solve(scattered(stateless=True), budget=2.0,
                 policy=Policy(priced=True, move_for_lower=None, stay_for_lower=frozenset({100})))
    assert plan.source == "current" and plan.placement["low"] is None
    lets_jobs_move = Policy(priced=True, move_for_lower=frozenset({100}))
    assert solve(scattered(), budget=2.0, policy=lets_jobs_move).placement["low"] is not None


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
    assert policy.move_for_lower == frozenset() and policy.stay_for_lower == frozenset({100})
    assert policy.evict_for_lower == frozenset({10})
    assert (policy.move_price_of(100), policy.evict_price_of(100)) == (1, 9)
    assert (policy.move_price_of(10), policy.evict_price_of(10)) == (1, 1)
    # room for low takes moving a prod pod onto the other, which the prod rule forbids for lower work
    assert solve(problem, budget=2.0, policy=policy).placement["low"] is None
    # without a rule, a job's pods stay for lower work; moveForLower: true lets them move
    unruled = DisruptionPolicy.from_doc({"mode": "priced"}).resolve(problem)
    assert solve(problem, budget=2.0, policy=unruled).placement["low"] is None
    let = DisruptionPolicy.from_doc({"classes": [{"priorityClassName": "prod", "moveForLower": True}]})
    plan = solve(problem, budget=2.0, policy=let.resolve(problem))
    assert plan.placement["low"] in ("n1", "n2") and plan.changes(problem)["evictions"] == []
    assert [m[0] for m in plan.changes(problem)["moves"]] in (["prod-a"], ["prod-b"])


def test_no_policy_the_chart_default_and_an_empty_document_are_the_priced_default_strict_is_one_value_away(
        ):
    problem = scattered()
    chart = yaml.safe_load(CHART_VALUES.read_text())["operator"]["packer"]["policy"]
    for default in (DisruptionPolicy(), DisruptionPolicy.from_doc(None), DisruptionPolicy.from_doc({}),
                    DisruptionPolicy.from_doc(chart)):
        assert default.resolve(problem) == PRICED
    assert DisruptionPolicy.from_doc({"mode": "strict"}).resolve(problem) is STRICT


@pytest.mark.parametrize("doc, says", [
    pytest.param("priced", "expected a mapping with 'mode'", id="not-a-mapping"),
    pytest.param({"mode": "lenient"}, "mode is 'lenient'; use 'priced'", id="unknown-mode"),
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
    def problem(stateless: bool) -> Problem:
        return Problem((node("n1"), node("n2")), (
            pod("a", 4, 0, "n1", stateless=stateless), pod("b", 4, 0, "n2", stateless=stateless),
            pod("c", 8, 0)), taken=NOW)
    # c's stateless equals may move for it: one goes to the other
    moved = repair(problem(True), current(problem(True)), policy=PRICED)
    other = {"n1": "n2", "n2": "n1"}[moved["c"]]
    assert moved["a"] == moved["b"] == other
    jobs = problem(False)
    assert repair(jobs, current(jobs), policy=PRICED) == current(jobs)
    assert repair(jobs, current(jobs), policy=Policy(priced=True, move_for_lower=None))["c"] is not None


# ---- the default: priced, stateless replicas move, a job's work is lost only for higher work ------------
def job_or_replica(replica_stateless: bool = True) -> Problem:
    """A low GPUJob pod (an hour in) on n1, a mid replica (ten hours up) on n2, n3 free but not for the
    urgent pod (another GPU model): room for it on n1 or n2 means moving one of them to n3."""
    return Problem((node("n1"), node("n2"), node("n3")), (
        pod("train-0", 8, 10, "n1", ran=HOUR, gang="ml/train"),
        pod("web-0", 8, 500, "n2", ran=10 * HOUR, stateless=replica_stateless),
        pod("urgent-0", 8, 1000, gang="ml/urgent", allowed=("n1", "n2"))), taken=NOW)


def test_the_default_moves_a_stateless_replica_rather_than_restart_a_job_strict_and_run_time_alone_do_not():
    problem = job_or_replica()
    plan = solve(problem, budget=2.0, policy=PRICED)
    assert plan.changes(problem) == {"moves": [("web-0", "n2", "n3")], "evictions": [],
                                     "placements": [("urgent-0", "n2")]}
    restarts_the_job = {"moves": [("train-0", "n1", "n3")], "evictions": [],
                        "placements": [("urgent-0", "n1")]}
    # strict spares the higher tier first
    assert solve(problem, budget=2.0, policy=STRICT).changes(problem) == restarts_the_job
    # priced by run time alone (the replica as if its restart lost its ten hours), the job is cheaper
    as_job = job_or_replica(replica_stateless=False)
    assert solve(as_job, budget=2.0, policy=PRICED).changes(as_job) == restarts_the_job


def test_a_stateless_replica_costs_its_move_price_however_long_it_ran_a_job_its_run_time_too():
    problem = job_or_replica()
    ran = run_seconds(problem)
    assert ran["web-0"] == 0 and ran["train-0"] == HOUR
    prices = Prices(problem, PRICED)
    train, web = problem.pods[0], problem.pods[1]
    assert (prices.move(web), prices.evict(web)) == (PRICE_UNIT, PRICE_UNIT)
    assert (prices.move(train), prices.evict(train)) == (61 * PRICE_UNIT,) * 2  # 1 point + 60 minutes lost


def test_a_restart_is_priced_to_the_second_so_the_younger_of_two_jobs_under_a_minute_old_is_chosen():
    # both jobs have run under a minute: priced by whole minutes they would cost the same
    problem = Problem((node("n1"), node("n2")),
                      (pod("old", 8, 0, "n1", ran=25), pod("young", 8, 0, "n2", ran=5),
                       pod("urgent", 8, 100)),
                      taken=NOW)
    changes = solve(problem, budget=2.0, policy=PRICED).changes(problem)
    assert changes["evictions"] == [("young", "n2")] and changes["placements"] == [("urgent", "n2")]


def test_for_equal_or_lower_work_only_stateless_replicas_move_and_nothing_is_evicted():
    def problem(stateless: bool) -> Problem:  # a peer of 8 waits; room only if a 4-GPU pod moves over
        return Problem((node("n1"), node("n2")), (
            pod("a", 4, 10, "n1", stateless=stateless), pod("b", 4, 10, "n2", stateless=stateless),
            pod("peer", 8, 10)), taken=NOW)
    assert PRICED.may_move_for_lower(problem(True).pods[0])
    assert not PRICED.may_move_for_lower(problem(False).pods[0])
    assert solve(problem(False), budget=2.0, policy=PRICED).source == "current"
    replicas = problem(True)
    changes = solve(replicas, budget=2.0, policy=PRICED).changes(replicas)
    assert len(changes["moves"]) == 1 and changes["evictions"] == [] and changes["placements"][0][0] == "peer"


def test_the_admin_says_per_class_which_pods_move_for_lower_work():
    job, replica = pod("j", 4, 10, "n1"), pod("r", 4, 10, "n1", stateless=True)
    assert Policy(priced=True, move_for_lower=frozenset({10})).may_move_for_lower(job)
    assert not Policy(priced=True, stay_for_lower=frozenset({10})).may_move_for_lower(replica)
    assert Policy(priced=True, move_for_lower=None).may_move_for_lower(job)


def test_no_answer_stops_part_of_a_gang():
    """The greedy repair preempts pod by pod: its answer would stop two of a four-pod job's pods."""
    nodes = tuple(node(f"n{i}") for i in range(4))
    gang = tuple(pod(f"big-{i}", 8, 0, f"n{i}", ran=100.0, gang="ml/big") for i in range(4))
    urgent = (pod("next-0", 8, 1000, gang="ml/next"), pod("next-1", 8, 1000, gang="ml/next"))
    problem = Problem(nodes, gang + urgent, taken=NOW)
    half = current(problem) | {"big-0": None, "big-1": None, "next-0": "n0", "next-1": "n1"}
    assert splits_a_gang(problem, half) and not splits_a_gang(problem, current(problem))
    assert score(problem, half, PRICED) > score(problem, current(problem), PRICED)  # why it needs guarding
    plan = solve(problem, budget=2.0, policy=PRICED)
    assert sorted(e[0] for e in plan.changes(problem)["evictions"]) == [f"big-{i}" for i in range(4)]


def test_snapshots_carry_which_pods_are_stateless():
    problem = job_or_replica()
    assert Problem.from_json(problem.to_json()) == problem
    old = Problem.from_json({"nodes": [{"name": "n1", "capacity": {GPU: 8}}],
                             "pods": [{"name": "p", "requests": {GPU: 1}, "node": "n1"}]})
    assert old.pods[0].stateless is False  # a snapshot that does not say: a job's pod, the safe reading


def test_among_nodes_with_equal_room_the_candidates_are_those_whose_pods_lost_least_work():
    # ten full nodes, the one job that just started on the last: the priced policy's candidate
    # nodes (six of ten) must include it, or the plan restarts an older job
    names = [f"n{i}" for i in range(10)]
    pods = [pod(f"old-{i}", 8, 0, n, ran=600) for i, n in enumerate(names[:-1])]
    problem = Problem(tuple(node(n) for n in names),
                      (*pods, pod("young", 8, 0, names[-1], ran=5), pod("urgent", 8, 100)), taken=NOW)
    changes = solve(problem, budget=2.0, policy=PRICED).changes(problem)
    assert changes["evictions"] == [("young", "n9")] and changes["placements"] == [("urgent", "n9")]
