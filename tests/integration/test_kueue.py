"""Kueue (built from its Go module, run by the dev-cluster) admits indexed Jobs by GPU quota; netsched's
webhook gates the pods of the Jobs it admits and the operator places each one as a gang.

The cluster has 64 GPUs and the ClusterQueue a quota of 16: the second 16-GPU Job waits because of
Kueue alone, never because the scheduler has no room. Once admitted, kube-scheduler's default
profile places the first, netsched's profile (with netsched's extender) the second. In a namespace
opted in to netsched's webhook, a Kueue-admitted Job's pods are gated at creation and released whole;
Kueue preempting such a Job while netsched holds its gate deletes its pods, gated ones included, and
the Job runs later, whole; pods that Kueue's topology-aware scheduling places are left to Kueue. Its
own dev-cluster (Kueue's webhooks see every Job of the cluster they run on).
"""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Iterator

import pytest
from kubernetes import client

from netsched.api.labels import (
    GANG_OPT_IN_LABEL,
    GANG_OPT_IN_VALUE,
    GPU_RESOURCE,
    MAX_PEER_DISTANCE,
    RACK_LABEL,
    SCHEDULER_NAME,
)
from netsched.devcluster.devcluster import DevCluster
from netsched.devcluster.kueue import KUEUE, KUEUE_GROUP, QUEUE_LABEL
from netsched.devcluster.pods import DURATION_ANNOTATION, gpu_pod
from netsched.devcluster.wait import poll
from netsched.jobs.replica_pods import GANG_GATE
from netsched.operator import COMPONENT
from netsched.testing.cluster import free_gpus, pinned_to, running, scratch_namespace

V = "v1beta2"
GPUS_PER_POD = 8


@pytest.fixture(scope="module")  # stopped when these tests end, not left running beside the session's
def kueue_cluster(tmp_path_factory) -> Iterator[DevCluster]:
    cluster = DevCluster(directory=tmp_path_factory.mktemp("kueue-cluster"), nodes=8, kueue=True)
    with running(cluster):
        yield cluster


def kueue_object(kind: str, name: str, spec: dict | None = None, **fields) -> dict:
    body = {"apiVersion": f"{KUEUE_GROUP}/{V}", "kind": kind, "metadata": {"name": name}, **fields}
    return {**body, "spec": spec} if spec is not None else body


def create_queue(custom: client.CustomObjectsApi, ns: str, gpus: int, flavor: dict | None = None,
                 preemption: dict | None = None) -> str:
    """A ResourceFlavor (spec `flavor`) and a ClusterQueue named `ns` with `gpus` GPUs of quota, and
    their LocalQueue in `ns`; returns the LocalQueue. delete_kueue_objects deletes them."""
    custom.create_cluster_custom_object(KUEUE_GROUP, V, "resourceflavors",
                                        kueue_object("ResourceFlavor", ns, flavor))
    custom.create_cluster_custom_object(KUEUE_GROUP, V, "clusterqueues", kueue_object("ClusterQueue", ns, {
        "cohortName": ns, "namespaceSelector": {}, "preemption": preemption or {}, "resourceGroups": [{
            "coveredResources": ["cpu", "memory", GPU_RESOURCE],
            "flavors": [{"name": ns, "resources": [
                {"name": "cpu", "nominalQuota": "64"}, {"name": "memory", "nominalQuota": "128Gi"},
                {"name": GPU_RESOURCE, "nominalQuota": str(gpus)}]}]}]}))
    custom.create_namespaced_custom_object(KUEUE_GROUP, V, ns, "localqueues", kueue_object(
        "LocalQueue", "gpus", {"clusterQueue": ns}))
    return "gpus"


def delete_kueue_objects(api: client.ApiClient, ns: str) -> None:
    """The Jobs in `ns` and the cluster-scoped Kueue objects named after it."""
    batch, custom = client.BatchV1Api(api), client.CustomObjectsApi(api)
    for job in batch.list_namespaced_job(ns).items:
        batch.delete_namespaced_job(job.metadata.name, ns, propagation_policy="Background")
    for plural in ("clusterqueues", "resourceflavors", "topologies", "workloadpriorityclasses"):
        for obj in custom.list_cluster_custom_object(KUEUE_GROUP, V, plural)["items"]:
            if obj["metadata"]["name"] == ns or obj["metadata"]["name"].startswith(f"{ns}-"):
                custom.delete_cluster_custom_object(KUEUE_GROUP, V, plural, obj["metadata"]["name"])


