"""The demo's batch/v1 Jobs, run as they are (no GPUJob): an indexed Job whose pods netsched's admission
webhook gates in the opted-in demo namespace and the operator releases as one gang in one rack, and,
when the dev-cluster runs Kueue, the same kind of Job queued in a LocalQueue: Kueue admits it by GPU
quota (who runs), then netsched gangs and places it (where)."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from netsched.api import conditions as c
from netsched.api.labels import GPU_RESOURCE, MAX_PEER_DISTANCE, RACK_LABEL, ZONE_LABEL
from netsched.devcluster.kueue import KUEUE_GROUP, QUEUE_LABEL
from netsched.devcluster.pods import indexed_job

RACK = {MAX_PEER_DISTANCE: "rack"}
PLAIN = indexed_job("job-train", 4, 2, "6s", RACK)  # as a team already writes it, with a rack limit
QUEUED = indexed_job("job-queued", 2, 4, "6s", RACK)
QUEUED["metadata"]["labels"] = {QUEUE_LABEL: "gpus"}
KUEUE_VERSION = "v1beta2"
QUEUE_GPUS = "16"  # the ClusterQueue's GPU quota


def name(job: dict[str, Any]) -> str:
    return str(job["metadata"]["name"])


def make_queue(api: client.ApiClient, namespace: str) -> None:
    """A ResourceFlavor and ClusterQueue of QUEUE_GPUS GPUs (kept from an earlier demo if there), and
    the LocalQueue `gpus` in `namespace` that QUEUED names."""
    custom = client.CustomObjectsApi(api)
    flavor = namespace
    quota = [{"name": "cpu", "nominalQuota": "32"}, {"name": "memory", "nominalQuota": "64Gi"},
             {"name": GPU_RESOURCE, "nominalQuota": QUEUE_GPUS}]
    for plural, body in (
            ("resourceflavors", {"kind": "ResourceFlavor", "metadata": {"name": flavor}}),
            ("clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": namespace}, "spec": {
                "namespaceSelector": {}, "resourceGroups": [{
                    "coveredResources": ["cpu", "memory", GPU_RESOURCE],
                    "flavors": [{"name": flavor, "resources": quota}]}]}})):
        try:
            custom.create_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, plural,
                                                {"apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}", **body})
        except client.ApiException as exc:
            if exc.status != 409:
                raise
    custom.create_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION, namespace, "localqueues", {
        "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}", "kind": "LocalQueue", "metadata": {"name": "gpus"},
        "spec": {"clusterQueue": namespace}})


def gang_events(core: client.CoreV1Api, namespace: str, job: str) -> list[client.CoreV1Event]:
    """What the operator said of the Job's gang (GangReleased, or why it waits)."""
    on_job = f"involvedObject.name={job},involvedObject.kind=Job"
    return [e for e in core.list_namespaced_event(namespace, field_selector=on_job).items
            if e.source and e.source.component == "netsched-operator"]


def _pods(core: client.CoreV1Api, namespace: str, job: str) -> list[client.V1Pod]:
    return core.list_namespaced_pod(namespace, label_selector=f"batch.kubernetes.io/job-name={job}").items


def placed_or_said(core: client.CoreV1Api, namespace: str, job: dict[str, Any]) -> bool:
    """All the Job's pods are bound, or the operator said why its gang waits."""
    pods = _pods(core, namespace, name(job))
    placed = len(pods) == job["spec"]["parallelism"] and all(p.spec.node_name for p in pods)
    return placed or any(e.reason != c.GANG_RELEASED for e in gang_events(core, namespace, name(job)))


def ended(batch: client.BatchV1Api, namespace: str, job: dict[str, Any]) -> str | None:
    """Complete or Failed once the Job is."""
    status = batch.read_namespaced_job(name(job), namespace).status
    return next((cond.type for cond in status.conditions or ()
                 if cond.type in ("Complete", "Failed") and cond.status == "True"), None)


def kueue_admission(api: client.ApiClient, namespace: str, job: str) -> str:
    """Kueue's word on the Job: its Workload's Admitted condition."""
    for workload in client.CustomObjectsApi(api).list_namespaced_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads")["items"]:
        owners = workload["metadata"].get("ownerReferences", [])
        if any(o["kind"] == "Job" and o["name"] == job for o in owners):
            admitted = c.find((workload.get("status") or {}).get("conditions") or [], "Admitted") or {}
            return (f"Kueue Workload {workload['metadata']['name']}: Admitted={admitted.get('status', '-')} "
                    f"({admitted.get('reason', '-')}: {admitted.get('message', '-')})")
    return "Kueue made no Workload for it yet"


def print_job(core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str, job: dict[str, Any],
              how: str) -> None:
    """A Job beside the GPUJobs: its pods' placement and what the operator said of its gang."""
    status = batch.read_namespaced_job(name(job), namespace).status
    nodes = {n.metadata.name: n.metadata.labels or {} for n in core.list_node().items}
    pods = _pods(core, namespace, name(job))
    bound = [nodes.get(p.spec.node_name, {}) for p in pods if p.spec.node_name]
    where = (f"{len(bound)} pods on {len({p.spec.node_name for p in pods if p.spec.node_name})} node(s), "
             f"rack(s) {', '.join(sorted({n.get(RACK_LABEL, '?') for n in bound}))} in "
             f"{', '.join(sorted({n.get(ZONE_LABEL, '?') for n in bound}))}") if bound else "-"
    gated = sum(1 for p in pods if p.spec.scheduling_gates)
    state = ended(batch, namespace, job) or ("Running" if bound else "Pending")
    print(f"\nbatch Job {name(job)} ({how}; indexed, {job['spec']['parallelism']} pods, {MAX_PEER_DISTANCE}: "
          "rack; a gang by netsched, no GPUJob):")
    print(f"  {'job':<10} {'status':<10} {'done':>5} {'gated':>5}  placement")
    print(f"  {name(job):<10} {state:<10} {status.succeeded or 0:>5} {gated:>5}  {where}")
    for e in sorted(gang_events(core, namespace, name(job)), key=lambda e: e.metadata.creation_timestamp):
        print(f"  {e.reason}: {e.message}")
