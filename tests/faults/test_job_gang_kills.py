"""The kill scenarios of test_component_kills on a gang that is not a GPUJob: an indexed batch/v1 Job in
a namespace opted in to netsched's admission webhook, its pods made by kube-controller-manager's Job
controller, gated by the webhook, released whole by the operator. Whatever is killed: each completion
index runs once and succeeds, the Job completes, no member is bound while another waits at the gate,
and deleting the Job while its pods are gated leaves no gated pod behind."""

from __future__ import annotations

import random
import threading

import pytest
from kubernetes import client

from netsched.api.labels import GANG_OPT_IN_LABEL, GANG_OPT_IN_VALUE, MAX_PEER_DISTANCE, RACK_LABEL
from netsched.devcluster.devcluster import EXTENDER, OPERATOR
from netsched.devcluster.pods import gpu_pod, indexed_job
from netsched.devcluster.wait import poll
from netsched.jobs.replica_pods import GANG_GATE
from netsched.testing.cluster import kill, pinned_to

PODS, GPUS = 4, 8  # whole-node members: a rack holds the gang only where 4 of its nodes are free
JOB_NAME = "batch.kubernetes.io/job-name"
INDEX = "batch.kubernetes.io/job-completion-index"
WEBHOOK_REFUSED = "gang-gate.netsched.io"
RACK = {MAX_PEER_DISTANCE: "rack"}


@pytest.fixture(scope="module")
def batch(fault_cluster) -> client.BatchV1Api:
    return client.BatchV1Api(fault_cluster.api_client())


@pytest.fixture
def opted_in(core, namespace) -> str:
    """The test's namespace, its pods gated by the webhook (the Job templates carry no gate)."""
    core.patch_namespace(namespace, {"metadata": {"labels": {GANG_OPT_IN_LABEL: GANG_OPT_IN_VALUE}}})
    return namespace


