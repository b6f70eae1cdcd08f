"""Gangs bound to a network domain (a GPUJob's maxPeerDistance): all in one node, rack or zone."""

from __future__ import annotations

import pytest

from netsched.packing.policy import PRICED, STRICT
from netsched.packing.problem import Node, Pod, Problem, current
from netsched.packing.repair import greedy, repair
from netsched.packing.solver import solve

GPU = "nvidia.com/gpu"
RACK = "netsched.io/rack"
POLICIES = [pytest.param(STRICT, id="strict"), pytest.param(PRICED, id="priced")]


def node(name: str, rack: str, gpus: int = 4) -> Node:
    return Node(name, {GPU: gpus, "cpu": 64000}, {RACK: rack})


def pod(name: str, gpus: int, priority: int = 0, on: str | None = None, **kw) -> Pod:
    return Pod(name, {GPU: gpus, "cpu": 1000}, priority, on, **kw)


def gang(size: int, gpus: int, domain: str | None = RACK, priority: int = 100) -> tuple[Pod, ...]:
    return tuple(pod(f"g{i}", gpus, priority, gang="job", domain=domain) for i in range(size))


RACKS = (node("n1", "r1"), node("n2", "r1"), node("n3", "r2"), node("n4", "r2"))


def rack_of(placement: dict[str, str | None], name: str) -> str | None:
    where = placement[name]
    return next(n.labels[RACK] for n in RACKS if n.name == where) if where else None


@pytest.mark.parametrize("policy", POLICIES)
def test_a_gang_that_fits_only_across_racks_gets_one_rack_freed_and_lands_in_it(policy):
    """Each node has 2 of its 4 GPUs free: room for the 4 x 2-GPU gang, but only across racks."""
    lows = tuple(pod(f"low{k}", 2, 0, n.name) for k, n in enumerate(RACKS))
    problem = Problem(RACKS, lows + gang(4, 2))
    plan = solve(problem, budget=2.0, policy=policy)
    racks = {rack_of(plan.placement, f"g{i}") for i in range(4)}
    assert len(racks) == 1 and None not in racks
    changes = plan.changes(problem)
    # the freed rack's two low pods move to the other rack's free room: nothing is evicted
    assert changes["evictions"] == [] and len(changes["moves"]) == 2


@pytest.mark.parametrize("policy", POLICIES)
def test_without_a_domain_the_same_gang_takes_the_scattered_room_and_disturbs_nothing(policy):
    lows = tuple(pod(f"low{k}", 2, 0, n.name) for k, n in enumerate(RACKS))
    problem = Problem(RACKS, lows + gang(4, 2, domain=None))
    plan = solve(problem, budget=2.0, policy=policy)
    changes = plan.changes(problem)
    assert len(changes["placements"]) == 4 and changes["moves"] == changes["evictions"] == []


@pytest.mark.parametrize("policy", POLICIES)
def test_a_gang_no_domain_can_hold_is_not_placed_even_when_the_cluster_could(policy):
    nodes = (node("n1", "r1"), node("n3", "r2"))
    problem = Problem(nodes, gang(2, 4))
    assert greedy(problem) == {"g0": None, "g1": None}
    assert solve(problem, budget=2.0, policy=policy).placement == {"g0": None, "g1": None}
    spread = Problem(nodes, gang(2, 4, domain=None))
    assert None not in greedy(spread).values()


def test_a_node_without_the_domain_label_is_a_domain_of_its_own():
    nodes = (Node("a", {GPU: 4, "cpu": 64000}), Node("b", {GPU: 4, "cpu": 64000}))
    problem = Problem(nodes, gang(2, 2, domain="kubernetes.io/hostname"))
    plan = solve(problem, budget=2.0)
    assert plan.placement["g0"] == plan.placement["g1"] is not None


def test_the_repair_frees_the_domain_that_disturbs_the_fewest_pods():
    """Rack r1 holds two low pods, rack r2 one: the gang's room is made in r2."""
    lows = (pod("a", 2, 0, "n1"), pod("b", 2, 0, "n2"), pod("c", 4, 0, "n3"))
    problem = Problem(RACKS, lows + gang(2, 4))
    placement = repair(problem, current(problem))
    assert {rack_of(placement, "g0"), rack_of(placement, "g1")} == {"r2"}
    assert placement["a"] == "n1" and placement["b"] == "n2"
