"""`whatif` and `why` for batch Jobs, JobSets and LeaderWorkerSets, over a cluster given as plain
objects: their gangs read from the manifest, answered by the gang controller's rules."""

from __future__ import annotations

import pytest

from netsched.api.labels import MAX_PEER_DISTANCE, PREDICTED_FINISH, PREDICTED_FINISH_RANGE, PREDICTED_START
from netsched.foresight.whatif import Cluster, WhatIfError
from netsched.foresight.whatif_workloads import render_workload, what_if_workload
from netsched.foresight.why_workloads import Live, UnknownKind, render_why_workload, target, why_workload
from netsched.foresight.workload_gangs import NotAGang, gang_sets
from netsched.jobs.replica_pods import GANG_GATE
from netsched.testing.builders import CLUSTER, NOW, make_pod

EMPTY = Cluster(CLUSTER, [], [], [], [])  # 4 nodes of 8 GPUs: a1-0, a1-1 in rack-a1, a2-0, b1-0


def template(gpus: int, rack: bool = False, gate: bool = True, scheduler: str = "netsched",
             annotations: dict | None = None) -> dict:
    spec: dict = {"schedulerName": scheduler, "restartPolicy": "Never", "containers": [
        {"name": "main", "image": "trainer:1", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if gate:
        spec["schedulingGates"] = [{"name": GANG_GATE}]
    return {"metadata": {"annotations": ({MAX_PEER_DISTANCE: "rack"} if rack else {}) | (annotations or {})},
            "spec": spec}


def batch_job(pods: int, gpus: int, completions: int | None = None, **kwargs) -> dict:
    spec = {"parallelism": pods, "template": template(gpus, **kwargs)}
    if completions is not None:
        spec["completions"] = completions
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "ml"},
            "spec": spec}


def jobset(replicas: int, pods: int, gpus: int, **kwargs) -> dict:
    workers = {"name": "workers", "replicas": replicas,
               "template": {"spec": {"parallelism": pods, "template": template(gpus, **kwargs)}}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "llm"},
            "spec": {"replicatedJobs": [workers]}}


def lws(groups: int, size: int, leader_gpus: int, worker_gpus: int) -> dict:
    group = {"size": size, "leaderTemplate": template(leader_gpus), "workerTemplate": template(worker_gpus)}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "serve"}, "spec": {"replicas": groups, "leaderWorkerTemplate": group}}


# ---- the gangs of a manifest ------------------------------------------------------------------

def test_a_job_is_one_gang_of_its_parallelism_capped_by_its_completions():
    [s] = gang_sets(batch_job(4, 2, completions=3), "ml")
    assert (s.first.kind, s.first.namespace, s.first.name) == ("Job", "ml", "train")
    assert (s.count, s.gang.size) == (1, 3)
    assert s.gang.gpus_per_member == 2 and s.template == "spec.template"


def test_each_job_of_a_replicated_job_is_one_gang_named_as_the_jobset_controller_names_it():
    [s] = gang_sets(jobset(3, 2, 8), "ml")
    assert (s.first.kind, s.first.name, s.count, s.gang.size) == ("JobSet", "llm-workers-0", 3, 2)
    assert s.template == "spec.replicatedJobs[0].template.spec.template"


def test_a_leaderworkerset_group_is_one_gang_counted_as_its_larger_template():
    [s] = gang_sets(lws(2, 4, leader_gpus=1, worker_gpus=4), "ml")
    assert (s.first.kind, s.first.name, s.count, s.gang.size) == ("LeaderWorkerSet", "serve-0", 2, 4)
    assert s.gang.gpus_per_member == 4 and "counted as the larger, workerTemplate" in s.note
    [leader] = gang_sets(lws(1, 2, leader_gpus=8, worker_gpus=1), "ml")
    assert leader.gang.gpus_per_member == 8 and leader.template.endswith("leaderTemplate")


