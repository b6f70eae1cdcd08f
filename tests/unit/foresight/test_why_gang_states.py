"""What `why KIND/NAME` says of a pod gang that cannot go on as it is (never fits: Blocked, with no
predicted start) and of one whose pods a PackingPlan evicted."""

from __future__ import annotations

from netsched.api.labels import GANG_BLOCKED
from netsched.foresight.whatif import NEVER_STARTS, Cluster
from netsched.foresight.why_workloads import Live, render_why_workload, why_workload
from netsched.jobs.replica_pods import GANG_GATE
from netsched.testing.builders import CLUSTER, make_pod

JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "big", "namespace": "ml"},
       "spec": {"parallelism": 10}}
BLOCKED = ("NeverFits: Job ml/big is Blocked, its pods stay gated: never fits: needs 80 GPUs, the cluster "
           "has 32; lower spec.parallelism (and spec.completions), or add nodes")


def job_pod(i: int, node: str | None = None, note: str | None = None) -> dict:
    pod = make_pod(f"big-{i}", node, gpus=8, labels={"batch.kubernetes.io/job-name": "big"},
                   annotations={GANG_BLOCKED: note} if note else None,
                   **({} if node else {"schedulingGates": [{"name": GANG_GATE}]}))
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "big",
                                           "controller": True}]
    return pod


def test_why_a_job_that_never_fits_says_it_is_blocked_and_will_not_start():
    cluster = Cluster(CLUSTER, [job_pod(i, note=BLOCKED) for i in range(10)], [], [], [])
    answer = why_workload(cluster, Live(JOB, [JOB], []), "Job", "ml", "big")
    [gang] = answer["gangs"]
    assert gang["blocked"] == BLOCKED and gang["size"] == 10
    lines = render_why_workload(answer).splitlines()
    assert f"  Blocked: {BLOCKED}" in lines and NEVER_STARTS in lines
    assert not any(line.startswith("Predicted start: no prediction") for line in lines)


def test_why_names_the_plan_that_evicted_the_gangs_pods():
    evicted = {"metadata": {"name": "big.1"}, "involvedObject": {"kind": "Job", "name": "big"},
               "reason": "EvictedByPackingPlan", "type": "Warning", "lastTimestamp": "2026-12-07T10:00:00Z",
               "message": "PackingPlan pack-1 evicted big-0 to make room for Job ml/urgent (priority 1000)"}
    cluster = Cluster(CLUSTER, [job_pod(0), job_pod(1, "a1-0")], [], [], [])
    text = render_why_workload(why_workload(cluster, Live(JOB, [JOB], [evicted]), "Job", "ml", "big"))
    assert ("  Evicted (2026-12-07T10:00:00Z): PackingPlan pack-1 evicted big-0 to make room for Job "
            "ml/urgent (priority 1000)") in text.splitlines()


def test_why_a_gpujob_a_plan_evicted_says_so():
    from netsched.foresight.why import render_why, why
    from netsched.testing.builders import make_gpujob
    said = ("PackingPlan pack-7 evicted train-0 to make room for GPUJob ml/urgent (priority high, 1000); "
            "the job waits for room again")
    body = make_gpujob("train", replicas=1, gpus=8)
    body["status"] = {"phase": "Pending", "conditions": [
        {"type": "Preempted", "status": "True", "reason": "EvictedByPackingPlan", "message": said}]}
    text = render_why(why(Cluster(CLUSTER, [], [], [body], []), "ml", "train"))
    assert f"Preempted: EvictedByPackingPlan: {said}" in text.splitlines()


def test_why_reads_a_kubeflow_job_and_a_podgroup_with_their_sizes_and_predicted_times():
    from netsched.api.labels import PREDICTED_FINISH, PREDICTED_START
    from netsched.foresight.why_workloads import target
    assert target("pytorchjob/bert") == ("PyTorchJob", "bert")
    assert target("podgroups/pg") == ("PodGroup", "pg")
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
           "metadata": {"name": "bert", "namespace": "ml"},
           "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 3}}}}
    pods = []
    for i in range(4):
        pod = make_pod(f"bert-{i}", gpus=8, labels={"training.kubeflow.org/job-name": "bert"},
                       schedulingGates=[{"name": GANG_GATE}])
        pod["metadata"]["ownerReferences"] = [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                                               "name": "bert", "controller": True}]
        pods.append(pod)
    pods[0]["metadata"]["annotations"] = {PREDICTED_START: "2026-12-07T12:00:00Z",
                                          PREDICTED_FINISH: "2026-12-07T13:00:00Z"}
    answer = why_workload(Cluster(CLUSTER, pods, [], [], []), Live(job, [], []), "PyTorchJob", "ml", "bert")
    [gang] = answer["gangs"]
    assert (gang["gang"], gang["size"], gang["gated"]) == ("KubeflowJob ml/bert", 4, 4)
    text = render_why_workload(answer)
    assert "Predicted start: 2026-12-07T12:00:00Z" in text
    assert "Predicted completion: 2026-12-07T13:00:00Z" in text

    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": "pg", "namespace": "ml"}, "spec": {"minMember": 3}}
    members = [make_pod(f"pg-{i}", gpus=8, labels={"scheduling.x-k8s.io/pod-group": "pg"},
                        schedulingGates=[{"name": GANG_GATE}]) for i in range(3)]
    answer = why_workload(Cluster(CLUSTER, members, [], [], []), Live(group, [], []), "PodGroup", "ml", "pg")
    assert [(g["gang"], g["size"]) for g in answer["gangs"]] == [("PodGroup ml/pg", 3)]
