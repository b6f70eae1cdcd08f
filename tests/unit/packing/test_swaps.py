"""The priced packer's first packing: pending pods added by moving and swapping pods between nodes."""

from __future__ import annotations

import time
from dataclasses import replace

from netsched.packing import swaps
from netsched.packing.default_scheduler import free_room
from netsched.packing.objective import tiers
from netsched.packing.policy import PRICED
from netsched.packing.problem import Node, Pod, Problem, current
from netsched.packing.repair import greedy, repair
from netsched.packing.solver import solve
from netsched.testing.packing_scenarios import failing, scenario

LATER = float("inf")  # no deadline: the search ends by its step limit, so the answer does not depend on load


def placed_by_tier(problem: Problem, placement: dict[str, str | None]) -> tuple[int, ...]:
    return tuple(sum(placement[p.name] is not None for p in problem.pods if p.priority >= t)
                 for t in tiers(problem))


def within_capacity(problem: Problem, placement: dict[str, str | None]) -> bool:
    return all(v >= 0 for room in free_room(problem.nodes, problem.pods, placement).values()
               for v in room.values())


def crossed() -> Problem:
    """Two nodes with room 2 each; the pending pod needs 4: only swapping a 5 with a 3 makes it
    (stateless replicas of its own priority: they may move for it, none may be preempted)."""
    nodes = (Node("n1", {"cpu": 10}), Node("n2", {"cpu": 10}))
    running = [Pod(name, {"cpu": cpu}, 0, node, stateless=True)
               for name, cpu, node in (("a5", 5, "n1"), ("a3", 3, "n1"), ("b5", 5, "n2"), ("b3", 3, "n2"))]
    return Problem(nodes, (*running, Pod("new", {"cpu": 4}, 0)))


def test_a_swap_makes_room_that_no_move_into_free_room_can():
    problem = crossed()
    everyone = {p.name for p in problem.pods}
    assert repair(problem, greedy(problem), policy=PRICED)["new"] is None  # the repair cannot
    found = swaps.add_pending(problem, current(problem), everyone, LATER)
    assert found["new"] is not None
    assert all(found[p.name] is not None for p in problem.pods)  # nothing stopped for it
    assert within_capacity(problem, found)
    assert sum(found[p.name] != p.node for p in problem.pods if p.running) == 2  # one swap, no more
    plan = solve(problem, budget=1.0, policy=PRICED)  # and the packer uses it over identical nodes
    assert plan.placement["new"] is not None and within_capacity(problem, plan.placement)


def test_pods_that_may_not_move_stay_and_then_nothing_is_added():
    problem = crossed()
    found = swaps.add_pending(problem, current(problem), {"a3"}, LATER)  # only one small pod may move
    assert found == current(problem)


def test_a_pod_that_fits_nowhere_changes_nothing():
    problem = crossed()
    problem = replace(problem, pods=(*problem.pods[:4], replace(problem.pods[4], requests={"cpu": 5})))
    everyone = {p.name for p in problem.pods}
    assert swaps.add_pending(problem, current(problem), everyone, LATER) == current(problem)


def test_a_gang_is_added_whole_or_not_at_all():
    problem = crossed()
    gang = tuple(Pod(f"g-{k}", {"cpu": 2}, 0, gang="g") for k in range(3))  # 6 of the 4 free: it cannot run
    problem = replace(problem, pods=(*problem.pods[:4], *gang))
    found = swaps.add_pending(problem, current(problem), {p.name for p in problem.pods}, LATER)
    assert found == current(problem)
    problem = replace(problem, pods=problem.pods[:-1])  # two of them (4) fit, after a swap
    found = swaps.add_pending(problem, current(problem), {p.name for p in problem.pods}, LATER)
    assert found["g-0"] is not None and found["g-1"] is not None and within_capacity(problem, found)


def test_nearly_full_nodes_of_large_pods_reach_the_volume_bound_where_the_repair_does_not():
    """32 nodes, 4 pods a node, 95% full: every pod fits by volume, and the search finds a packing
    of them all from the repair's answer (the case the placement model missed in a second)."""
    problem = next(s for seed in range(5000, 5050) if failing(s := scenario(32, 4, 4, 0.95, seed)))
    start = repair(problem, greedy(problem), policy=PRICED)
    assert any(v is None for v in start.values())
    found = swaps.add_pending(problem, start, {p.name for p in problem.pods}, LATER)
    assert all(v is not None for v in found.values())
    assert within_capacity(problem, found)
    assert placed_by_tier(problem, found) > placed_by_tier(problem, start)


def test_the_deadline_stops_the_search_with_a_valid_answer():
    problem = next(s for seed in range(5000, 5050) if failing(s := scenario(32, 4, 4, 1.05, seed)))
    start = repair(problem, greedy(problem), policy=PRICED)
    assert swaps.add_pending(problem, start, {p.name for p in problem.pods}, time.monotonic() - 1) == start


def test_nodes_need_not_be_alike_and_pods_that_may_not_move_stay():
    """A larger third node, a protected pod and a job's pod on it, a replica that may use only two
    nodes: the packer still adds the pending pod by a swap, moving only stateless replicas."""
    base = crossed()
    nodes = (*base.nodes, Node("n3", {"cpu": 20}))
    problem = Problem(nodes, (
        *base.pods[:4],
        Pod("daemon", {"cpu": 12}, 0, "n3", movable=False),
        Pod("job", {"cpu": 7}, 0, "n3"),  # a job's pod: it stays for work of its own priority
        Pod("pinned", {"cpu": 1}, 0, "n3", stateless=True, allowed=("n3",)),
        base.pods[4]))
    assert repair(problem, greedy(problem), policy=PRICED)["new"] is None
    plan = solve(problem, budget=1.0, policy=PRICED)
    assert plan.placement["new"] is not None and within_capacity(problem, plan.placement)
    assert [plan.placement[n] for n in ("daemon", "job", "pinned")] == ["n3", "n3", "n3"]
    assert any("swaps" in s["stage"] and s["status"] == "1 added" for s in plan.stages), plan.stages


def test_with_no_pod_the_policy_lets_move_the_search_does_not_run():
    """A job's pods stay for work of their own priority: nothing to swap, no time spent on it."""
    base = crossed()
    problem = replace(base, pods=tuple(replace(p, stateless=False) for p in base.pods))
    plan = solve(problem, budget=1.0, policy=PRICED)
    assert plan.placement == current(problem)
    assert not any("swaps" in s["stage"] for s in plan.stages), plan.stages
    assert any("swaps" in s["stage"] for s in solve(base, budget=1.0, policy=PRICED).stages)
