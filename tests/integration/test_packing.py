"""The packer controller on the real dev-cluster: a high-priority gang that does not fit gets
room through a PackingPlan that the operator carries out and the extender enforces."""

from __future__ import annotations

import json
import os
import signal
import time

from kubernetes import client

from netsched.api import plans
from netsched.api.conditions import find
from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.api.labels import JOB_LABEL, RACK_LABEL
from netsched.cli import main
from netsched.devcluster.devcluster import OPERATOR
from netsched.devcluster.pods import STOP_AFTER_ANNOTATION
from netsched.devcluster.wait import poll
from netsched.testing.builders import make_gpujob
from netsched.testing.cluster import HIGH, LOW, operator_metric
from netsched.testing.cluster import packing_plans as _plans


def _fill(custom, core, namespace: str, priorities: dict, **template) -> dict[str, str]:
    """Low-priority 2 x 8-GPU jobs on every node; returns pod name -> uid."""
    nodes = len(core.list_node().items)
    for i in range(nodes // 2):
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
            f"low-{i}", replicas=2, gpus=8, duration="600s", manifest=True,
            priorityClassName=priorities["low"], **template))
    pods = poll(lambda: (ps := core.list_namespaced_pod(namespace).items)
                and sum(p.status.phase == "Running" for p in ps) == nodes and ps, 60,
                "the low-priority jobs to fill every node")
    return {p.metadata.name: p.metadata.uid for p in pods}


def _urgent(custom, namespace: str, priorities: dict) -> None:
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "urgent", replicas=2, gpus=8, duration="600s", manifest=True, priorityClassName=priorities["high"]))


def _plan_in(custom, phases: tuple[str, ...], timeout: float = 60) -> dict:
    return poll(lambda: next((p for p in _plans(custom) if plans.phase(p) in phases), None), timeout,
                f"a PackingPlan in {'/'.join(phases)}")


def _running(custom, namespace: str, name: str, timeout: float = 60) -> dict:
    return poll(lambda: (j := custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name))
                .get("status", {}).get("phase") == "Running" and j, timeout, f"GPUJob {name} to run")


