"""The packer on a snapshot of the real dev-cluster: a high-priority gang that does not fit."""

from __future__ import annotations

import json
import uuid

import pytest
from builders import make_gpujob
from kubernetes import client

from netsched.cli import main
from netsched.cluster.wait import poll
from netsched.operator.cluster_snapshot import cluster_snapshot
from netsched.operator.spec import GROUP, PLURAL, VERSION
from netsched.packing.solver import solve


@pytest.fixture(scope="module")
def priorities(dev_cluster):
    sched = client.SchedulingV1Api(dev_cluster.api_client())
    suffix = uuid.uuid4().hex[:6]
    names = {"low": f"test-low-{suffix}", "high": f"test-high-{suffix}"}
    for level, value in (("low", 100), ("high", 100000)):
        sched.create_priority_class({"metadata": {"name": names[level]}, "value": value})
    yield names
    for name in names.values():
        sched.delete_priority_class(name)


def _fill_with_low_priority_jobs(dev_cluster, core, namespace: str, priorities: dict) -> None:
    jobs = client.CustomObjectsApi(dev_cluster.api_client())
    nodes = len(core.list_node().items)
    for i in range(nodes // 2):  # jobs of 2 x 8 GPUs fill every node
        jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
            f"low-{i}", replicas=2, gpus=8, duration="600s", priorityClassName=priorities["low"]))
    poll(lambda: sum(p.status.phase == "Running" for p in core.list_namespaced_pod(namespace).items) == nodes,
         60, "the low-priority jobs to fill every node")
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "urgent", replicas=1, gpus=8, duration="5s", priorityClassName=priorities["high"]))


def _urgent_waits(core, namespace: str) -> None:
    poll(lambda: [p for p in core.list_namespaced_pod(namespace).items
                  if p.metadata.name == "urgent-0" and p.spec.scheduling_gates], 30, "urgent-0 to wait gated")


def test_a_live_snapshot_yields_a_plan_that_evicts_only_lower_priority_movable_pods(
        dev_cluster, core, namespace, priorities):
    _fill_with_low_priority_jobs(dev_cluster, core, namespace, priorities)
    _urgent_waits(core, namespace)
    snap = cluster_snapshot(dev_cluster.api_client())
    urgent = next(p for p in snap.pods if p.name == f"{namespace}/urgent-0")
    assert urgent.node is None and urgent.gang == f"{namespace}/urgent" and urgent.priority == 100000

    plan = solve(snap, budget=2.0)
    changes = plan.changes(snap)
    assert plan.placement[urgent.name] is not None and plan.proven_optimal
    by_name = {p.name: p for p in snap.pods}
    evicted = [by_name[name] for name, _ in changes["evictions"]]
    assert evicted and all(p.priority == 100 and p.movable for p in evicted)
    assert len({p.gang for p in evicted}) == 1 and len(evicted) == 2  # one whole low gang, nothing more


def test_a_pdb_that_allows_no_disruption_leaves_the_cluster_as_it_is(dev_cluster, core, namespace, priorities,
                                                                     capsys):
    policy = client.PolicyV1Api(dev_cluster.api_client())
    low_pods = len(core.list_node().items)  # one 8-GPU pod per node
    # minAvailable as a number: the disruption controller needs no scale subresource for GPUJobs
    policy.create_namespaced_pod_disruption_budget(namespace, {
        "metadata": {"name": "keep-low"},
        "spec": {"minAvailable": low_pods, "selector": {"matchExpressions": [
            {"key": "netsched.io/job", "operator": "In", "values": [f"low-{i}" for i in range(8)]}]}}})
    _fill_with_low_priority_jobs(dev_cluster, core, namespace, priorities)
    _urgent_waits(core, namespace)
    poll(lambda: policy.read_namespaced_pod_disruption_budget("keep-low", namespace).status.current_healthy
         == low_pods, 30, "the disruption controller to count the PDB's pods")

    assert main(["pack", "--from-cluster", f"--kubeconfig={dev_cluster.kubeconfig}", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["source"] == "current" and plan["evictions"] == [] and plan["moves"] == []
    assert not any(p["pod"] == f"{namespace}/urgent-0" for p in plan["placements"])