@pytest.fixture
def one_rack_freed_later(core, opted_in):
    """Half of every rack's nodes filled: no rack holds the gang, so it waits. Returns a function that
    frees one rack (the room the gang then lands in) and returns its name."""
    poll(lambda: not [p for p in core.list_pod_for_all_namespaces().items
                      if p.spec.node_name and p.status.phase not in ("Succeeded", "Failed")], 180,
         "every node empty")
    by_rack: dict[str, list[str]] = {}
    for n in sorted(core.list_node().items, key=lambda n: n.metadata.name):
        by_rack.setdefault(n.metadata.labels[RACK_LABEL], []).append(n.metadata.name)
    for rack, nodes in by_rack.items():
        for node in nodes[:len(nodes) // 2]:
            filler = gpu_pod(f"filler-{node}", GPUS, labels={"filler": rack})
            filler["spec"]["nodeName"] = node
            core.create_namespaced_pod(opted_in, filler)

    def free() -> str:
        rack = random.Random().choice(sorted(by_rack))
        core.delete_collection_namespaced_pod(opted_in, label_selector=f"filler={rack}",
                                              grace_period_seconds=0)
        return rack
    return free


def pods_of(core, namespace: str, job: str) -> list[client.V1Pod]:
    return core.list_namespaced_pod(namespace, label_selector=f"{JOB_NAME}={job}").items


def gated(pod: client.V1Pod) -> bool:
    return any(g.name == GANG_GATE for g in pod.spec.scheduling_gates or ())


def waits_gated(core, namespace: str, job: str, reason: str, events: int = 1) -> None:
    """Until all PODS members exist, gated and unbound, and the operator said `reason` on the Job
    `events` times."""
    poll(lambda: len(p := pods_of(core, namespace, job)) == PODS and all(gated(x) for x in p), 120,
         f"the {PODS} pods of Job {job}, gated")
    on_job = f"involvedObject.name={job}"
    poll(lambda: len([e for e in core.list_namespaced_event(namespace, field_selector=on_job).items
                      if e.reason == reason]) >= events, 120, f"{events} {reason} Event(s) on Job {job}")
    assert not any(p.spec.node_name for p in pods_of(core, namespace, job))


def runs_whole_and_completes(batch, core, namespace: str, job: str) -> list[client.V1Pod]:
    """Polls until the Job is Complete, checking at every look that no member is bound while another
    is still gated (half a gang placed); then that each index ran once and succeeded."""
    def look():
        live = [p for p in pods_of(core, namespace, job) if p.status.phase not in ("Succeeded", "Failed")]
        assert not (any(p.spec.node_name for p in live) and any(gated(p) for p in live)), [
            (p.metadata.name, p.spec.node_name, gated(p)) for p in live]
        status = batch.read_namespaced_job(job, namespace).status
        return any(c.type == "Complete" and c.status == "True" for c in status.conditions or ())
    poll(look, 300, f"Job {job} to complete")
    status = batch.read_namespaced_job(job, namespace).status
    assert (status.succeeded, status.failed or 0) == (PODS, 0)
    pods = pods_of(core, namespace, job)
    assert sorted(p.metadata.annotations[INDEX] for p in pods) == [str(i) for i in range(PODS)]  # none twice
    assert all(p.status.phase == "Succeeded" for p in pods)
    return pods


def in_one_rack(core, pods: list[client.V1Pod]) -> str:
    racks = {n.metadata.name: n.metadata.labels[RACK_LABEL] for n in core.list_node().items}
    [rack] = {racks[p.spec.node_name] for p in pods}
    return rack


def test_an_operator_killed_while_a_job_gang_waits_and_is_released_runs_each_index_once(
        fault_cluster, core, batch, opted_in, one_rack_freed_later):
    batch.create_namespaced_job(opted_in, indexed_job("train", PODS, GPUS, "20s", RACK))
    waits_gated(core, opted_in, "train", "NoDomainLargeEnough")
    kill(fault_cluster, OPERATOR)
    fault_cluster.restart(OPERATOR)
    waits_gated(core, opted_in, "train", "NoDomainLargeEnough", events=2)  # the new operator holds it too

    rng = random.Random()

    def kill_through_release() -> None:  # as it sees the room, releases, while the pods run and finish
        for _ in range(3):
            threading.Event().wait(rng.uniform(0.0, 3.0))
            kill(fault_cluster, OPERATOR)
            fault_cluster.restart(OPERATOR)
    killer = threading.Thread(target=kill_through_release)
    rack = one_rack_freed_later()
    killer.start()
    try:
        pods = runs_whole_and_completes(batch, core, opted_in, "train")
    finally:
        killer.join()
    assert in_one_rack(core, pods) == rack
    # each pod held there by its release: pinned to its node as placed with the gang, or (the extender not
    # answering) to the rack
    assert all(pinned_to(p) == [p.spec.node_name] or p.spec.node_selector == {RACK_LABEL: rack} for p in pods)


def test_the_extender_killed_while_a_job_gang_is_placed_keeps_it_whole_in_its_rack(
        fault_cluster, core, batch, opted_in, one_rack_freed_later):
    batch.create_namespaced_job(opted_in, indexed_job("train", PODS, GPUS, "10s", RACK))
    waits_gated(core, opted_in, "train", "NoDomainLargeEnough")
    kill(fault_cluster, EXTENDER)
    try:
        rack = one_rack_freed_later()  # released and scheduled while the extender is away
        pods = runs_whole_and_completes(batch, core, opted_in, "train")
    finally:
        fault_cluster.restart(EXTENDER)
    assert in_one_rack(core, pods) == rack  # the operator's pin keeps the rack, extender or not


def test_the_webhook_killed_while_the_job_controller_makes_pods_lets_none_through_ungated_or_twice(
        fault_cluster, core, batch, opted_in):
    poll(lambda: not [p for p in core.list_pod_for_all_namespaces().items
                      if p.spec.node_name and p.status.phase not in ("Succeeded", "Failed")], 180,
         "every node empty")
    batch.create_namespaced_job(opted_in, indexed_job("train", PODS, 2, "10s"))
    threading.Event().wait(random.Random().uniform(0.0, 0.5))  # some pods made, some refused, or all
    kill(fault_cluster, OPERATOR)  # it serves the webhook
    # the operator may have released the gang before it died; nothing releases a gate while it is
    # down, so a pod ungated later slipped past the webhook. A release it sent just before it died may
    # still be on its way through a loaded API server: what was released is what stays so for a second
    def ungated() -> set[str]:
        return {p.metadata.name for p in pods_of(core, opted_in, "train") if not gated(p)}

    def settled() -> tuple[set[str]] | None:  # a tuple: an empty set is an answer too
        before = ungated()
        threading.Event().wait(1.0)
        return (before,) if ungated() == before else None
    [released_before] = poll(settled, 30, "the gates the operator lifted before it died")
    try:
        def made_or_refused():
            pods = pods_of(core, opted_in, "train")
            slipped = {p.metadata.name for p in pods if not gated(p)} - released_before
            assert not slipped, slipped
            events = core.list_namespaced_event(opted_in, field_selector="involvedObject.name=train").items
            refused = any(e.reason == "FailedCreate" and WEBHOOK_REFUSED in (e.message or "") for e in events)
            return len(pods) == PODS or refused
        poll(made_or_refused, 60, "the Job controller to make its pods or be refused one")
        assert ungated() <= released_before
    finally:
        fault_cluster.restart(OPERATOR)
    runs_whole_and_completes(batch, core, opted_in, "train")


@pytest.mark.parametrize("propagation", ["Background", "Foreground", "Orphan"])
def test_a_job_deleted_while_its_gang_is_gated_leaves_no_gated_pod(core, batch, opted_in, propagation):
    # whole-node pods that must share one node: the gang never fits and stays gated
    one_node = {MAX_PEER_DISTANCE: "node"}
    batch.create_namespaced_job(opted_in, indexed_job("stuck", PODS, GPUS, annotations=one_node))
    waits_gated(core, opted_in, "stuck", "NeverFits")
    batch.delete_namespaced_job("stuck", opted_in, propagation_policy=propagation)
    if propagation == "Orphan":  # kept as the user asked, no longer a gang: released as pods of their own
        pods = poll(lambda: (p := pods_of(core, opted_in, "stuck")) and not any(gated(x) for x in p) and p,
                    120, "the orphaned pods to be released")
        assert len(pods) == PODS and not any(p.metadata.owner_references for p in pods)
    else:
        poll(lambda: not pods_of(core, opted_in, "stuck"), 120, "the Job's pods to be deleted")
    poll(lambda: not [p for p in core.list_namespaced_pod(opted_in).items if gated(p)], 60, "no gated pod")