@pytest.fixture
def queue(kueue_cluster) -> Iterator[tuple[str, str]]:
    """(namespace, LocalQueue) of a ClusterQueue with 16 GPUs of quota; all of it deleted afterwards."""
    api = kueue_cluster.api_client()
    with scratch_namespace(client.CoreV1Api(api), "kq") as ns:
        try:
            yield ns, create_queue(client.CustomObjectsApi(api), ns, 16)
        finally:
            delete_kueue_objects(api, ns)


@pytest.fixture
def gang_namespace(kueue_cluster) -> Iterator[str]:
    """A namespace opted in to netsched's webhook, every node empty; its Kueue objects deleted afterwards."""
    api = kueue_cluster.api_client()
    core = client.CoreV1Api(api)
    with scratch_namespace(core, "kg") as ns:
        core.patch_namespace(ns, {"metadata": {"labels": {GANG_OPT_IN_LABEL: GANG_OPT_IN_VALUE}}})
        poll(lambda: all(v == GPUS_PER_POD for v in free_gpus(core).values()), 180, "every node empty")
        try:
            yield ns
        finally:
            delete_kueue_objects(api, ns)


def indexed_job(name: str, queue_name: str, pods: int, annotations: dict[str, str], scheduler: str,
                gpus: int = GPUS_PER_POD) -> dict:
    """An indexed Job of `pods` pods × `gpus` GPUs in a LocalQueue; created unsuspended, as users write it."""
    resources = {"cpu": "1", "memory": "1Gi", GPU_RESOURCE: str(gpus)}
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


def workload(custom: client.CustomObjectsApi, ns: str, job: str) -> dict:
    """The Workload Kueue made for `job` ({} until it exists)."""
    for wl in custom.list_namespaced_custom_object(KUEUE_GROUP, V, ns, "workloads")["items"]:
        if any(o["kind"] == "Job" and o["name"] == job for o in wl["metadata"].get("ownerReferences", [])):
            return wl
    return {}


def workload_conditions(custom: client.CustomObjectsApi, ns: str, job: str) -> dict[str, str]:
    """type -> status of the conditions of the Workload Kueue made for `job` ({} until it exists)."""
    return {c["type"]: c["status"] for c in workload(custom, ns, job).get("status", {}).get("conditions", [])}


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


# ---- with netsched's webhook and operator: Kueue says when, netsched where and all at once ----------

PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"  # a Job's WorkloadPriorityClass
WAITS = {"WaitingForPods", "InsufficientResources", "NoDomainLargeEnough"}  # why the operator holds a gang


def fill(core: client.CoreV1Api, ns: str, keep: dict[str, int]) -> list[str]:
    """A pod on each node of `keep` (bound by name, no queue) leaving that many GPUs free; their names."""
    names = []
    for node, free in sorted(keep.items()):
        filler = gpu_pod(f"filler-{node}", GPUS_PER_POD - free, duration="1h")
        filler["spec"]["nodeName"] = node
        names.append(core.create_namespaced_pod(ns, filler).metadata.name)
    return names


def pods_of(core: client.CoreV1Api, ns: str, job: str) -> list[client.V1Pod]:
    return core.list_namespaced_pod(ns, label_selector=f"batch.kubernetes.io/job-name={job}").items


def gated(pod: client.V1Pod) -> bool:
    return any(g.name == GANG_GATE for g in pod.spec.scheduling_gates or ())


def said(core: client.CoreV1Api, ns: str, job: str) -> list[client.CoreV1Event]:
    """What netsched's operator said on Job `job`, oldest first."""
    events = core.list_namespaced_event(ns, field_selector=f"involvedObject.name={job}").items
    return sorted((e for e in events if e.reporting_component == COMPONENT),
                  key=lambda e: e.metadata.creation_timestamp)


def queued(job: dict, priority: str | None = None) -> dict:
    if priority:
        job["metadata"]["labels"][PRIORITY_LABEL] = priority
    return job


