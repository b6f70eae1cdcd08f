"""The pure steps of a PackingPlan: from Pending to Succeeded, and every way it can stop."""

from datetime import UTC, datetime, timedelta

import pytest

from netsched.api.events import rfc3339
from netsched.api.plans import Eviction
from netsched.packer.plan_steps import LivePod, advance, evictions, spared
from netsched.packing.problem import Node, Pod, Problem
from netsched.packing.solver import solve
from netsched.testing.builders import make_pod

T0 = datetime(2026, 11, 23, 12, 0, 0, tzinfo=UTC)


def live(key: str, node: str | None = None, uid: str | None = None, gated: bool = False,
         owner: str | None = None, labels: dict | None = None, created: datetime = T0 - timedelta(hours=1),
         deleting: bool = False) -> LivePod:
    return LivePod(key, uid or f"uid-{key}", node, gated, owner, created, deleting, labels or {})


def plan(phase: str | None = None, moves=(), **status) -> dict:
    return {
        "metadata": {"name": "pack-1", "creationTimestamp": rfc3339(T0)},
        "spec": {"reason": "test", "deadlineSeconds": 60,
                 "evictions": [{"pod": "ml/low-0", "uid": "uid-ml/low-0", "node": "n1", "gpus": 8}],
                 "moves": list(moves),
                 "placements": [{"pod": "ml/urgent-0", "uid": "uid-ml/urgent-0", "node": "n1", "gpus": 8}]},
        "status": {"phase": phase, **status} if phase else {},
    }


def cluster(**changes) -> dict[str, LivePod]:
    pods = {"ml/low-0": live("ml/low-0", "n1", labels={"app": "low"}),
            "ml/urgent-0": live("ml/urgent-0", gated=True)}
    pods.update(changes)
    return {k: v for k, v in pods.items() if v is not None}


def pdb(allowed: int) -> dict:
    return {"metadata": {"namespace": "ml", "name": "keep"},
            "spec": {"selector": {"matchLabels": {"app": "low"}}}, "status": {"disruptionsAllowed": allowed}}


def test_a_new_plan_checks_the_budgets_then_evicts_its_victims():
    step = advance(plan(), cluster(), [pdb(1)], T0)
    assert step.status["phase"] == "Evicting" and step.evict == ["ml/low-0"] and not step.ungate
    assert [e[1] for e in step.events] == ["Started"]


def test_a_budget_that_forbids_an_eviction_fails_the_plan_before_anything_is_evicted():
    step = advance(plan(), cluster(), [pdb(0)], T0)
    assert step.status["phase"] == "Failed" and step.status["reason"] == "DisruptionBudget"
    message = step.status["message"]
    assert "PodDisruptionBudget ml/keep allows 0 disruption(s) now, the plan needs 1" in message
    assert step.evict == [] and step.events[0][0] == "Warning"


def test_a_plan_whose_pods_changed_before_it_started_is_abandoned():
    moved = advance(plan(), cluster(**{"ml/low-0": live("ml/low-0", "n2")}), [], T0)
    assert moved.status["phase"] == "Abandoned" and "no longer on n1" in moved.status["message"]
    placed = advance(plan(), cluster(**{"ml/urgent-0": live("ml/urgent-0", "n3")}), [], T0)
    assert placed.status["phase"] == "Abandoned" and "no longer waits" in placed.status["message"]


def test_evicting_waits_for_victims_to_go_without_evicting_twice():
    still = advance(plan("Evicting"), cluster(**{"ml/low-0": live("ml/low-0", "n1", deleting=True)}), [], T0)
    assert still.status["phase"] == "Evicting" and still.evict == []
    # the same name with a new uid is the controller's replacement: the victim itself is gone
    gone = advance(plan("Evicting"), cluster(**{"ml/low-0": live("ml/low-0", uid="new")}), [], T0)
    assert gone.status["phase"] == "Placing" and gone.ungate == ["ml/urgent-0"]
    assert gone.status["evicted"] == ["ml/low-0"]


