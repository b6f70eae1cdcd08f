"""Predicted start and completion in `whatif`, with pod gangs in its forecast: a GPUJob or a Job waiting
for a running Job's gang starts when that gang is predicted to end; a Job, JobSet or LeaderWorkerSet
manifest gets its own times, played in the same forecast as the gangs it would make."""

from __future__ import annotations

from datetime import timedelta

import pytest

from netsched.api.events import rfc3339
from netsched.api.labels import EXPECTED_SECONDS, GPU_RESOURCE
from netsched.foresight.whatif import NEVER_FITS, UNLISTED_JOBS, Cluster, render, what_if
from netsched.foresight.whatif_workloads import render_workload, what_if_workload
from netsched.jobs.replica_pods import GANG_GATE
from netsched.testing.builders import CLUSTER, NOW, ago, make_batch_job, make_gpujob, make_job_pod
from netsched.testing.kube import FakeKube

HINT = {EXPECTED_SECONDS: "300"}
FIRST_ENDS = NOW + timedelta(seconds=200)  # started 100 s ago, 300 s to run


def template(gpus: int, annotations: dict | None) -> dict:
    return {"metadata": {"annotations": annotations or {}}, "spec": {
        "schedulerName": "netsched", "restartPolicy": "Never", "schedulingGates": [{"name": GANG_GATE}],
        "containers": [{"name": "main", "image": "trainer:1",
                        "resources": {"limits": {GPU_RESOURCE: str(gpus)}}}]}}


def batch_job(pods: int, gpus: int, annotations: dict | None = None) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"parallelism": pods, "template": template(gpus, annotations)}}


def jobset(replicas: int, pods: int, gpus: int, annotations: dict | None = None) -> dict:
    workers = {"name": "workers", "replicas": replicas,
               "template": {"spec": {"parallelism": pods, "template": template(gpus, annotations)}}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "llm"},
            "spec": {"replicatedJobs": [workers]}}


def busy(batch_jobs: bool = True) -> Cluster:
    """Batch Job `first` (a gang released 100 s ago, hinted to run 300 s) on every GPU; its Job listed
    unless `batch_jobs` is False (the user may not list them)."""
    pods = [make_job_pod("first", i, n["metadata"]["name"], gpus=8, started=ago(100), annotations=HINT)
            for i, n in enumerate(CLUSTER)]
    jobs = [make_batch_job("first", len(CLUSTER))] if batch_jobs else []
    return Cluster(CLUSTER, pods, [], [], [], jobs, () if batch_jobs else (UNLISTED_JOBS,))


def gpujob() -> dict:
    body = make_gpujob("next", replicas=2, gpus=8, manifest=True)
    body["metadata"] |= {"namespace": "ml", "uid": "whatif", "creationTimestamp": rfc3339(NOW)}
    body["spec"].setdefault("workload", {})["expectedDurationSeconds"] = 60
    return body


def test_a_gpujob_waiting_for_a_running_job_gang_starts_when_the_gang_is_predicted_to_end():
    answer = what_if(busy(), gpujob(), [], now=NOW)
    assert answer["predictedStartTime"] == rfc3339(FIRST_ENDS) and answer["waitsFor"] == ["Job ml/first"]
    assert answer["predictedCompletionTime"] == rfc3339(FIRST_ENDS + timedelta(seconds=60))
    assert answer["notes"] == []
    assert f"Predicted start: {rfc3339(FIRST_ENDS)} (in 3 min), when Job ml/first is predicted to finish" in \
        render(answer, NOW)


def test_without_the_batch_jobs_the_gang_holds_its_room_with_no_end_and_the_answer_says_why():
    answer = what_if(busy(batch_jobs=False), gpujob(), [], now=NOW)
    assert answer["predictedStartTime"] is None and answer["notes"] == [UNLISTED_JOBS]
    text = render(answer, NOW)
    assert f"\nNote: {UNLISTED_JOBS}\n" in text
    assert "Predicted start: unknown (the room it needs is held by pods with no predicted end)" in text


def test_reading_the_cluster_goes_on_without_batch_jobs_the_user_may_not_list():
    kube = FakeKube(CLUSTER)
    kube.fail("list", "jobs", 403, "jobs.batch is forbidden")
    cluster = Cluster.read(kube)
    assert (cluster.batch_jobs, cluster.notes) == ([], (UNLISTED_JOBS,))
    assert [n["metadata"]["name"] for n in cluster.nodes] == [n["metadata"]["name"] for n in CLUSTER]


