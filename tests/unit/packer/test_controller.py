"""The packer's pass through a fake API server: what it reads, and the PackingPlan and Event it writes."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from kubernetes import client

from netsched.api import plans
from netsched.api.events import rfc3339
from netsched.api.labels import EVICTED_BY, ROOM_FREED_BY
from netsched.api.plans import Eviction
from netsched.packer.config import PackerConfig
from netsched.packer.controller import Packer
from netsched.packing.policy import DisruptionPolicy
from netsched.testing.builders import make_gpujob, make_node, make_pod
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
        "1 pod(s) wait for room, 1 at priority 1000 (ml/urgent): evict 1, move 0, place 1 (")
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


@pytest.mark.parametrize("error", [ValueError("a solver bug"), client.ApiException(500, "etcd timed out")])
def test_a_pass_that_raises_is_counted_logged_once_and_tried_again(monkeypatch, caplog, error):
    kube = full_node(make_pod("urgent", gpus=8, priority=1000, unschedulable=True))
    packer = Packer(kube, PackerConfig(budget=2.0, cooldown=0.05))
    calls = []

    def failing():
        calls.append(1)
        if len(calls) < 3:
            raise error
        packed.set()
    packed = threading.Event()
    monkeypatch.setattr(packer, "_pack", failing)
    packer.request(0)
    assert packed.wait(10), "the packer stopped after a failed pass"
    assert len(calls) == 3
    if isinstance(error, client.ApiException):
        assert packer.metrics.registry.get_sample_value("netsched_operator_api_errors_total",
                                                        {"action": "pack"}) == 2
    else:
        assert packer.metrics.registry.get_sample_value("netsched_operator_loop_errors_total",
                                                        {"loop": "packer"}) == 2
        assert sum(r.exc_info is not None for r in caplog.records) == 1  # the traceback once


def pdb(name: str, allowed: int, *pods: str) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "In",
                                                        "values": list(pods)}]}},
            "status": {"disruptionsAllowed": allowed}}


def low(name: str, node: str) -> dict:
    return make_pod(name, node, gpus=4, priority=10, owner="ReplicaSet", labels={"app": name})


@pytest.mark.parametrize("budgets, blocking", [
    # the solver sees one budget per pod (the tightest): p2 under "a", p3 under "b"; evicting both
    # breaks "b", which covers both: the plan is not made
    pytest.param([pdb("a", 1, "p1", "p2"), pdb("b", 1, "p2", "p3")], ["ml/b"],
                 id="overlapping-one-each"),
    pytest.param([pdb("loose", 1, "p2", "p3"), pdb("strict", 0, "p2")], ["ml/loose", "ml/strict"],
                 id="one-and-zero"),  # both evictions are needed: each budget alone refuses them
    pytest.param([pdb("none", 0, "p2", "p3")], ["ml/none"], id="one-budget-of-zero"),
])
def test_no_plan_a_budget_refuses_and_the_waiting_job_is_told_which(budgets, blocking):
    urgent = make_pod("urgent-0", gpus=8, priority=1000, job="urgent", owner="GPUJob",
                      unschedulable=True)
    kube = FakeKube([make_node("n1"), make_node("n2"), low("p1", "n2"), make_pod("big", "n2", gpus=4),
                     low("p2", "n1"), low("p3", "n1"), urgent, *budgets])
    packer = Packer(kube, PackerConfig(budget=2.0))
    packer._pack()
    assert kube.list(plans.PLURAL) == [] and solves(packer, "no_gain") == 1
    note = packer.blocked["ml/urgent"]
    assert note.startswith("the packer could make room by evicting lower-priority pods, but ")
    assert [b for b in ("ml/a", "ml/b", "ml/loose", "ml/strict", "ml/none")
            if f"PodDisruptionBudget {b} allows" in note] == blocking
    assert note.endswith("relax or delete the budget, or wait for those pods to finish")

    for budget in blocking:
        kube.delete("poddisruptionbudgets", "ml", budget.split("/")[1])
    packer._pack()  # the cluster changed: solved again, and now the plan is made
    [plan] = kube.list(plans.PLURAL)
    assert packer.blocked == {} and {e["pod"] for e in plan["spec"]["evictions"]} <= {"ml/p2", "ml/p3"}


def test_plans_that_fail_in_a_row_wait_longer_each_time():
    packer = Packer(FakeKube(), PackerConfig(cooldown=10, enabled=False))
    assert [packer._after("Failed") for _ in range(7)] == [20, 40, 80, 160, 300, 300, 300]
    assert packer._after("Succeeded") == 10 and packer._after("TimedOut") == 20


def test_a_change_of_room_asks_for_a_pass_only_while_a_pod_waits(monkeypatch):
    packer = Packer(FakeKube())
    asked: list[None] = []
    monkeypatch.setattr(packer, "request", lambda delay=None: asked.append(None))
    packer.room_changed()
    assert asked == []  # nothing waits: a node's change cannot help anyone
    packer.pod_waits()
    packer.room_changed()
    assert len(asked) == 2


def test_a_pass_that_finds_nothing_waiting_stops_node_changes_from_asking(monkeypatch):
    packer = Packer(FakeKube([make_node("n1")]), PackerConfig(enabled=False))  # passes only when called
    packer.pod_waits()  # the pod has since been placed
    packer._pack()
    asked: list[None] = []
    monkeypatch.setattr(packer, "request", lambda delay=None: asked.append(None))
    packer.room_changed()
    assert asked == []


def test_the_default_policy_moves_a_higher_stateless_replica_for_a_lower_pod_never_a_job_strict_neither():
    def cluster(owner: str) -> FakeKube:
        return FakeKube([make_node("n1"), make_node("n2"),
                         make_pod("high-a", "n1", gpus=4, priority=100, owner=owner),
                         make_pod("high-b", "n2", gpus=4, priority=100, owner=owner),
                         make_pod("low", gpus=8, priority=0, unschedulable=True)])
    strict = cluster("ReplicaSet")
    Packer(strict, PackerConfig(budget=2.0), disruption=DisruptionPolicy(mode="strict"))._pack()
    assert strict.list(plans.PLURAL) == []

    jobs = cluster("Job")  # a batch Job's pods: moving one throws its work away
    Packer(jobs, PackerConfig(budget=2.0))._pack()
    assert jobs.list(plans.PLURAL) == []

    replicas = cluster("ReplicaSet")
    Packer(replicas, PackerConfig(budget=2.0))._pack()
    [plan] = replicas.list(plans.PLURAL)
    assert plan["spec"]["counts"] == {"evictions": 0, "moves": 1, "placements": 1}
    assert plan["spec"]["moves"][0]["pod"] in ("ml/high-a", "ml/high-b")


def test_a_gpujob_is_told_which_plan_evicts_its_pods_before_they_go():
    victim = make_pod("low-0", "n1", gpus=8, priority=10, job="low")
    victim["metadata"]["ownerReferences"] = [{"kind": "GPUJob", "name": "low", "controller": True}]
    urgent = make_pod("urgent-0", gpus=8, priority=1000, job="urgent", priorityClassName="high")
    kube = FakeKube([make_node("n1"), victim, urgent, make_gpujob("low")])
    plan = {**PLAN, "metadata": {"name": "pack-1", "creationTimestamp": rfc3339(datetime.now(UTC))},
            "spec": {"reason": "r", "evictions": [{"pod": "ml/low-0", "uid": "uid-low-0", "node": "n1"}],
                     "moves": [], "placements": [{"pod": "ml/urgent-0", "node": "n1", "priority": 1000}]}}
    kube.add(plan, plans.PLURAL)
    Packer(kube, PackerConfig()).step(plan)
    told = Eviction.of(kube.get("gpujobs", "ml", "low")["metadata"]["annotations"][EVICTED_BY])
    assert told == Eviction("pack-1", ("low-0",), "pod ml/urgent-0", "high", 1000)  # not a GPUJob's
    order = [(c.verb, c.plural) for c in kube.calls if c.verb in ("patch", "create")]
    assert order[:2] == [("patch", "gpujobs"), ("create", "pods")]  # told, then evicted
    assert kube.get("pods", "ml", "low-0") is None


def test_a_victim_gpujob_that_cannot_be_told_is_still_evicted(caplog):
    victim = make_pod("low-0", "n1", gpus=8, priority=10, job="low")
    victim["metadata"]["ownerReferences"] = [{"kind": "GPUJob", "name": "low", "controller": True}]
    kube = FakeKube([make_node("n1"), victim, make_gpujob("low")])
    kube.fail("patch", "gpujobs", 403, "forbidden")
    plan = {**PLAN, "metadata": {"name": "pack-1", "creationTimestamp": rfc3339(datetime.now(UTC))},
            "spec": {"reason": "r", "evictions": [{"pod": "ml/low-0", "uid": "uid-low-0", "node": "n1"}],
                     "moves": [], "placements": []}}
    kube.add(plan, plans.PLURAL)
    Packer(kube, PackerConfig()).step(plan)
    assert kube.get("pods", "ml", "low-0") is None and "telling GPUJob ml/low of its eviction" in caplog.text


def test_an_earlier_plan_that_ended_unfinished_keeps_its_victims_from_being_evicted_again():
    urgent = make_pod("urgent", gpus=8, priority=1000, unschedulable=True)
    kube = full_node(urgent)  # the victim's controller made it again, and it took the room back
    victim = {"pod": "ml/low", "uid": "uid-old", "node": "n1", "owner": "uid-low-owner"}
    timed_out = {**PLAN, "metadata": {"name": "pack-0"},
                 "spec": {"reason": "r", "evictions": [victim], "moves": [],
                          "placements": [{"pod": "ml/urgent", "uid": "uid-urgent", "node": "n1"}]},
                 "status": {"phase": "TimedOut", "startTime": "2025-01-01T11:00:00Z"}}
    kube.add(timed_out, plans.PLURAL)
    packer = Packer(kube, PackerConfig(budget=2.0))
    packer._pack()
    assert [p["metadata"]["name"] for p in kube.list(plans.PLURAL)] == ["pack-0"]
    assert solves(packer, "no_gain") == 1
    kube.delete(plans.PLURAL, None, "pack-0")  # forgotten: the same victim is what makes room
    packer._fruitless = None
    packer._pack()
    assert len(kube.list(plans.PLURAL)) == 1 and solves(packer, "plan") == 1


def refused(name: str, message: str, **kwargs) -> dict:
    pod = make_pod(name, gpus=8, **kwargs)
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                    "message": message}]
    return pod


def test_a_plan_that_ends_requeues_the_pods_its_reservation_refused_one_patch_each():
    held = "0/2 nodes are available: 1 netsched: node n1: 8 GPUs are reserved by PackingPlan pack-1"
    other = "0/2 nodes are available: 1 netsched: node n2: ... reserved by PackingPlan pack-2"
    kube = FakeKube([make_node("n1"), refused("held", held), refused("other", other),
                     refused("theirs", held, scheduler="default-scheduler"), make_pod("bound", "n1")])
    plan = {**PLAN, "metadata": {"name": "pack-1", "creationTimestamp": rfc3339(datetime.now(UTC))},
            "spec": {"reason": "r", "deadlineSeconds": 60, "evictions": [], "moves": [],
                     "placements": [{"pod": "ml/gone", "uid": "uid-gone", "node": "n1"}]},
            "status": {"phase": "Placing"}}
    kube.add(plan, plans.PLURAL)
    step = Packer(kube, PackerConfig()).step(plan)
    assert step.status["phase"] == "Abandoned"
    patched = [c.name for c in kube.calls if c.verb == "patch" and c.plural == "pods"]
    assert patched == ["held"]
    assert kube.get("pods", "ml", "held")["metadata"]["annotations"][ROOM_FREED_BY] == "pack-1"