@pytest.mark.parametrize("phase", ["Evicting", "Placing"])
@pytest.mark.parametrize("urgent", [
    pytest.param(None, id="deleted"),
    pytest.param(live("ml/urgent-0", gated=True, deleting=True), id="being-deleted"),
    pytest.param(live("ml/urgent-0", uid="new", gated=True), id="made-again"),
])
def test_a_plan_whose_placed_pods_are_deleted_is_abandoned_at_once_holding_nothing(phase, urgent):
    step = advance(plan(phase), cluster(**{"ml/urgent-0": urgent}), [], T0)
    assert (step.status["phase"], step.status["reason"]) == ("Abandoned", "PlacedPodsGone")
    assert "ml/urgent-0 it makes room for were deleted" in step.status["message"]
    assert step.evict == [] and step.ungate == []  # the victim still running is left alone
    assert [e[:2] for e in step.events] == [("Warning", "PlacedPodsGone")]


def test_placing_succeeds_when_every_planned_pod_is_bound_where_planned():
    unbound = cluster(**{"ml/low-0": None, "ml/urgent-0": live("ml/urgent-0")})
    waiting = advance(plan("Placing"), unbound, [], T0)
    assert waiting.status["phase"] == "Placing" and waiting.status["arrived"] == []
    done = advance(plan("Placing"), cluster(**{"ml/low-0": None, "ml/urgent-0": live("ml/urgent-0", "n1")}),
                   [], T0)
    assert done.status["phase"] == "Succeeded" and done.status["arrived"] == ["ml/urgent-0"]
    assert done.status["completionTime"] == rfc3339(T0)


def test_a_planned_pod_bound_elsewhere_fails_the_plan():
    step = advance(plan("Placing"), cluster(**{"ml/low-0": None, "ml/urgent-0": live("ml/urgent-0", "n9")}),
                   [], T0)
    assert step.status["phase"] == "Failed" and step.status["reason"] == "Misplaced"


def test_a_plan_past_its_deadline_times_out_and_says_what_it_waited_for():
    step = advance(plan("Placing"), cluster(**{"ml/low-0": None}), [], T0 + timedelta(seconds=61))
    assert step.status["phase"] == "TimedOut" and "ml/urgent-0" in step.status["message"]
    assert step.ungate == [] and step.evict == []


def test_a_finished_plan_does_nothing():
    step = advance(plan("Succeeded"), cluster(), [pdb(0)], T0 + timedelta(hours=1))
    assert step.status == {"phase": "Succeeded"} and not (step.evict or step.ungate or step.events)


def test_a_move_arrives_when_a_new_pod_of_its_controller_is_bound_on_the_target():
    move = {"pod": "ml/web-a", "uid": "uid-ml/web-a", "node": "n2", "owner": "rs", "to": "n3", "gpus": 1}
    pods = cluster(**{"ml/low-0": None, "ml/urgent-0": live("ml/urgent-0", "n1")})
    old = advance(plan("Placing", [move]), {**pods, "ml/web-b": live("ml/web-b", "n3", owner="rs")}, [], T0)
    assert old.status["phase"] == "Placing"  # made before the plan: not the replacement
    new = live("ml/web-c", "n3", owner="rs", created=T0 + timedelta(seconds=2))
    done = advance(plan("Placing", [move]), {**pods, "ml/web-c": new}, [], T0 + timedelta(seconds=3))
    assert done.status["phase"] == "Succeeded" and done.status["arrived"] == ["ml/urgent-0", "ml/web-a"]


def test_a_moved_gang_members_gated_replacement_is_released_to_the_node_the_move_goes_to():
    move = {"pod": "ml/lowjob-0", "uid": "u0", "node": "n2", "owner": "job", "to": "n3", "gpus": 2}
    pods = cluster(**{"ml/low-0": None, "ml/urgent-0": live("ml/urgent-0", "n1")})
    older = live("ml/lowjob-1", gated=True, owner="job")  # made before the plan: not the replacement
    new = live("ml/lowjob-0-x", gated=True, owner="job", created=T0 + timedelta(seconds=2))
    step = advance(plan("Placing", [move]), {**pods, "ml/lowjob-1": older, "ml/lowjob-0-x": new}, [],
                   T0 + timedelta(seconds=3))
    assert step.status["phase"] == "Placing" and step.moved == {"ml/lowjob-0-x": "n3"}
    bound = live("ml/lowjob-0-x", "n3", owner="job", created=T0 + timedelta(seconds=2))
    done = advance(plan("Placing", [move]), {**pods, "ml/lowjob-0-x": bound}, [], T0 + timedelta(seconds=4))
    assert done.status["phase"] == "Succeeded" and done.moved == {}