def test_a_kueue_admitted_job_is_gated_by_the_webhook_and_placed_whole_in_one_rack(kueue_cluster,
                                                                                    gang_namespace):
    """Kueue decides that it runs (quota for 8 GPUs), netsched where: the one rack with room for all four
    2-GPU pods, every other node keeping 3 GPUs free (room enough for them all, scattered)."""
    ns, api = gang_namespace, kueue_cluster.api_client()
    batch, core, custom = client.BatchV1Api(api), client.CoreV1Api(api), client.CustomObjectsApi(api)
    local_queue = create_queue(custom, ns, 32)
    racks = {n.metadata.name: n.metadata.labels[RACK_LABEL] for n in core.list_node().items}
    target = random.Random().choice(sorted(set(racks.values())))
    fill(core, ns, {node: 4 if rack == target else 3 for node, rack in racks.items()})

    created = batch.create_namespaced_job(ns, indexed_job("train", local_queue, 4, {
        MAX_PEER_DISTANCE: "rack", DURATION_ANNOTATION: "5s"}, SCHEDULER_NAME, gpus=2))
    # Kueue's webhook suspended it as it was created (a read afterwards may find it admitted already)
    assert created.spec.suspend is True
    poll(lambda: workload_conditions(custom, ns, "train").get("Admitted") == "True", 120,
         "Kueue to admit train")

    def bound() -> dict[str, str] | bool:
        pods = [p for p in pods_of(core, ns, "train") if p.status.phase not in ("Succeeded", "Failed")]
        assert len({gated(p) for p in pods}) <= 1, [(p.metadata.name, gated(p)) for p in pods]  # never half
        return len(pods) == 4 and all(p.spec.node_name for p in pods) and {
            p.metadata.name: p.spec.node_name for p in pods}
    placed = poll(bound, 120, "the 4 pods of Job train to be bound")
    assert {racks[node] for node in placed.values()} == {target}
    # the operator pinned each pod to its node, placed with the gang, as it lifted the gate the webhook added
    assert all(pinned_to(p) == [p.spec.node_name] for p in pods_of(core, ns, "train"))
    poll(lambda: job_condition(batch, ns, "train", "Complete"), 120, "Job train to complete")
    released = [e for e in said(core, ns, "train") if e.reason == "GangReleased"]
    assert len(released) == 1 and "chosen together" in released[0].message


def test_kueue_preempts_a_job_netsched_holds_gated_and_it_runs_later_whole(kueue_cluster, gang_namespace):
    """A low-priority Job Kueue admitted waits at netsched's gate (no node has room for a 4-GPU pod); a
    high-priority Job in the same ClusterQueue preempts it: Kueue suspends it, the Job controller deletes
    its gated pods, netsched forgets the gang. Readmitted later, it is gated and said anew, and runs whole."""
    ns, api = gang_namespace, kueue_cluster.api_client()
    batch, core, custom = client.BatchV1Api(api), client.CoreV1Api(api), client.CustomObjectsApi(api)
    for name, value in ((f"{ns}-low", 100), (f"{ns}-high", 1000)):
        custom.create_cluster_custom_object(KUEUE_GROUP, V, "workloadpriorityclasses",
                                            kueue_object("WorkloadPriorityClass", name, value=value))
    local_queue = create_queue(custom, ns, 16, preemption={"withinClusterQueue": "LowerPriority"})
    fillers = fill(core, ns, dict.fromkeys(free_gpus(core), 3))

    batch.create_namespaced_job(ns, queued(indexed_job("low", local_queue, 4, {DURATION_ANNOTATION: "5s"},
                                                       SCHEDULER_NAME, gpus=4), f"{ns}-low"))
    held = poll(lambda: len(p := pods_of(core, ns, "low")) == 4 and all(map(gated, p)) and p
                and any(e.reason in WAITS - {"WaitingForPods"} for e in said(core, ns, "low")), 120,
                "Job low admitted by Kueue, its 4 pods held at netsched's gate")
    assert held and workload_conditions(custom, ns, "low").get("Admitted") == "True"
    first = {p.metadata.name for p in pods_of(core, ns, "low")}
    waits = len([e for e in said(core, ns, "low") if e.reason in WAITS])

    batch.create_namespaced_job(ns, queued(indexed_job("high", local_queue, 2, {DURATION_ANNOTATION: "1h"},
                                                       SCHEDULER_NAME, gpus=3), f"{ns}-high"))
    poll(lambda: batch.read_namespaced_job("low", ns).spec.suspend and not pods_of(core, ns, "low"), 120,
         "Kueue to suspend Job low and the Job controller to delete its gated pods")
    assert workload_conditions(custom, ns, "low").get("Preempted") == "True"
    poll(lambda: len(p := pods_of(core, ns, "high")) == 2 and all(x.status.phase == "Running" for x in p),
         120, "Job high released by netsched and running")
    # the Event follows the lifted gates once the operator's watch has seen them
    poll(lambda: [e.reason for e in said(core, ns, "high")][-1:] == ["GangReleased"], 60,
         "a GangReleased Event on Job high")
    assert not pods_of(core, ns, "low")  # while high holds the quota, low has no pod, gated or not

    for pod in pods_of(core, ns, "high"):  # high finishes; low gets the quota back
        now = {"metadata": {"annotations": {DURATION_ANNOTATION: "0s"}}}
        core.patch_namespaced_pod(pod.metadata.name, ns, now)
    poll(lambda: job_condition(batch, ns, "high", "Complete"), 120, "Job high to complete")
    again = poll(lambda: len(p := pods_of(core, ns, "low")) == 4 and all(map(gated, p)) and p, 120,
                 "Job low readmitted, its new pods gated")
    assert first.isdisjoint(p.metadata.name for p in again)
    poll(lambda: len([e for e in said(core, ns, "low") if e.reason in WAITS]) > waits, 60,
         "the operator to say anew why the readmitted gang waits (it forgot the preempted one)")

    for name in fillers:  # room for low
        core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
    poll(lambda: job_condition(batch, ns, "low", "Complete"), 180, "Job low to run whole and complete")
    done = pods_of(core, ns, "low")
    assert sorted(p.metadata.annotations["batch.kubernetes.io/job-completion-index"] for p in done
                  if p.status.phase == "Succeeded") == ["0", "1", "2", "3"]
    assert not any(gated(p) for p in done)
    assert [e.reason for e in said(core, ns, "low")].count("GangReleased") == 1