@pytest.mark.parametrize(("body", "said"), [
    ({"kind": "Deployment", "spec": {}}, "kind Deployment: netsched does not gang its pods"),
    ({"kind": "JobSet", "metadata": {"name": "x"}, "spec": {"replicatedJobs": []}},
     "spec.replicatedJobs is empty"),
    ({"kind": "LeaderWorkerSet", "spec": {"leaderWorkerTemplate": {"size": "four"}}},
     "spec.leaderWorkerTemplate.size: 'four' is not a whole number"),
    (batch_job(0, 1), "spec.parallelism is 0"),
], ids=["deployment", "empty-jobset", "lws-size", "no-pods"])
def test_a_manifest_with_no_gang_is_refused_naming_the_field(body, said):
    with pytest.raises(NotAGang) as refused:
        gang_sets(body, "ml")
    assert str(refused.value).startswith(said)


# ---- whatif ---------------------------------------------------------------------------------------

def test_a_job_with_a_rack_limit_fits_in_one_rack_of_an_empty_cluster():
    answer = what_if_workload(EMPTY, batch_job(4, 4, rack=True), "ml", opted_in=False)
    [g] = answer["gangs"]
    assert g["schedulable"]["fits"] and g["fitNow"] == 1 and g["gated"] is True
    assert {p["rack"] for p in g["placement"]} == {"rack-a1"}
    text = render_workload(answer)
    assert text.startswith("Job ml/train: 1 gang of 4 pod(s) × 4 GPU(s), priority 0 (spec.template)\n")
    assert "\n  Network needs: netsched.io/max-peer-distance=rack\n" in text
    assert "Fits now: yes (Fits)" in text and "Would run on: a1-0 ×2 (rack-a1, zone-a)" in text


def test_a_job_larger_than_any_rack_gets_the_never_fits_words():
    [g] = what_if_workload(EMPTY, batch_job(4, 8, rack=True), "ml", opted_in=True)["gangs"]
    assert (g["schedulable"]["fits"], g["schedulable"]["reason"]) == (False, "NeverFits")
    assert g["schedulable"]["message"].startswith("never fits: needs 4 replica(s) of 8 GPUs within one rack")
    assert g["placement"] == [] and g["fitNow"] == 0


def test_gangs_of_a_jobset_are_placed_one_after_the_other():
    [g] = what_if_workload(EMPTY, jobset(3, 2, 8), "ml", opted_in=None)["gangs"]
    assert g["schedulable"]["fits"] and (g["count"], g["fitNow"]) == (3, 2)
    text = render_workload({"workload": "x", "notes": [], "gangs": [g]})
    assert "Fits now: yes, 2 of 3 gangs at once" in text


def test_a_bad_annotation_is_refused_at_the_workloads_own_template():
    with pytest.raises(WhatIfError) as refused:
        what_if_workload(EMPTY, jobset(1, 2, 1, annotations={MAX_PEER_DISTANCE: "galaxy"}), "ml", True)
    assert str(refused.value) == ("spec.replicatedJobs[0].template.spec.template.metadata.annotations"
                                  "[netsched.io/max-peer-distance]: 'galaxy' is not a topology level of this "
                                  "cluster: write one of node, rack, zone")


@pytest.mark.parametrize(("kwargs", "opted_in", "gated", "said"), [
    ({}, False, True, "gated: its template has the netsched.io/gang scheduling gate"),
    ({"gate": False}, True, True, "gated by netsched's admission webhook (namespace ml has "
                                  "netsched.io/gang-scheduling=enabled)"),
    ({"gate": False}, False, False, "not gated: namespace ml is not opted in"),
    ({"gate": False}, None, None, "gated only if namespace ml has netsched.io/gang-scheduling=enabled"),
    ({"gate": False, "scheduler": "default-scheduler"}, True, False,
     "not gated: its pods name scheduler 'default-scheduler'"),
], ids=["template-gate", "webhook", "not-opted-in", "unknown", "other-scheduler"])
def test_it_says_whether_the_pods_would_be_gated(kwargs, opted_in, gated, said):
    [g] = what_if_workload(EMPTY, batch_job(2, 1, **kwargs), "ml", opted_in)["gangs"]
    assert g["gated"] is gated and g["gating"].startswith(said)