def test_an_active_plan_holds_the_gpus_of_its_outstanding_arrivals_and_names_the_moved_controllers():
    from netsched.api import plans
    move = {"pod": "ml/lowjob-0", "uid": "u", "node": "n2", "owner": "job", "to": "n3", "gpus": 2}
    active = plan("Placing", [move])
    assert plans.reserved_gpus([active]) == {"n1": 8, "n3": 2}
    assert plans.moving(active) == {("ml", "job"): "pack-1"}
    arrived = plan("Placing", [move], arrived=["ml/urgent-0", "ml/lowjob-0"])
    assert plans.reserved_gpus([arrived]) == {} and plans.moving(arrived) == {}
    assert plans.reserved_gpus([plan("Succeeded", [move])]) == {}


def test_the_plan_body_records_what_the_solver_decided():
    from netsched.packer.plan_steps import plan_body

    problem = Problem((Node("n1", {"nvidia.com/gpu": 8}),), (
        Pod("ml/low-0", {"nvidia.com/gpu": 8}, 10, "n1"), Pod("ml/urgent-0", {"nvidia.com/gpu": 8}, 1000)))
    raw = [{"metadata": {"namespace": "ml", "name": n, "uid": f"uid-{n}", "creationTimestamp": rfc3339(T0)},
            "spec": {"nodeName": "n1"} if n == "low-0" else {}} for n in ("low-0", "urgent-0")]
    body = plan_body(problem, solve(problem, 1.0), raw, "urgent waits", 1.0, 60)
    spec = body["spec"]
    assert spec["counts"] == {"evictions": 1, "moves": 0, "placements": 1}
    assert spec["evictions"] == [
        {"pod": "ml/low-0", "uid": "uid-low-0", "node": "n1", "priority": 10, "gpus": 8}]
    assert spec["placements"][0]["node"] == "n1" and spec["solver"]["tiers"][0]["placedAfter"] == 1


def test_the_packer_may_disrupt_only_pods_below_the_top_waiting_priority():
    from netsched.packer.controller import only_lower_priority_moves

    problem = Problem((Node("n1", {"nvidia.com/gpu": 8}),), (
        Pod("ml/low", {"nvidia.com/gpu": 4}, 10, "n1"), Pod("ml/peer", {"nvidia.com/gpu": 4}, 1000, "n1"),
        Pod("ml/urgent", {"nvidia.com/gpu": 8}, 1000)))
    movable = {p.name: p.movable for p in only_lower_priority_moves(problem).pods}
    assert movable == {"ml/low": True, "ml/peer": False, "ml/urgent": True}


def test_the_plan_conditions_tell_the_same_story_as_its_events():
    started = advance(plan(), cluster(), [], T0)
    evicted = advance({**plan(), "status": started.status}, cluster(**{"ml/low-0": None}), [], T0)
    done = advance({**plan(), "status": evicted.status},
                   cluster(**{"ml/low-0": None, "ml/urgent-0": live("ml/urgent-0", "n1")}), [], T0)
    conds = {x["type"]: (x["status"], x["reason"]) for x in done.status["conditions"]}
    assert conds == {"Progressing": ("False", "AllPlaced"), "Succeeded": ("True", "AllPlaced")}
    for step, reason in ((started, "Started"), (evicted, "Evicted"), (done, "AllPlaced")):
        assert [e[1] for e in step.events] == [reason]
    refused = advance(plan(), cluster(), [pdb(0)], T0)
    assert {x["type"]: x["reason"] for x in refused.status["conditions"]} == {
        "Progressing": "DisruptionBudget", "Failed": "DisruptionBudget"}


