"""Predicted start and finish on batch Jobs, on the real control plane: the operator's forecast plays
Jobs (pods made by kube-controller-manager's Job controller, gated by their template, released whole
by the operator, finished by KWOK) in one queue and writes their times as annotations on the Job; a
gang of bare pods (a Kueue plain-pod group, Kueue not run) carries them on its first pod."""

from __future__ import annotations

from datetime import timedelta

import pytest
from kubernetes import client

from netsched.api.events import parse_rfc3339
from netsched.api.labels import EXPECTED_SECONDS, GPU_RESOURCE, PREDICTED_FINISH, PREDICTED_START
from netsched.devcluster.pods import gated_job, gpu_pod
from netsched.devcluster.wait import poll
from netsched.jobs.kinds.batch_job import BATCH_JOB
from netsched.jobs.kinds.kueue_pod_group import KUEUE_POD_GROUP
from netsched.jobs.replica_pods import GANG_GATE
from netsched.operator.forecaster.patches import MIN_MOVE

TIMES = (PREDICTED_START, PREDICTED_FINISH)
JOB_NAME = BATCH_JOB.name_labels[0]


@pytest.fixture(scope="module")
def batch(dev_cluster) -> client.BatchV1Api:
    return client.BatchV1Api(dev_cluster.api_client())


def times(batch, namespace: str, name: str) -> dict[str, str]:
    annotations = batch.read_namespaced_job(name, namespace).metadata.annotations or {}
    return {k: v for k, v in annotations.items() if k in TIMES}


def succeeded(batch, namespace: str, name: str) -> int:
    return batch.read_namespaced_job(name, namespace).status.succeeded or 0


def all_free(core) -> bool:
    live = [p for p in core.list_pod_for_all_namespaces().items
            if p.spec.node_name and p.status.phase not in ("Succeeded", "Failed")]
    return not any((c.resources.limits or {}).get(GPU_RESOURCE) for p in live for c in p.spec.containers)


def test_a_job_waiting_behind_a_running_job_gets_a_predicted_start_and_finish_until_each_is_done(
        core, batch, namespace):
    nodes = len(core.list_node().items)
    poll(lambda: all_free(core), 180, "every GPU free")
    # whole-node pods: `first` takes every node, `second` waits for it
    batch.create_namespaced_job(namespace, gated_job("first", nodes, 8, "60s", {EXPECTED_SECONDS: "60"}))
    poll(lambda: all(p.spec.node_name for p in core.list_namespaced_pod(namespace).items) and
         len(core.list_namespaced_pod(namespace).items) == nodes, 120, "Job first's pods to be bound")
    second = gated_job("second", nodes // 2, 8, "10s", {EXPECTED_SECONDS: "10"})
    batch.create_namespaced_job(namespace, second)

    # it runs: a finish, and no start (one predicted while it waited is taken off)
    running = poll(lambda: (t := times(batch, namespace, "first")).keys() == {PREDICTED_FINISH} and t, 60,
                   "only a predicted finish on the running Job first")
    waiting = poll(lambda: (t := times(batch, namespace, "second")).keys() == set(TIMES) and t, 60,
                   "a predicted start and finish on the waiting Job second")
    start, finish = parse_rfc3339(waiting[PREDICTED_START]), parse_rfc3339(waiting[PREDICTED_FINISH])
    assert abs((finish - start).total_seconds() - 10) <= 1  # its hint, from the same forecast
    # it starts when first is predicted to end (first's time is rewritten only once it moves MIN_MOVE)
    assert start >= parse_rfc3339(running[PREDICTED_FINISH]) - timedelta(seconds=MIN_MOVE + 1)

    poll(lambda: succeeded(batch, namespace, "first") == nodes, 180, "Job first to finish")
    poll(lambda: times(batch, namespace, "first") == {}, 60, "the predicted times off the finished Job first")
    poll(lambda: succeeded(batch, namespace, "second") == nodes // 2, 180, "Job second to run and finish")
    poll(lambda: times(batch, namespace, "second") == {}, 60, "no predicted times on the finished Job second")

    for name, size in (("first", nodes), ("second", nodes // 2)):  # the annotations disturbed no Job
        job = batch.read_namespaced_job(name, namespace)
        assert [c.type for c in job.status.conditions if c.status == "True"][-1] == "Complete"
        assert job.status.succeeded == size and not job.status.failed
        pods = core.list_namespaced_pod(namespace, label_selector=f"{JOB_NAME}={name}").items
        assert len(pods) == size, [p.metadata.name for p in pods]  # no pod made again


def test_a_running_job_gets_a_predicted_finish_that_is_taken_off_when_it_ends(core, batch, namespace):
    batch.create_namespaced_job(namespace, gated_job("solo", 2, 1, "30s", {EXPECTED_SECONDS: "30"}))
    pods = poll(lambda: (found := core.list_namespaced_pod(namespace).items)
                and all(p.status.start_time for p in found) and found, 90, "Job solo's pods to start")
    # running: a finish and no start (one predicted while it waited is taken off)
    running = poll(lambda: (t := times(batch, namespace, "solo")).keys() == {PREDICTED_FINISH} and t, 60,
                   "only a predicted finish on the running Job solo")
    started = min(p.status.start_time for p in pods)
    off = (parse_rfc3339(running[PREDICTED_FINISH]) - started).total_seconds() - 30
    assert -1 <= off <= MIN_MOVE + 1, off  # its hint from when it started
    poll(lambda: succeeded(batch, namespace, "solo") == 2, 120, "Job solo to finish")
    poll(lambda: times(batch, namespace, "solo") == {}, 60, "the predicted finish off the finished Job solo")


def test_a_gang_of_bare_pods_carries_its_times_on_its_first_pod(core, namespace):
    group = {KUEUE_POD_GROUP.name_labels[0]: "grp"}
    notes = {KUEUE_POD_GROUP.size_annotation: "2", EXPECTED_SECONDS: "30"}
    for i in range(2):  # a Kueue plain-pod group: no controller owns its pods
        pod = gpu_pod(f"grp-{i}", 1, duration="30s", labels=group, annotations=notes)
        pod["spec"]["schedulingGates"] = [{"name": GANG_GATE}]
        core.create_namespaced_pod(namespace, pod)

    def pod_times(name: str) -> dict[str, str]:
        annotations = core.read_namespaced_pod(name, namespace).metadata.annotations or {}
        return {k: v for k, v in annotations.items() if k in TIMES}
    poll(lambda: all(p.status.start_time for p in core.list_namespaced_pod(namespace).items), 90,
         "the group's pods to start")
    poll(lambda: pod_times("grp-0").keys() == {PREDICTED_FINISH}, 60, "only a predicted finish on pod grp-0")
    assert pod_times("grp-1") == {}  # one pod speaks for the group
    poll(lambda: all(p.status.phase == "Succeeded" for p in core.list_namespaced_pod(namespace).items), 120,
         "the group's pods to finish")
    poll(lambda: pod_times("grp-0") == {}, 60, "no predicted finish on the finished pod grp-0")