def test_the_network_needs_are_read_from_the_pod_templates_annotations():
    annotations = {"netsched.io/data-source": "zone:zone-b", "netsched.io/max-data-distance": "zone",
                   "netsched.io/max-peer-rtt-ms": "0.5", "netsched.io/duration": "60s"}
    [g] = what_if_workload(EMPTY, batch_job(2, 1, annotations=annotations), "ml", True)["gangs"]
    assert g["needs"] == {"netsched.io/max-data-distance": "zone", "netsched.io/data-source": "zone:zone-b",
                          "netsched.io/max-peer-rtt-ms": "0.5"}
    assert {p["zone"] for p in g["placement"]} == {"zone-b"}  # near its data
    [g] = what_if_workload(EMPTY, batch_job(2, 1), "ml", True)["gangs"]
    assert "  Network needs: none (no netsched.io/* limits on its pods)" in render_workload(
        {"workload": "x", "notes": [], "gangs": [g]})


def test_a_manifest_the_api_server_did_not_check_says_so():
    answer = what_if_workload(EMPTY, jobset(1, 1, 1), "ml", True, "the API server does not serve JobSet")
    assert "\nNote: the API server does not serve JobSet\n" in render_workload(answer)


def pytorchjob(master_gpus: int, workers: int | None, worker_gpus: int) -> dict:
    worker: dict = {"template": template(worker_gpus)}
    if workers is not None:
        worker["replicas"] = workers
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "mnist"},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template(master_gpus)},
                                             "Worker": worker}}}


def test_a_pytorchjob_is_one_gang_of_all_its_replicas_counted_as_the_largest_template():
    [s] = gang_sets(pytorchjob(1, 3, 4), "ml")
    assert (s.first.kind, s.first.name, s.count, s.gang.size) == ("KubeflowJob", "mnist", 1, 4)
    assert s.gang.gpus_per_member == 4 and s.template == "spec.pytorchReplicaSpecs.Worker.template"
    assert "Worker's" in s.note
    [one] = gang_sets(pytorchjob(2, None, 2), "ml")  # Worker replicas default to 1
    assert one.gang.size == 2 and not one.note
    answer = what_if_workload(EMPTY, pytorchjob(1, 3, 4), "ml", True)
    [g] = answer["gangs"]
    assert g["schedulable"]["fits"] and sum(p["replicas"] for p in g["placement"]) == 4
    assert answer["workload"] == "PyTorchJob ml/mnist"


def test_a_pytorchjob_with_no_replica_types_is_refused_naming_the_field():
    body = pytorchjob(1, 1, 1)
    body["spec"]["pytorchReplicaSpecs"] = {}
    with pytest.raises(NotAGang) as refused:
        gang_sets(body, "ml")
    assert str(refused.value).startswith("spec.pytorchReplicaSpecs is empty")


