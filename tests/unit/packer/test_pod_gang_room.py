"""The packer makes room for a pod gang (a batch Job's gated pods) as for a GPUJob: the gang is one
pending job of the problem, its running pods are victims priced like a GPUJob's, and the plan
releases it pinned to the rack it freed."""

from datetime import UTC, datetime

from netsched.api import plans
from netsched.api.events import rfc3339
from netsched.api.labels import PINNED_NODE, RACK_LABEL, RELEASED_BY
from netsched.jobs.replica_pods import GANG_GATE
from netsched.packer.config import PackerConfig
from netsched.packer.controller import Packer
from netsched.packer.live_cluster import problem_of
from netsched.testing.builders import make_node, make_pod
from netsched.testing.kube import FakeKube

NODES = [make_node(f"n{i}", rack=f"rack-{i // 2}") for i in range(4)]  # two racks of two 8-GPU nodes
JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "ml", "uid": "j1"},
       "spec": {"parallelism": 2, "completions": 2}}
GANG = "ml/Job/train"


def member(i: int, node: str | None = None, scheduler: str = "netsched", priority: int = 1000,
           job: str = "train") -> dict:
    gates = {} if node else {"schedulingGates": [{"name": GANG_GATE}]}
    pod = make_pod(f"{job}-{i}", node, gpus=8, priority=priority, scheduler=scheduler,
                   labels={"batch.kubernetes.io/job-name": job},
                   annotations={"netsched.io/max-peer-distance": "rack"}, **gates)
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": job,
                                           "uid": f"uid-{job}", "controller": True}]
    return pod


def scattered() -> list[dict]:
    """A low-priority 4-GPU pod on every node: 16 GPUs free, but no node with 8."""
    return [make_pod(f"low-{i}", f"n{i}", gpus=4, priority=10, owner="ReplicaSet") for i in range(4)]


def test_a_gated_job_gang_is_one_pending_job_bound_to_a_rack():
    problem = problem_of(NODES, [*scattered(), member(0), member(1)], [], sizes={GANG: 2})
    gang = [p for p in problem.pods if p.gang == GANG]
    assert [(p.name, p.running, p.priority, p.domain, p.requests["nvidia.com/gpu"]) for p in gang] == [
        ("ml/train-0", False, 1000, RACK_LABEL, 8), ("ml/train-1", False, 1000, RACK_LABEL, 8)]


def test_a_gang_with_members_still_to_come_waits_for_its_pods_not_for_room():
    problem = problem_of(NODES, [member(0), member(1)], [], sizes={GANG: 3})
    assert problem.pods == ()  # a plan must never place part of it


def test_running_members_are_victims_of_their_gang_and_another_schedulers_job_is_no_gang():
    problem = problem_of(NODES, [member(0, "n0", priority=10), member(1, "n1", priority=10),
                                 member(2, "n2", scheduler="default-scheduler")], [])
    by = {p.name: p for p in problem.pods}
    assert by["ml/train-0"].gang == by["ml/train-1"].gang == GANG and by["ml/train-0"].movable
    assert by["ml/train-2"].gang is None  # the Job controller recreates it, but no gang of netsched's


def test_the_plan_evicts_in_one_rack_and_releases_the_gang_pinned_to_its_planned_nodes():
    now = datetime.now(UTC)
    kube = FakeKube([*NODES, *scattered(), member(0), member(1), JOB], created=rfc3339(now))
    packer = Packer(kube, PackerConfig(budget=2.0))
    packer._pack()
    [plan] = kube.list(plans.PLURAL)
    spec = plan["spec"]
    victims = spec["evictions"] + spec["moves"]  # moved: evicted, recreated in the other rack
    racks = {p["node"] for p in spec["placements"]} | {v["node"] for v in victims}
    assert sorted(p["pod"] for p in spec["placements"]) == ["ml/train-0", "ml/train-1"]
    assert len(victims) == 2 and racks in ({"n0", "n1"}, {"n2", "n3"})  # one rack freed
    packer.step(plan)  # Pending -> Evicting: the victims are evicted
    packer.step(kube.list(plans.PLURAL)[0])  # gone: Placing, the gates lifted
    planned = {p["pod"]: p["node"] for p in spec["placements"]}
    for i in (0, 1):
        pod = kube.get("pods", "ml", f"train-{i}")
        node = planned[f"ml/train-{i}"]
        terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert "schedulingGates" not in pod["spec"] and terms["nodeSelectorTerms"] == [  # its planned node
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
        assert pod["metadata"]["annotations"][RELEASED_BY] == plan["metadata"]["name"]
        assert pod["metadata"]["annotations"][PINNED_NODE] == node


def test_without_the_jobs_size_a_gang_of_the_pods_present_is_planned_whole():
    kube = FakeKube([*NODES, *scattered(), member(0), member(1)])  # the Job is gone: its pods say 2
    Packer(kube, PackerConfig(budget=2.0))._pack()
    [plan] = kube.list(plans.PLURAL)
    assert len(plan["spec"]["placements"]) == 2


def test_a_running_job_gang_is_evicted_whole_and_its_job_told_why():
    now = datetime.now(UTC)
    old = [member(i, f"n{i}", priority=10, job="old") for i in (0, 1)]  # a released gang: the only rack
    kube = FakeKube([*NODES[:2], *old, member(0), member(1), JOB], created=rfc3339(now))
    packer = Packer(kube, PackerConfig(budget=2.0))
    packer._pack()
    [plan] = kube.list(plans.PLURAL)
    assert sorted(e["pod"] for e in plan["spec"]["evictions"]) == ["ml/old-0", "ml/old-1"]
    packer.step(plan)
    [warning] = [e for e in kube.list("events", "ml") if e["involvedObject"]["name"] == "old"]
    assert (warning["type"], warning["reason"], warning["involvedObject"]["kind"]) == (
        "Warning", "EvictedByPackingPlan", "Job")
    assert warning["message"] == (f"PackingPlan {plan['metadata']['name']} evicted old-0, old-1 to make room "
                                  "for Job ml/train (priority 1000); the job waits for room again")