def _check_plan_carried_out(custom, core, namespace: str, before: dict[str, str]) -> dict:
    """The plan ended Succeeded, evicted one whole low job, and the urgent gang runs where planned."""
    done = _plan_in(custom, plans.TERMINAL, timeout=90)
    assert plans.phase(done) == "Succeeded", done["status"]
    spec = done["spec"]
    victims = {e["pod"].split("/")[1] for e in spec["evictions"]}
    assert all(e["priority"] == LOW for e in spec["evictions"]) and spec["moves"] == []
    assert len(victims) == 2 and len({v.rsplit("-", 1)[0] for v in victims}) == 1  # one whole gang
    planned = {p["pod"].split("/")[1]: p["node"] for p in spec["placements"]}
    assert sorted(planned) == ["urgent-0", "urgent-1"]
    assert set(planned.values()) == {e["node"] for e in spec["evictions"]}  # the room it freed
    urgent = _running(custom, namespace, "urgent")
    assert {p["pod"]: p["node"] for p in urgent["status"]["placements"]} == planned
    pods = core.list_namespaced_pod(namespace).items
    untouched = {p.metadata.name: p.metadata.uid for p in pods if p.metadata.name not in victims
                 and p.metadata.name in before}
    assert untouched == {k: v for k, v in before.items() if k not in victims}  # no other pod disturbed
    poll(lambda: _live_pods_per_job(core, namespace) == {f"low-{i}": 2 for i in range(len(before) // 2)}
         | {"urgent": 2}, 30, "every job to have exactly its 2 pods (the evicted ones recreated, no more)")
    return done


def _admitted(custom, namespace: str, name: str) -> dict:
    job = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    return next(x for x in job["status"]["conditions"] if x["type"] == "Admitted")


def _no_gain_solves(dev_cluster) -> float:
    """The operator's count of packer solves that found nothing better than the cluster as it is."""
    return operator_metric(dev_cluster, "netsched_packer_solves_total", result="no_gain")


def _live_pods_per_job(core, namespace: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for p in core.list_namespaced_pod(namespace).items:
        if not p.metadata.deletion_timestamp:
            counts[p.metadata.labels[JOB_LABEL]] = counts.get(p.metadata.labels[JOB_LABEL], 0) + 1
    return counts


def test_a_high_priority_gang_gets_room_through_a_plan_and_lands_where_it_says(
        dev_cluster, core, custom, namespace, priorities):
    before = _fill(custom, core, namespace, priorities)
    _urgent(custom, namespace, priorities)
    done = _check_plan_carried_out(custom, core, namespace, before)

    # the priced default's greedy repair may find the same answer as the solver (a tie keeps the repair's)
    assert done["spec"]["solver"]["source"] in ("solver", "repair")
    assert done["spec"]["counts"]["evictions"] == 2
    assert done["status"]["arrived"] == sorted(p["pod"] for p in done["spec"]["placements"])
    events = core.list_namespaced_event("default",
                                        field_selector=f"involvedObject.name={done['metadata']['name']}")
    assert {"Planned", "Started", "Evicted", "AllPlaced"} <= {e.reason for e in events.items}
    # the GPUJob says who let it in
    admitted = _admitted(custom, namespace, "urgent")
    assert admitted["reason"] == "ReleasedByPackingPlan" and done["metadata"]["name"] in admitted["message"]
    job_events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=urgent").items
    assert "ReleasedByPackingPlan" in {e.reason for e in job_events}
    # the evicted job's new pods wait: the room went to the pods the plan was for
    victims = {e["pod"].split("/")[1] for e in done["spec"]["evictions"]}
    again = [p for p in core.list_namespaced_pod(namespace).items if p.metadata.name in victims]
    assert len(again) == 2 and all(not p.spec.node_name for p in again)


def test_an_evicted_job_is_told_which_plan_evicted_it_for_which_job_and_waits_for_room_again(
        core, custom, namespace, priorities):
    before = _fill(custom, core, namespace, priorities)
    _urgent(custom, namespace, priorities)
    done = _check_plan_carried_out(custom, core, namespace, before)
    plan = done["metadata"]["name"]
    victim = sorted({e["pod"].split("/")[1].rsplit("-", 1)[0] for e in done["spec"]["evictions"]})[0]

    def told():
        events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={victim}").items
        return [e for e in events if e.reason == "EvictedByPackingPlan"]
    [event] = poll(told, 60, f"the EvictedByPackingPlan Event on GPUJob {victim}")
    said = (f"PackingPlan {plan} evicted {victim}-0, {victim}-1 to make room for GPUJob {namespace}/urgent "
            f"(priority {priorities['high']}, {HIGH}); the job waits for room again")
    assert (event.type, event.message) == ("Warning", said)

    def recomputed():
        job = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, victim)
        status = job["status"]
        schedulable = find(status["conditions"], "Schedulable") or {}
        return status if status["phase"] == "Pending" and schedulable.get("reason") not in (
            None, "Fits", "EvictedByPackingPlan") else None
    status = poll(recomputed, 60, f"GPUJob {victim} back in the queue with its fit worked out anew")
    preempted = find(status["conditions"], "Preempted")
    assert (preempted["status"], preempted["reason"], preempted["message"]) == (
        "True", "EvictedByPackingPlan", said)
    assert find(status["conditions"], "Admitted")["status"] == "False"
    # its old predicted completion is gone; what is there now is predicted from a start still to come
    assert "predictedCompletionTime" not in status or (
        status.get("predictedStartTime") and status["predictedCompletionTime"] > status["predictedStartTime"])
    pods = [p for p in core.list_namespaced_pod(namespace, label_selector=f"{JOB_LABEL}={victim}").items
            if not p.metadata.deletion_timestamp]
    assert len(pods) == 2 and all(not p.spec.node_name for p in pods)  # made again, waiting for room
    events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={victim}").items
    assert [e.reason for e in events].count("EvictedByPackingPlan") == 1 and (event.count or 1) == 1


def test_a_plan_that_a_disruption_budget_forbids_is_never_carried_out(dev_cluster, core, custom, namespace,
                                                                      priorities, capsys):
    policy = client.PolicyV1Api(dev_cluster.api_client())
    nodes = len(core.list_node().items)
    # minAvailable as a number: the disruption controller needs no scale subresource for GPUJobs
    policy.create_namespaced_pod_disruption_budget(namespace, {
        "metadata": {"name": "keep-low"},
        "spec": {"minAvailable": nodes, "selector": {"matchExpressions": [
            {"key": JOB_LABEL, "operator": "In", "values": [f"low-{i}" for i in range(nodes)]}]}}})
    before = _fill(custom, core, namespace, priorities)
    poll(lambda: policy.read_namespaced_pod_disruption_budget("keep-low", namespace).status.current_healthy
         == nodes, 30, "the disruption controller to count the budget's pods")
    looked = _no_gain_solves(dev_cluster)
    _urgent(custom, namespace, priorities)

    # the packer itself finds nothing it may do, and the dry run says so
    assert main(["pack", "--from-cluster", f"--kubeconfig={dev_cluster.kubeconfig}", "--json"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["source"] == "current" and dry["evictions"] == [] and dry["moves"] == []
    # a plan that breaks the budget anyway (stale, or written by hand) is refused before any eviction
    low = core.list_namespaced_pod(namespace, label_selector=f"{JOB_LABEL}=low-0").items
    urgent = core.list_namespaced_pod(namespace, label_selector=f"{JOB_LABEL}=urgent").items
    custom.create_cluster_custom_object(plans.GROUP, plans.VERSION, plans.PLURAL, {
        "apiVersion": f"{plans.GROUP}/{plans.VERSION}", "kind": plans.KIND,
        "metadata": {"name": f"by-hand-{namespace}"},
        "spec": {"reason": "test", "placements": [
            {"pod": f"{namespace}/{u.metadata.name}", "uid": u.metadata.uid, "node": v.spec.node_name,
             "gpus": 8}
            for u, v in zip(urgent, low, strict=True)],
            "evictions": [{"pod": f"{namespace}/{p.metadata.name}", "uid": p.metadata.uid,
                           "node": p.spec.node_name, "gpus": 8} for p in low], "moves": []}})
    refused = _plan_in(custom, plans.TERMINAL)
    assert plans.phase(refused) == "Failed" and refused["status"]["reason"] == "DisruptionBudget"
    assert "keep-low allows 0 disruption(s)" in refused["status"]["message"]
    # the operator's packer looked at the waiting gang too, found nothing it may do, and made no plan
    poll(lambda: _no_gain_solves(dev_cluster) > looked, 60, "the packer to solve and find no gain")
    assert len(_plans(custom)) == 1
    after = {p.metadata.name: p.metadata.uid for p in core.list_namespaced_pod(namespace).items}
    assert all(after.get(name) == uid for name, uid in before.items())
    assert all(p.spec.scheduling_gates for p in core.list_namespaced_pod(
        namespace, label_selector=f"{JOB_LABEL}=urgent").items)


def test_an_operator_killed_mid_plan_finishes_it_after_a_restart(dev_cluster, core, custom, namespace,
                                                                 priorities):
    # victims that take 10 s to stop hold the plan in Evicting while the operator is down
    before = _fill(custom, core, namespace, priorities, annotations={STOP_AFTER_ANNOTATION: "10s"})
    _urgent(custom, namespace, priorities)
    plan = _plan_in(custom, ("Evicting",))["metadata"]["name"]
    making_room = f"PackingPlan {plan} is making room"
    poll(lambda: making_room in _admitted(custom, namespace, "urgent")["message"], 8,
         "the urgent job to say its plan is making room")
    os.kill(dev_cluster.status()["components"][OPERATOR]["pid"], signal.SIGKILL)
    try:
        poll(lambda: OPERATOR not in dev_cluster.running_components(), 10, "the operator to die")
        assert [plans.phase(p) for p in _plans(custom)] == ["Evicting"]
    finally:
        dev_cluster.restart(OPERATOR)
    _check_plan_carried_out(custom, core, namespace, before)
    # the restarted operator, too, left the gate to the plan rather than admitting the gang itself
    assert _admitted(custom, namespace, "urgent")["reason"] == "ReleasedByPackingPlan"


def test_overlapping_budgets_make_no_failing_plan_name_the_blocker_and_a_deleted_one_unblocks_promptly(
        dev_cluster, core, custom, namespace, priorities):
    policy = client.PolicyV1Api(dev_cluster.api_client())
    nodes = len(core.list_node().items)
    jobs = [f"low-{i}" for i in range(nodes)]
    low = {"matchExpressions": [{"key": JOB_LABEL, "operator": "In", "values": jobs}]}
    # both cover every low pod: "loose" lets 2 go (a whole gang), "strict" none
    for name, keep in (("loose", nodes - 2), ("strict", nodes)):
        policy.create_namespaced_pod_disruption_budget(namespace, {
            "metadata": {"name": name}, "spec": {"minAvailable": keep, "selector": low}})
    _fill(custom, core, namespace, priorities)

    def counted() -> bool:
        allowed = [policy.read_namespaced_pod_disruption_budget(b, namespace).status.disruptions_allowed
                   for b in ("loose", "strict")]
        if allowed != [2, 0]:
            # a pod event makes the disruption controller sync only one of the budgets that cover the
            # pod ("chose arbitrarily"), so the other may never count the pods' readiness: touching a
            # budget makes it sync that one
            for b in ("loose", "strict"):
                policy.patch_namespaced_pod_disruption_budget(
                    b, namespace, {"metadata": {"annotations": {"test/recount": str(time.monotonic())}}})
        return allowed == [2, 0]
    poll(counted, 90, "the disruption controller to count them", interval=2)
    declined = _no_gain_solves(dev_cluster)
    _urgent(custom, namespace, priorities)

    blocker = f"PodDisruptionBudget {namespace}/strict allows 0 disruption(s)"
    admitted = poll(lambda: (a := _admitted(custom, namespace, "urgent")) and blocker in a["message"] and a,
                    60, "the waiting job to name the budget that blocks it")
    assert admitted["status"] == "False" and f"{namespace}/loose" not in admitted["message"]
    # the packer has solved for the waiting job and declined: a packer that missed "strict" would have
    # made its plan in that solve instead, and it solves again only when the cluster changes
    poll(lambda: _no_gain_solves(dev_cluster) > declined, 30, "the packer to decline to plan")
    assert _plans(custom) == []

    policy.delete_namespaced_pod_disruption_budget("strict", namespace)
    done = _plan_in(custom, plans.TERMINAL, timeout=60)  # the deletion, not a timer, makes it look again
    assert plans.phase(done) == "Succeeded", done["status"]
    _running(custom, namespace, "urgent", timeout=60)


def test_a_rack_bound_gang_that_does_not_fit_gets_a_plan_that_frees_one_rack(dev_cluster, core, custom,
                                                                             namespace, priorities):
    """Every node keeps 2 free GPUs, so each rack has 4 and the cluster 16: a 4 x 2-GPU gang that must
    share a rack fits nowhere until the plan frees room inside one rack, and lands there."""
    nodes = {n.metadata.name: n.metadata.labels[RACK_LABEL] for n in core.list_node().items}
    for i in range(len(nodes)):
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
            f"low-{i}", replicas=1, gpus=6, duration="600s", manifest=True,
            priorityClassName=priorities["low"]))
    poll(lambda: sum(p.status.phase == "Running" for p in core.list_namespaced_pod(namespace).items)
         == len(nodes), 60, "a 6-GPU low-priority pod on every node")
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "urgent", replicas=4, gpus=2, duration="600s", manifest=True, priorityClassName=priorities["high"],
        network={"maxPeerDistance": "rack"}))

    done = _plan_in(custom, plans.TERMINAL, timeout=90)
    assert plans.phase(done) == "Succeeded", done["status"]
    spec = done["spec"]
    racks = {nodes[p["node"]] for p in spec["placements"]}
    assert len(spec["placements"]) == 4 and len(racks) == 1  # the gang planned inside one rack
    assert {nodes[e["node"]] for e in spec["evictions"]} <= racks and spec["evictions"]  # room made there
    urgent = _running(custom, namespace, "urgent")
    assert {nodes[p["node"]] for p in urgent["status"]["placements"]} == racks


