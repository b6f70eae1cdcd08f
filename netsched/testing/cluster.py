"""Real clusters for tests: a dev-cluster that is up for a test session or module, a namespace
of one's own on it, made ready, then deleted with its pods; PriorityClasses and PackingPlans that
outlive a namespace, cleaned up; a batch Job's pods watched for all-or-nothing; the operator's
metrics as it serves them."""

from __future__ import annotations

import json
import os
import signal
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from kubernetes import client

from netsched.api import plans
from netsched.api.labels import GPU_RESOURCE
from netsched.devcluster.devcluster import DevCluster
from netsched.devcluster.processes import pid_alive
from netsched.devcluster.wait import poll
from netsched.jobs.kinds.batch_job import BATCH_JOB
from netsched.jobs.replica_pods import GANG_GATE
from netsched.testing.chart import metric_sum

LOW, HIGH = 100, 100000  # the values of the `priority_classes` "low" and "high"
JOB_NAME = BATCH_JOB.name_labels[0]  # the label the Job controller puts on its pods


@contextmanager
def running(cluster: DevCluster) -> Iterator[DevCluster]:
    """The cluster up while inside; afterwards down, with no process of it left."""
    cluster.up()
    try:
        yield cluster
    finally:
        cluster.down(quiet=True)
    assert not cluster.running_components(), "dev-cluster processes survived `down`"


@contextmanager
def scratch_namespace(core: client.CoreV1Api, prefix: str = "t") -> Iterator[str]:
    """A fresh namespace, usable once its default ServiceAccount exists (pods are refused before);
    afterwards deleted, and waited for until its pods are gone, so their GPUs are free for the next."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    poll(lambda: core.read_namespaced_service_account("default", name), 60,
         f"the default ServiceAccount in {name}")
    try:
        yield name
    finally:
        core.delete_namespace(name)
        poll(lambda: not core.list_namespaced_pod(name).items, 120, f"the pods of {name} to go")


def free_gpus(core: client.CoreV1Api) -> dict[str, int]:
    """GPU node -> GPUs no live pod holds (their limits), as kube-scheduler counts them; nodes
    without GPUs (a real node running the chart's pods) are left out."""
    free = {n.metadata.name: int(n.status.allocatable[GPU_RESOURCE]) for n in core.list_node().items
            if GPU_RESOURCE in (n.status.allocatable or {})}
    for p in core.list_pod_for_all_namespaces().items:
        if p.spec.node_name in free and p.status.phase not in ("Succeeded", "Failed"):
            free[p.spec.node_name] -= sum(int((c.resources.limits or {}).get(GPU_RESOURCE, 0))
                                          for c in p.spec.containers)
    return free


def operator_metric(cluster: DevCluster, name: str, **labels: str) -> float:
    """The sum of the operator's samples `name` whose labels include `labels`, read from its /metrics."""
    port = json.loads((cluster.directory / "state.json").read_text())["ports"]["operator-metrics"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return metric_sum(resp.read().decode(), name, **labels)


def kill(cluster: DevCluster, component: str) -> None:
    """SIGKILL one of the cluster's components (no chance to clean up), and wait until it is gone."""
    pid = cluster.status()["components"][component]["pid"]
    os.kill(pid, signal.SIGKILL)
    poll(lambda: not pid_alive(pid), 30, f"{component} to die")


@contextmanager
def priority_classes(api: client.ApiClient) -> Iterator[dict[str, str]]:
    """A "low" (LOW) and a "high" (HIGH) PriorityClass of names of their own: level -> name."""
    sched = client.SchedulingV1Api(api)
    suffix = uuid.uuid4().hex[:6]
    names = {"low": f"test-low-{suffix}", "high": f"test-high-{suffix}"}
    for level, value in (("low", LOW), ("high", HIGH)):
        sched.create_priority_class({"metadata": {"name": names[level]}, "value": value})
    try:
        yield names
    finally:
        for name in names.values():
            sched.delete_priority_class(name)


def packing_plans(custom: client.CustomObjectsApi) -> list[dict]:
    return custom.list_cluster_custom_object(plans.GROUP, plans.VERSION, plans.PLURAL)["items"]


@contextmanager
def plans_deleted(custom: client.CustomObjectsApi) -> Iterator[client.CustomObjectsApi]:
    """Deletes every PackingPlan afterwards: they are cluster-scoped, a namespace's deletion keeps them."""
    try:
        yield custom
    finally:
        for plan in packing_plans(custom):
            name = plan["metadata"]["name"]
            custom.delete_cluster_custom_object(plans.GROUP, plans.VERSION, plans.PLURAL, name)
        poll(lambda: not packing_plans(custom), 30, "the test's PackingPlans to go")


def pods_of(core: client.CoreV1Api, namespace: str, job_name: str) -> list[client.V1Pod]:
    """The pods of batch Job `job_name`."""
    return core.list_namespaced_pod(namespace, label_selector=f"{JOB_NAME}={job_name}").items


def gated(pod: client.V1Pod) -> bool:
    return any(g.name == GANG_GATE for g in pod.spec.scheduling_gates or ())


def pinned_to(pod: client.V1Pod) -> list[str]:
    """The nodes a pod's required node affinity names by metadata.name, over all its terms: the node a
    gang's placement pinned it to as its gate lifted (netsched.jobs.hard_limits.pinned_to)."""
    affinity = pod.spec.affinity and pod.spec.affinity.node_affinity
    required = affinity and affinity.required_during_scheduling_ignored_during_execution
    return [v for t in (required.node_selector_terms if required else ()) for f in t.match_fields or ()
            if f.key == "metadata.name" for v in f.values]


def watch_all_or_nothing(core: client.CoreV1Api, namespace: str, job_name: str, pods: int,
                         timeout: float = 120) -> dict[str, str]:
    """Polls until all `pods` of Job `job_name` are bound, checking at every look that the gang is never
    half released; returns pod -> node."""
    def look() -> dict[str, str]:
        seen = pods_of(core, namespace, job_name)
        live = [p for p in seen if p.status.phase not in ("Succeeded", "Failed")]
        assert len({gated(p) for p in live}) <= 1, [(p.metadata.name, gated(p)) for p in live]
        if len(seen) == pods and all(p.spec.node_name for p in seen):
            return {p.metadata.name: p.spec.node_name for p in seen}
        return {}
    return poll(look, timeout, f"the {pods} pods of Job {job_name} to be bound")