def queued(body: dict, queue: str | None = "user-queue", suspend: bool | None = True) -> dict:
    if queue:
        body["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    if suspend is not None:
        body["spec"]["suspend"] = suspend
    return body


@pytest.mark.parametrize(("queue", "suspend", "kueue", "said", "start"), [
    ("user-queue", True, False, "Held: it waits for Kueue to admit it (queue user-queue), but Kueue is not "
     "installed (the API server serves no kueue.x-k8s.io API): nothing will admit it", "never"),
    ("user-queue", True, True, "Held: it waits for Kueue to admit it (queue user-queue): Kueue lifts",
     "when Kueue admits it"),
    (None, True, None, "Held: it suspended (spec.suspend: true): nothing starts its pods until spec.suspend "
     "is set to false", "never"),
], ids=["no-kueue", "kueue", "suspended"])
def test_a_suspended_or_queued_job_is_not_told_to_start_now(queue, suspend, kueue, said, start):
    body = queued(batch_job(2, 1), queue, suspend)
    answer = what_if_workload(EMPTY, body, "ml", True, kueue_installed=kueue)
    text = render_workload(answer, NOW)
    assert said in text and f"Predicted start: {start}" in text
    assert answer["gangs"][0]["predictedStartTime"] is None and "start now" not in text


def test_a_queue_label_with_no_kueue_and_no_suspend_is_only_a_note():
    answer = what_if_workload(EMPTY, queued(batch_job(2, 1), suspend=None), "ml", True, kueue_installed=False)
    assert "held" not in answer and any("does nothing here" in n for n in answer["notes"])


def test_a_jobset_asking_kueue_for_its_topology_gets_the_operators_answer():
    body = jobset(2, 2, 8, annotations={"kueue.x-k8s.io/podset-required-topology": "netsched.io/rack"})
    [g] = what_if_workload(EMPTY, body, "ml", True)["gangs"]
    assert g["stepsAside"]["reason"] == "PlacedByKueueTopology" and g["gated"] is False
    assert "Kueue's topology-aware scheduling places its pods" in g["stepsAside"]["message"]
    text = render_workload(what_if_workload(EMPTY, body, "ml", True), NOW)
    assert g["placement"] == [] and "The gang controller will say (Normal PlacedByKueueTopology)" in text


# ---- why ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("train", ("GPUJob", "train")), ("job/train", ("Job", "train")), ("jobs.batch/train", ("Job", "train")),
    ("JobSet/llm", ("JobSet", "llm")), ("lws/serve", ("LeaderWorkerSet", "serve")),
    ("gpujob/train", ("GPUJob", "train")), ("pytorchjob/mnist", ("PyTorchJob", "mnist")),
    ("tfjobs.kubeflow.org/t", ("TFJob", "t")),
])
def test_why_takes_a_name_or_kind_slash_name(text, expected):
    assert target(text) == expected


WRITE = ("write KIND/NAME (KIND: jaxjob, job, jobset, lws, mpijob, paddlejob, pytorchjob, tfjob, xgboostjob) "
         "or a GPUJob's NAME")


@pytest.mark.parametrize(("text", "said"), [
    ("jbo/train", f"'jbo/train': unknown kind 'jbo'; {WRITE}"),
    ("job/", f"'job/': no name after the kind; {WRITE}"),
])
def test_why_refuses_a_kind_it_does_not_know(text, said):
    with pytest.raises(UnknownKind) as refused:
        target(text)
    assert str(refused.value) == said


def job_pod(i: int, node: str | None = None, gated: bool = True, job: str = "train") -> dict:
    pod = make_pod(f"{job}-{i}", node, gpus=4, labels={"batch.kubernetes.io/job-name": job},
                   **({"schedulingGates": [{"name": GANG_GATE}]} if gated else {}))
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": job,
                                           "controller": True}]
    return pod


def event(reason: str, message: str, when: str, name: str = "train") -> dict:
    return {"metadata": {"name": f"{name}.{when}"}, "involvedObject": {"kind": "Job", "name": name},
            "reason": reason, "type": "Normal", "message": message, "lastTimestamp": when}


def test_why_a_gated_job_waits_says_the_controllers_last_word_and_no_prediction():
    filler = make_pod("filler", "a1-0", gpus=8)
    cluster = Cluster(CLUSTER, [filler, *(job_pod(i) for i in range(4))], [], [], [])
    live = Live(batch_job(4, 4, rack=True), [batch_job(4, 4, rack=True)],
                [event("WaitingForPods", "1 of 4", "2025-01-01T11:00:00Z"),
                 event("NoDomainLargeEnough", "Job ml/train waits: needs 4", "2025-01-01T11:00:05Z"),
                 event("Created", "not the gang controller's", "2025-01-01T11:00:09Z")])
    answer = why_workload(cluster, live, "Job", "ml", "train")
    [g] = answer["gangs"]
    assert (g["size"], g["pods"], g["gated"], g["runsOn"]) == (4, 4, 4, [])
    assert g["event"]["reason"] == "NoDomainLargeEnough" and answer["domains"][0]["level"] == "rack"
    text = render_why_workload(answer)
    assert text.startswith("Job ml/train: 4 pod(s), 4 gated\nGang Job ml/train (size 4): 4 pod(s), 4 gated\n"
                           "  NoDomainLargeEnough (Normal, 2025-01-01T11:00:05Z): Job ml/train waits: "
                           "needs 4")
    assert "Predicted start: no prediction yet\nPredicted completion: no prediction yet" in text