def _replica(job: str, replica: int, priority_class: str | None = None) -> dict:
    body = make_pod(f"{job}-{replica}", job=job, priorityClassName=priority_class)
    body["metadata"]["ownerReferences"] = [{"kind": "GPUJob", "name": job, "uid": f"uid-{job}",
                                            "controller": True}]
    return body


def test_each_evicted_gpujob_is_told_the_plan_and_the_job_it_makes_room_for_with_its_priority():
    raw = {f"ml/{p['metadata']['name']}": p for p in [
        _replica("low", 0), _replica("low", 1), _replica("other", 0), _replica("urgent", 0, "high"),
        make_pod("plain", "n1", owner="ReplicaSet")]}
    plan = {"metadata": {"name": "pack-7"}, "spec": {"reason": "r", "placements": [
        {"pod": "ml/urgent-0", "node": "n1", "priority": 1000}]}}
    told = evictions(plan, raw, ["ml/low-1", "ml/low-0", "ml/other-0", "ml/plain"])
    assert told == {("ml", "low"): Eviction("pack-7", ("low-0", "low-1"), "GPUJob ml/urgent", "high", 1000),
                    ("ml", "other"): Eviction("pack-7", ("other-0",), "GPUJob ml/urgent", "high", 1000)}
    eviction = told["ml", "low"]
    assert Eviction.of(eviction.annotation()) == eviction
    assert eviction.message == ("PackingPlan pack-7 evicted low-0, low-1 to make room for GPUJob ml/urgent "
                                "(priority high, 1000); the job waits for room again")
    assert Eviction.of("not json") is None and Eviction.of(None) is None
    assert Eviction.of('{"plan": 1}') is None


def raw(name: str, node: str | None = None, uid: str | None = None, owner: str | None = None,
        created: datetime = T0 - timedelta(hours=1)) -> dict:
    pod = make_pod(name, node, uid=uid or f"uid-ml/{name}")
    pod["metadata"]["creationTimestamp"] = rfc3339(created)
    if owner:
        pod["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "uid": owner, "controller": True}]
    return pod


def ended(phase: str = "TimedOut", started: bool = True) -> dict:
    """pack-1 ended after evicting ml/low-0 (of controller rs) for ml/urgent-0."""
    body = plan(phase, **({"startTime": rfc3339(T0)} if started else {}))
    body["spec"]["evictions"][0]["owner"] = "rs"
    return body


AFTER = T0 + timedelta(seconds=5)  # made since the plan started evicting: a victim's replacement


@pytest.mark.parametrize(("plans_", "pods", "expected"), [
    pytest.param([ended()], [raw("urgent-0"), raw("low-0", "n1", uid="new", created=AFTER)], {"ml/low-0"},
                 id="the-victim-made-again-under-its-name"),
    pytest.param([ended("Abandoned")], [raw("urgent-0"), raw("low-x", "n1", owner="rs", created=AFTER),
                                        raw("low-y", "n2", owner="rs")], {"ml/low-x"},
                 id="its-controller's-new-pod-not-its-older-ones"),
    pytest.param([ended("Succeeded")], [raw("urgent-0", "n1"), raw("low-0", created=AFTER)], set(),
                 id="a-plan-that-placed-its-pods"),
    pytest.param([ended(started=False)], [raw("urgent-0"), raw("low-0", "n1")], set(),
                 id="a-plan-that-evicted-nothing"),
    pytest.param([ended()], [raw("urgent-0", "n3"), raw("low-0", "n1", uid="new", created=AFTER)], set(),
                 id="its-pods-bound-since"),
    pytest.param([ended()], [raw("low-0", "n1", uid="new", created=AFTER)], set(), id="its-pods-deleted"),
    pytest.param([plan("Placing")], [raw("urgent-0"), raw("low-0", "n1", uid="new", created=AFTER)], set(),
                 id="a-plan-still-going"),
])
def test_victims_of_a_plan_that_ended_unfinished_are_spared_while_its_pods_wait(plans_, pods, expected):
    assert spared(plans_, pods) == expected
