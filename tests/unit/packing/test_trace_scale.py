"""The packer at a thousand nodes: the room search ranks nodes in shares of their capacity and tries
only nodes where room can be made; the pieces of a large problem find room held by pods of the
seeds' own priority when the policy lets those move; a seed the start evicted leaves its piece
solvable; the candidate search keeps to the deadline; moves and swaps run at any size."""

from __future__ import annotations

import time
from collections import Counter, defaultdict

import pytest

from netsched.packing import pieces, repair
from netsched.packing.cpsat_model import OutOfTime, candidates
from netsched.packing.default_scheduler import free_room
from netsched.packing.policy import PRICED
from netsched.packing.problem import Node, Pod, Problem, current
from netsched.packing.room import Room
from netsched.packing.solver import solve

GPU = "nvidia.com/gpu"


def node(name: str, gpus: int = 8, memory: int = 1000) -> Node:
    return Node(name, {GPU: gpus, "memory": memory})


def pod(name: str, gpus: int, memory: int, priority: int = 0, on: str | None = None, **kw) -> Pod:
    return Pod(name, {GPU: gpus, "memory": memory}, priority, on, **kw)


def test_the_room_search_tries_the_node_where_lower_pods_can_make_way_not_the_nearest_misses():
    # four nodes miss one GPU for "new" and nothing else, but only its equals hold them (a job's pods,
    # which the default policy never moves for equal work); "x" misses a GPU and some memory (in raw
    # units far more), and a best-effort pod there can move to "z"
    decoys = [node(f"d{i}") for i in range(4)]
    nodes = (*decoys, node("x"), node("z"))
    running = [pod(f"eq{i}", 7, 100, 2, f"d{i}") for i in range(4)]
    running += [pod("be", 1, 500, 0, "x"), pod("xeq", 6, 400, 2, "x"), pod("zeq", 7, 100, 2, "z")]
    new = pod("new", 2, 200, 2)
    problem = Problem(nodes, (*running, new))
    placement = current(problem)
    room = Room(problem, free_room(problem.nodes, problem.pods))
    room.track(tuple(running), placement)
    at_home: dict[str, list[Pod]] = defaultdict(list)
    for p in running:
        at_home[p.node or ""].append(p)
    assert repair._make_room_by_moves(problem, problem.nodes, at_home, placement, Counter(), new, PRICED,
                                      room, any_mobile=False)
    assert placement["new"] == "x" and placement["be"] not in ("x", None)


def test_a_piece_counts_room_its_equals_may_give_up():
    # one priority for all; the running pods are stateless replicas, which the default policy moves for
    # equal work: room for "new" is made by moving one of them onto the other's node
    problem = Problem((node("n1", 2), node("n2", 2)),
                      (pod("a", 1, 10, 0, "n1", stateless=True), pod("b", 1, 10, 0, "n2", stateless=True),
                       pod("new", 2, 10)))
    stages, answer = pieces.neighbourhoods(problem, current(problem), time.monotonic() + 5.0, 1, 1000, PRICED)
    assert answer["new"] is not None and {answer["a"], answer["b"]} == {"n1", "n2"} - {answer["new"]}
    assert stages[0]["status"] == "improved"


def test_a_seed_the_start_evicted_leaves_its_piece_solvable():
    # the start evicted "low" from n1 and put "high" in its room; with "low" at home beside "high" and
    # neither free to make way, the piece had no solution; as a pending pod it goes to n2
    problem = Problem((node("n1"), node("n2")),
                      (pod("low", 4, 10, 0, "n1"), pod("keep", 4, 10, 100, "n1"), pod("high", 4, 10, 100)))
    working = {"low": None, "keep": "n1", "high": "n1"}
    stages, answer = pieces.neighbourhoods(problem, working, time.monotonic() + 5.0, 1, 1000, PRICED)
    assert stages[0]["status"] == "improved" and answer["low"] == "n2"


def test_the_candidate_search_keeps_to_the_deadline():
    problem = Problem(tuple(node(f"n{i}") for i in range(50)), tuple(pod(f"p{i}", 1, 10) for i in range(300)))
    with pytest.raises(OutOfTime):
        candidates(problem, PRICED, current(problem), stop_at=time.monotonic() - 1)
    where, cut = candidates(problem, PRICED, current(problem))
    assert cut and all(len(nodes) == PRICED.candidates for nodes in where.values())


def test_moves_and_swaps_run_before_the_pieces_of_a_large_problem():
    # only swapping a 5 with a 3 makes room for the 4 (the repair's moves into free room cannot); a
    # problem too large for one model (max_vars) gets the swaps too
    nodes = (Node("n1", {"cpu": 10}), Node("n2", {"cpu": 10}))
    running = [Pod(name, {"cpu": cpu}, 0, node, stateless=True)
               for name, cpu, node in (("a5", 5, "n1"), ("a3", 3, "n1"), ("b5", 5, "n2"), ("b3", 3, "n2"))]
    problem = Problem(nodes, (*running, Pod("new", {"cpu": 4}, 0)))
    plan = solve(problem, 2.0, workers=1, max_vars=1, policy=PRICED)
    assert plan.stages[0] == {**plan.stages[0], "stage": "pending pods added by moves and swaps",
                              "status": "1 added"}
    assert plan.placement["new"] is not None