def test_why_a_released_job_says_where_it_runs_and_its_predicted_times():
    body = batch_job(2, 4)
    body["metadata"]["annotations"] = {PREDICTED_START: "2025-01-01T12:00:00Z",
                                       PREDICTED_FINISH: "2025-01-01T13:00:00Z"}
    cluster = Cluster(CLUSTER, [job_pod(0, "a1-0", gated=False), job_pod(1, "a1-0", gated=False)], [], [], [])
    answer = why_workload(cluster, Live(body, [body], [event("GangReleased", "released 2 pods", "t")]),
                          "Job", "ml", "train")
    text = render_why_workload(answer)
    assert "  GangReleased (Normal, t): released 2 pods\n  Runs on: a1-0 ×2 (rack-a1, zone-a)" in text
    assert "Predicted start: 2025-01-01T12:00:00Z\nPredicted completion: 2025-01-01T13:00:00Z" in text
    assert answer["domains"] == []
    body["metadata"]["annotations"] |= {PREDICTED_FINISH_RANGE[0]: "2025-01-01T12:50:00Z",
                                        PREDICTED_FINISH_RANGE[1]: "2025-01-02T01:10:00Z"}
    answer = why_workload(cluster, Live(body, [body], []), "Job", "ml", "train")
    assert "Predicted completion: 2025-01-01T13:00:00Z (80% between 12:50:00Z and 2025-01-02T01:10:00Z)" in (
        render_why_workload(answer, NOW))


def test_why_a_job_netsched_does_not_gate_says_it_is_scheduled_pod_by_pod():
    cluster = Cluster(CLUSTER, [job_pod(0, "a1-0", gated=False)], [], [], [])
    text = render_why_workload(why_workload(cluster, Live(batch_job(1, 4), [], []), "Job", "ml", "train"))
    assert "  Not gated by netsched: its pods are scheduled one by one, not as a gang" in text


def test_why_finds_a_jobset_by_its_pods_labels_when_its_kind_is_not_served():
    labels = {"jobset.sigs.k8s.io/jobset-name": "llm", "jobset.sigs.k8s.io/replicatedjob-name": "w",
              "jobset.sigs.k8s.io/job-index": "0"}
    pod = job_pod(0, job="llm-w-0")
    pod["metadata"]["labels"] |= labels
    cluster = Cluster(CLUSTER, [pod], [], [], [])
    answer = why_workload(cluster, Live(None, [batch_job(1, 4)], []), "JobSet", "ml", "llm")
    assert [g["gang"] for g in answer["gangs"]] == ["JobSet ml/llm-w-0"] and not answer["found"]
    assert "(the object itself was not found: its pods were)" in render_why_workload(answer)


@pytest.mark.parametrize(("kind", "said"), [
    ("Job", "Job ml/gone not found (kubectl get jobs -n ml)"),
    ("LeaderWorkerSet", "LeaderWorkerSet ml/gone not found, and no pod in ml is labelled "
                        "leaderworkerset.sigs.k8s.io/name=gone (kubectl get leaderworkersets,pods -n ml)"),
])
def test_why_a_missing_workload_names_it_and_how_to_look(kind, said):
    with pytest.raises(WhatIfError) as missing:
        why_workload(EMPTY, Live(None, [], []), kind, "ml", "gone")
    assert str(missing.value) == said
