"""whatif on a workload whose pods name a native PodGroup (Kubernetes 1.37, spec.schedulingGroup): the
gang is the PodGroup, as the operator will name it, sized from the workload's manifest."""

from __future__ import annotations

from netsched.api.labels import MAX_PEER_DISTANCE
from netsched.foresight.whatif import Cluster
from netsched.foresight.whatif_workloads import render_workload, what_if_workload
from netsched.foresight.workload_gangs import gang_sets
from netsched.testing.builders import CLUSTER

EMPTY = Cluster(CLUSTER, [], [], [], [])  # 4 nodes of 8 GPUs: a1-0, a1-1 in rack-a1, a2-0, b1-0


def job_in_group(pods: int, gpus: int) -> dict:
    spec = {"schedulerName": "netsched", "restartPolicy": "Never", "schedulingGroup": {"podGroupName": "grp"},
            "containers": [{"name": "main", "image": "trainer:1",
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    template = {"metadata": {"annotations": {MAX_PEER_DISTANCE: "rack"}}, "spec": spec}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"parallelism": pods, "completions": pods, "template": template}}


def test_the_gang_of_a_job_whose_pods_name_a_native_podgroup_is_that_group():
    [s] = gang_sets(job_in_group(4, 4), "ml")
    assert (s.first.kind, s.first.namespace, s.first.name) == ("NativePodGroup", "ml", "grp")
    assert (s.count, s.gang.size, s.gang.gpus_per_member) == (1, 4, 4)


def test_whatif_places_it_in_one_rack_like_any_gang():
    answer = what_if_workload(EMPTY, job_in_group(4, 4), "ml", opted_in=True)
    [g] = answer["gangs"]
    assert g["schedulable"]["fits"] and {p["rack"] for p in g["placement"]} == {"rack-a1"}
    assert "NativePodGroup ml/grp" in render_workload(answer)