def test_a_job_that_fits_now_starts_now_and_completes_after_its_hint():
    answer = what_if_workload(Cluster(CLUSTER, [], [], [], []), batch_job(2, 4, annotations=HINT), "ml",
                              True, now=NOW)
    [g] = answer["gangs"]
    assert g["predictedStartTime"] == rfc3339(NOW) and g["waitsFor"] == []
    assert g["predictedCompletionTime"] == rfc3339(NOW + timedelta(seconds=300))
    assert g["estimate"]["basis"].startswith(f"the pods' {EXPECTED_SECONDS} annotation")
    text = render_workload(answer, NOW)
    assert "\n  Run time: 5 min (the pods' netsched.io/expected-duration-seconds annotation" in text
    assert f"\n  Predicted start: {rfc3339(NOW)} (now)\n" in text
    assert f"\n  Predicted completion: {rfc3339(NOW + timedelta(seconds=300))} (in 5 min)\n" in text
    assert text.endswith("\nNothing was created.") and "not forecast" not in text


def test_a_job_that_must_wait_starts_after_the_running_gang_it_waits_for():
    [g] = what_if_workload(busy(), batch_job(2, 8, annotations={EXPECTED_SECONDS: "60"}), "ml", True,
                           now=NOW)["gangs"]
    assert g["predictedStartTime"] == rfc3339(FIRST_ENDS) and g["waitsFor"] == ["Job ml/first"]
    assert g["predictedCompletionTime"] == rfc3339(FIRST_ENDS + timedelta(seconds=60))


def test_with_no_hint_and_no_history_it_says_what_to_set_and_predicts_no_completion():
    answer = what_if_workload(Cluster(CLUSTER, [], [], [], []), batch_job(2, 4), "ml", True, now=NOW)
    [g] = answer["gangs"]
    assert g["predictedStartTime"] == rfc3339(NOW) and g["predictedCompletionTime"] is None
    text = render_workload(answer, NOW)
    assert (f"\n  Run time: unknown (only 0 finished job(s) to learn from; set the pods' {EXPECTED_SECONDS} "
            "annotation to say how long it runs)\n") in text
    assert "Predicted completion" not in text


def test_with_history_and_no_hint_the_median_run_is_its_run_time():
    past = [{"outcome": "Succeeded", "duration_seconds": 120, "workload_kind": "training"}] * 3
    [g] = what_if_workload(Cluster(CLUSTER, [], [], [], []), batch_job(2, 4), "ml", True,
                           past=past, now=NOW)["gangs"]
    assert g["estimate"]["seconds"] == 120
    assert g["predictedCompletionTime"] == rfc3339(NOW + timedelta(seconds=120))


def test_a_job_that_never_fits_gets_no_predicted_start():
    answer = what_if_workload(Cluster(CLUSTER, [], [], [], []), batch_job(5, 8, annotations=HINT), "ml", True,
                              now=NOW)
    [g] = answer["gangs"]
    assert g["schedulable"]["reason"] == "NeverFits" and g["predictedStartTime"] is None
    assert f"\n  {NEVER_FITS}\n" in render_workload(answer, NOW)


@pytest.mark.parametrize("busy_first", [False, True])
def test_the_gangs_of_a_jobset_start_one_after_the_other_as_room_frees(busy_first):
    # 3 gangs of 2 × 8 GPUs on 4 nodes of 8: two at once, the third when one of them ends
    cluster = busy() if busy_first else Cluster(CLUSTER, [], [], [], [])
    answer = what_if_workload(cluster, jobset(3, 2, 8, annotations={EXPECTED_SECONDS: "60"}), "ml", True,
                              now=NOW)
    [g] = answer["gangs"]
    begin = FIRST_ENDS if busy_first else NOW
    starts = [p["predictedStartTime"] for p in g["predictedPerGang"]]
    assert starts == [rfc3339(begin)] * 2 + [rfc3339(begin + timedelta(seconds=60))]
    assert g["predictedCompletionTime"] == rfc3339(begin + timedelta(seconds=120))
    last = rfc3339(begin + timedelta(seconds=60))
    assert f"\n  The last of its 3 gangs: predicted start {last} (" in render_workload(answer, NOW)


def test_with_enough_history_the_completion_has_an_80_percent_interval_from_past_errors():
    past = [{"outcome": "Succeeded", "duration_seconds": s, "workload_kind": "training"}
            for s in (80, 90, 100, 100, 110, 120, 130, 100, 95, 105, 150, 70)]
    answer = what_if_workload(Cluster(CLUSTER, [], [], [], []), batch_job(2, 4), "ml", True, past=past,
                              now=NOW)
    [g] = answer["gangs"]
    low, mid, high = (g[k] for k in ("predictedCompletionTimeP10", "predictedCompletionTime",
                                     "predictedCompletionTimeP90"))
    assert low < mid < high and g["predictedStartTimeP10"] is None  # it fits now: it starts now
    text = render_workload(answer, NOW)
    assert f"(80% between {low.split('T')[1]} and {high.split('T')[1]})" in text