def test_pods_kueue_topology_aware_scheduling_places_are_left_to_kueue(kueue_cluster, gang_namespace):
    """Kueue's TAS (a ResourceFlavor with a topologyName) chooses one rack for the Job: its pods carry
    Kueue's gate and netsched's; the operator lifts its own at once without pinning, warns once that its
    max-peer-distance is ignored, and Kueue's ungater places the pods where Kueue chose."""
    ns, api = gang_namespace, kueue_cluster.api_client()
    batch, core, custom = client.BatchV1Api(api), client.CoreV1Api(api), client.CustomObjectsApi(api)
    custom.create_cluster_custom_object(KUEUE_GROUP, V, "topologies", kueue_object("Topology", ns, {
        "levels": [{"nodeLabel": RACK_LABEL}, {"nodeLabel": "kubernetes.io/hostname"}]}))
    local_queue = create_queue(custom, ns, 32, flavor={"nodeLabels": {"type": "kwok"}, "topologyName": ns})
    racks = {n.metadata.name: n.metadata.labels[RACK_LABEL] for n in core.list_node().items}

    batch.create_namespaced_job(ns, indexed_job("tas", local_queue, 4, {
        "kueue.x-k8s.io/podset-required-topology": RACK_LABEL, MAX_PEER_DISTANCE: "rack",
        DURATION_ANNOTATION: "5s"}, SCHEDULER_NAME, gpus=4))
    poll(lambda: job_condition(batch, ns, "tas", "Complete"), 180,
         "Job tas to be placed by Kueue and complete")
    [assignment] = workload(custom, ns, "tas")["status"]["admission"]["podSetAssignments"]
    assert assignment["topologyAssignment"]  # Kueue chose the domain: TAS was on
    pods = pods_of(core, ns, "tas")
    assert len(pods) == 4 and len({racks[p.spec.node_name] for p in pods}) == 1
    # Kueue's ungater pinned each pod; netsched added nothing to the nodeSelector
    assert all(p.spec.node_selector.get("kubernetes.io/hostname") == p.spec.node_name for p in pods)
    [warning] = said(core, ns, "tas")  # the webhook gated the pods; the operator lifted its gate, once
    assert (warning.type, warning.reason) == ("Warning", "PlacedByKueueTopology")
    assert "Kueue's topology-aware scheduling places its pods" in warning.message
    assert f"{MAX_PEER_DISTANCE}: rack is ignored" in warning.message
