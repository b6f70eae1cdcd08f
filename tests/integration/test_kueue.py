"""Kueue (built from its Go module, run by the dev-cluster) admits indexed Jobs by GPU quota.

The cluster has 32 GPUs and the ClusterQueue a quota of 16: the second 16-GPU Job waits because of
Kueue alone, never because the scheduler has no room. Once admitted, kube-scheduler's default
profile places the first, netsched's profile (with netsched's extender) the second. Its own
dev-cluster (Kueue's webhooks see every Job of the cluster they run on); a few nodes, no operator.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest
from kubernetes import client

from netsched.api.labels import GPU_RESOURCE, SCHEDULER_NAME
from netsched.devcluster.devcluster import DevCluster
from netsched.devcluster.kueue import KUEUE, KUEUE_GROUP, QUEUE_LABEL
from netsched.devcluster.pods import DURATION_ANNOTATION
from netsched.devcluster.wait import poll
from netsched.testing.cluster import running, scratch_namespace

V = "v1beta2"
GPUS_PER_POD = 8


@pytest.fixture(scope="module")  # stopped when these tests end, not left running beside the session's
def kueue_cluster(tmp_path_factory) -> Iterator[DevCluster]:
    cluster = DevCluster(directory=tmp_path_factory.mktemp("kueue-cluster"), nodes=4, kueue=True,
                         run_operator=False)
    with running(cluster):
        yield cluster


@pytest.fixture
def queue(kueue_cluster) -> Iterator[tuple[str, str]]:
    """(namespace, LocalQueue) of a ClusterQueue with 16 GPUs of quota; all of it deleted afterwards."""
    api = kueue_cluster.api_client()
    custom = client.CustomObjectsApi(api)
    with scratch_namespace(client.CoreV1Api(api), "kq") as ns:
        custom.create_cluster_custom_object(KUEUE_GROUP, V, "resourceflavors", {
            "apiVersion": f"{KUEUE_GROUP}/{V}", "kind": "ResourceFlavor", "metadata": {"name": ns}})
        custom.create_cluster_custom_object(KUEUE_GROUP, V, "clusterqueues", {
            "apiVersion": f"{KUEUE_GROUP}/{V}", "kind": "ClusterQueue", "metadata": {"name": ns},
            "spec": {"cohortName": ns, "namespaceSelector": {}, "resourceGroups": [{
                "coveredResources": ["cpu", "memory", GPU_RESOURCE],
                "flavors": [{"name": ns, "resources": [
                    {"name": "cpu", "nominalQuota": "32"}, {"name": "memory", "nominalQuota": "64Gi"},
                    {"name": GPU_RESOURCE, "nominalQuota": "16"}]}]}]}})
        custom.create_namespaced_custom_object(KUEUE_GROUP, V, ns, "localqueues", {
            "apiVersion": f"{KUEUE_GROUP}/{V}", "kind": "LocalQueue", "metadata": {"name": "gpus"},
            "spec": {"clusterQueue": ns}})
        try:
            yield ns, "gpus"
        finally:
            batch = client.BatchV1Api(api)
            for job in batch.list_namespaced_job(ns).items:
                batch.delete_namespaced_job(job.metadata.name, ns, propagation_policy="Background")
            custom.delete_cluster_custom_object(KUEUE_GROUP, V, "clusterqueues", ns)
            custom.delete_cluster_custom_object(KUEUE_GROUP, V, "resourceflavors", ns)


def indexed_job(name: str, queue_name: str, pods: int, annotations: dict[str, str], scheduler: str) -> dict:
    """An indexed Job of `pods` pods × 8 GPUs in a LocalQueue; created unsuspended, as users write it."""
    resources = {"cpu": "1", "memory": "1Gi", GPU_RESOURCE: str(GPUS_PER_POD)}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: queue_name}},
        "spec": {
            "completionMode": "Indexed", "completions": pods, "parallelism": pods, "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {"schedulerName": scheduler, "restartPolicy": "Never",
                         "containers": [{"name": "train", "image": "trainer:1",
                                         "resources": {"requests": resources, "limits": resources}}]},
            },
        },
    }


def workload_conditions(custom: client.CustomObjectsApi, ns: str, job: str) -> dict[str, str]:
    """type -> status of the conditions of the Workload Kueue made for `job` ({} until it exists)."""
    for wl in custom.list_namespaced_custom_object(KUEUE_GROUP, V, ns, "workloads")["items"]:
        if any(o["kind"] == "Job" and o["name"] == job for o in wl["metadata"].get("ownerReferences", [])):
            return {c["type"]: c["status"] for c in wl.get("status", {}).get("conditions", [])}
    return {}


def job_condition(batch: client.BatchV1Api, ns: str, job: str, kind: str) -> bool:
    conditions = batch.read_namespaced_job(job, ns).status.conditions or []
    return any(c.type == kind and c.status == "True" for c in conditions)


def test_a_cluster_queue_admits_indexed_jobs_by_gpu_quota(kueue_cluster, queue):
    ns, local_queue = queue
    api = kueue_cluster.api_client()
    batch, core, custom = client.BatchV1Api(api), client.CoreV1Api(api), client.CustomObjectsApi(api)
    # Kueue converts between its API versions: v1beta2's cohortName is v1beta1's cohort
    old = custom.get_cluster_custom_object(KUEUE_GROUP, "v1beta1", "clusterqueues", ns)
    assert old["spec"].get("cohort") == ns
    gpu_nodes = {n.metadata.name for n in core.list_node().items}

    def pods(job: str) -> list[client.V1Pod]:
        return core.list_namespaced_pod(ns, label_selector=f"batch.kubernetes.io/job-name={job}").items

    def bound_and_running(job: str) -> bool:
        ps = pods(job)
        return len(ps) == 2 and all(p.spec.node_name in gpu_nodes and p.status.phase == "Running" for p in ps)

    # the first runs until told to finish; the second ends as soon as it runs
    batch.create_namespaced_job(ns, indexed_job("first", local_queue, 2, {DURATION_ANNOTATION: "1h"},
                                                "default-scheduler"))
    poll(lambda: workload_conditions(custom, ns, "first").get("Admitted") == "True", 120,
         "Kueue to admit Job first")
    poll(lambda: bound_and_running("first"), 120, "both pods of Job first bound and Running")
    assert batch.read_namespaced_job("first", ns).spec.suspend is False

    # Kueue's webhook suspends the second at creation, and quota keeps it so
    batch.create_namespaced_job(ns, indexed_job("second", local_queue, 2, {}, SCHEDULER_NAME))
    assert batch.read_namespaced_job("second", ns).spec.suspend is True
    waiting = poll(lambda: workload_conditions(custom, ns, "second").get("QuotaReserved") == "False", 120,
                   "Kueue to find no quota for Job second")
    assert waiting and not pods("second")
    assert batch.read_namespaced_job("second", ns).spec.suspend is True
    assert bound_and_running("first")  # it waited while the first held the quota

    # the first finishes: its pods end now (KWOK re-reads the duration), Kueue releases its quota
    for pod in pods("first"):
        now = {"metadata": {"annotations": {DURATION_ANNOTATION: "0s"}}}
        core.patch_namespaced_pod(pod.metadata.name, ns, now)
    poll(lambda: job_condition(batch, ns, "first", "Complete"), 120, "Job first to complete")
    poll(lambda: workload_conditions(custom, ns, "second").get("Admitted") == "True", 120,
         "Kueue to admit Job second once first finished")
    poll(lambda: job_condition(batch, ns, "second", "Complete"), 120, "Job second to run and complete")
    assert batch.read_namespaced_job("second", ns).spec.suspend is False
    second = pods("second")
    assert len(second) == 2 and all(p.spec.node_name in gpu_nodes for p in second)
    for pod in second:  # the Scheduled event follows the binding
        events = poll(lambda p=pod: core.list_namespaced_event(
            ns, field_selector=f"involvedObject.name={p.metadata.name},reason=Scheduled").items, 30,
            f"the Scheduled event of {pod.metadata.name}")
        assert [e.reporting_component for e in events] == [SCHEDULER_NAME]


def test_while_kueue_is_down_no_job_is_created_and_afterwards_jobs_queue_again(kueue_cluster, queue):
    """Kueue's Job webhooks fail closed (its failurePolicy, kept): a Job is refused, not let through
    unsuspended past the quota, and creating it again once Kueue is back works as before."""
    ns, local_queue = queue
    batch = client.BatchV1Api(kueue_cluster.api_client())
    queued = indexed_job("queued", local_queue, 1, {}, "default-scheduler")
    plain = indexed_job("plain", local_queue, 1, {}, "default-scheduler")
    del plain["metadata"]["labels"][QUEUE_LABEL]
    os.kill(kueue_cluster.status()["components"][KUEUE]["pid"], signal.SIGKILL)
    poll(lambda: KUEUE not in kueue_cluster.running_components(), 10, "Kueue to die")
    try:
        for job in (queued, plain):  # the webhook sees every Job, queued or not
            with pytest.raises(client.ApiException) as refused:
                batch.create_namespaced_job(ns, job)
            assert refused.value.status == 500 and "mjob.kb.io" in refused.value.body
    finally:
        kueue_cluster.restart(KUEUE)

    assert batch.create_namespaced_job(ns, queued).spec.suspend is True
    poll(lambda: job_condition(batch, ns, "queued", "Complete"), 120, "Job queued to be admitted and run")