def test_the_plan_evicts_the_job_that_just_started_not_one_near_its_end(dev_cluster, core, custom, namespace,
                                                                       priorities):
    nodes = len(core.list_node().items)

    def low(name: str) -> None:
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
            name, replicas=1, gpus=8, duration="600s", manifest=True, priorityClassName=priorities["low"]))

    def running() -> int:
        return sum(p.status.phase == "Running" for p in core.list_namespaced_pod(namespace).items)

    for i in range(nodes - 1):
        low(f"old-{i}")
    poll(lambda: running() == nodes - 1, 60, "the old low-priority jobs to run")
    # what makes them old: run time that a restart would throw away, counted from their pods' startTime
    # as the packer counts it, a few seconds clear of the young job's whatever the machine's load
    started = max(p.status.start_time for p in core.list_namespaced_pod(namespace).items)
    poll(lambda: time.time() - started.timestamp() >= 5, 30, "the old jobs to have run 5 s", interval=0.5)
    low("young")
    poll(lambda: running() == nodes, 60, "the young low-priority job to run")
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "urgent", replicas=1, gpus=8, duration="600s", manifest=True, priorityClassName=priorities["high"]))

    done = _plan_in(custom, plans.TERMINAL, timeout=90)
    assert plans.phase(done) == "Succeeded", done["status"]
    assert [e["pod"].split("/")[1] for e in done["spec"]["evictions"]] == ["young-0"]
    _running(custom, namespace, "urgent")
