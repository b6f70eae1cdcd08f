"""Kubernetes objects as plain dicts, as the API server hands them out, and the operator's views of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from netsched.api.events import rfc3339
from netsched.api.gpujob import GROUP, VERSION
from netsched.api.labels import GPU_PRODUCT_LABEL, GPU_RESOURCE, JOB_LABEL, SCHEDULER_NAME
from netsched.api.resources import Resources
from netsched.devcluster.pods import DURATION_ANNOTATION
from netsched.devcluster.topology import GPUNode
from netsched.jobs.capacity import Fit
from netsched.jobs.gpujob import GPUJob
from netsched.jobs.kinds.batch_job import BATCH_JOB
from netsched.jobs.replica_pods import GANG_GATE, pod_name
from netsched.jobs.workload import GPUJOB_FIELDS, NetworkNeeds, SizeFields
from netsched.operator.pod_view import PodView

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
H100 = "NVIDIA-H100-80GB-HBM3"

stamp = rfc3339


def ago(seconds: float) -> str:
    return stamp(NOW - timedelta(seconds=seconds))


def make_gpujob(name: str = "train", replicas: int = 2, gpus: int = 4, *, manifest: bool = False,
                namespace: str = "ml", uid: str = "uid-1", generation: int = 3, created: str | None = None,
                template: dict | None = None, duration: str | None = None, annotations: dict | None = None,
                **spec) -> dict:
    """A GPUJob as the API server hands it to the operator (in `namespace`, with `uid`,
    `generation` and `creationTimestamp`, by default 30 s before NOW), or with `manifest=True`
    the body a user creates: none of those, the create call's URL names the namespace.

    `spec` takes the CRD's own field names (gang, dataSources, network, workload,
    maxRuntimeSeconds, backoffLimit, priorityClassName); `duration` and `annotations` go on the
    default template's pod annotations (the dev cluster finishes a pod after its duration)."""
    pod_annotations = ({DURATION_ANNOTATION: duration} if duration else {}) | (annotations or {})
    if template is None:
        template = {"spec": {"containers": [{"name": "main", "image": "trainer:1"}]}}
        if pod_annotations:
            template["metadata"] = {"annotations": pod_annotations}
    elif pod_annotations:
        raise ValueError("pass duration and annotations in the template you give")
    metadata = {"name": name} if manifest else {
        "name": name, "namespace": namespace, "uid": uid, "generation": generation,
        "creationTimestamp": created or ago(30)}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "GPUJob", "metadata": metadata,
            "spec": {"replicas": replicas, "gpusPerReplica": gpus, "template": template,
                     **{k: v for k, v in spec.items() if v is not None}}}


def job(**kwargs) -> GPUJob:
    """The operator's parsed view of `make_gpujob(**kwargs)`."""
    return GPUJob.of(make_gpujob(**kwargs))


def make_node(name: str, zone: str = "zone-a", rack: str = "rack-a1", gpus: int = 8, *, cpu: str = "96",
              memory: str = "1024Gi", gpu_model: str = H100, ready: bool = True, unschedulable: bool = False,
              taints: list | None = None, labels: dict | None = None) -> dict:
    """A GPU Node as the dev cluster registers it (zone, rack and GPU labels), Ready by default."""
    manifest = GPUNode(name, zone, rack, gpu_model, gpus, cpu, memory).manifest()
    manifest["metadata"]["labels"].update(labels or {})
    manifest["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    manifest["spec"] = {"unschedulable": unschedulable, "taints": taints or []}
    return manifest


def make_dra_node(name: str, zone: str = "zone-a", rack: str = "rack-a1", **kwargs: Any) -> dict:
    """make_node of a node whose GPUs a DRA driver publishes: no allocatable nvidia.com/gpu, no GPU
    feature-discovery labels (its GPUs come from `make_resource_slice`)."""
    manifest = make_node(name, zone, rack, **kwargs)
    for label in (GPU_PRODUCT_LABEL, "nvidia.com/gpu.count"):
        manifest["metadata"]["labels"].pop(label, None)
    manifest["status"] = {**manifest["status"], **{
        key: {r: v for r, v in manifest["status"][key].items() if r != GPU_RESOURCE}
        for key in ("capacity", "allocatable")}}
    return manifest


def make_resource_slice(node: str = "n1", gpus: int = 8, driver: str = "gpu.example.com", *,
                        generation: int = 0, uid: str = "",
                        product: tuple[str, str] | None = ("model", "LATEST-GPU-MODEL"),
                        kind: str | None = None, pool: str | None = None) -> dict:
    """A ResourceSlice as dra-example-driver publishes it for a node (its README: devices gpu-0.., a model
    attribute); NVIDIA's driver: product=("productName", ...) and kind="gpu" (its `type` attribute)."""
    def attributes(i: int) -> dict:
        out: dict = {"index": {"int": i}, "uuid": {"string": f"gpu-{node}-{i}"}}
        if product:
            out[product[0]] = {"string": product[1]}
        if kind:
            out["type"] = {"string": kind}
        return out
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": uid or f"{node}-{driver}", "uid": uid or f"{node}-{driver}-{generation}"},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": pool or node, "generation": generation, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}", "attributes": attributes(i),
                                  "capacity": {"memory": {"value": "80Gi"}}} for i in range(gpus)]}}


def make_resource_claim(name: str, node: str = "n1", devices: range = range(1),
                        driver: str = "gpu.example.com", *, extended: bool = False) -> dict:
    """An allocated ResourceClaim holding devices gpu-<i> of the node's pool; `extended`: the one
    kube-scheduler makes for a pod asking an extended resource a DeviceClass maps (KEP-5004)."""
    annotations = {"resource.kubernetes.io/extended-resource-claim": "true"} if extended else {}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "ml", "uid": name, "annotations": annotations},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": driver, "pool": node, "device": f"gpu-{i}"} for i in devices]}}}}


def make_pod(name: str = "p", node: str | None = None, *, namespace: str = "ml", gpus: int = 2,
             requests: dict | None = None, job: str | None = None, labels: dict | None = None,
             annotations: dict | None = None, phase: str | None = None, owner: str | None = None,
             priority: int | None = None, scheduler: str = SCHEDULER_NAME, uid: str | None = None,
             unschedulable: bool = False, **spec) -> dict:
    """A Pod of one container asking for `gpus` GPUs (a limit; `requests` adds requests), bound to
    `node` if given, Running there or Pending without it unless `phase` says otherwise;
    `unschedulable` adds the condition kube-scheduler sets when no node fits. `owner` names a
    controller kind; `job` sets the netsched job label; `spec` adds spec fields."""
    resources: dict = {"limits": {GPU_RESOURCE: str(gpus)}} if gpus else {}
    if requests:
        resources["requests"] = requests
    body: dict = {"schedulerName": scheduler, "containers": [{"name": "c", "resources": resources}]}
    if node:
        body["nodeName"] = node
    if priority is not None:
        body["priority"] = priority
    meta: dict = {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}",
                  "labels": ({JOB_LABEL: job} if job else {}) | (labels or {}),
                  "annotations": annotations or {}}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": f"{name}-owner",
                                    "uid": f"uid-{name}-owner", "controller": True}]
    status: dict = {"phase": phase or ("Running" if node else "Pending")}
    if unschedulable:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body | spec, "status": status}


def make_batch_job(name: str, parallelism: int, *, namespace: str = "ml", annotations: dict | None = None
                   ) -> dict:
    """A batch/v1 Job of `parallelism` pods at once (and as many completions)."""
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                         "annotations": annotations or {}},
            "spec": {"parallelism": parallelism, "completions": parallelism, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}


def make_job_pod(job: str, index: int, node: str | None = None, *, gated: bool = False,
                 started: str | None = None, created: str | None = None, **kwargs) -> dict:
    """Pod `index` of batch Job `job`, as the Job controller makes it: labelled with the Job's name and
    owned by it; `gated` keeps netsched's gang gate on it; `make_pod`'s arguments otherwise."""
    pod = make_pod(f"{job}-{index}", node, labels={BATCH_JOB.name_labels[0]: job}, **kwargs)
    if gated:
        pod["spec"]["schedulingGates"] = [{"name": GANG_GATE}]
    meta = pod["metadata"]
    meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": f"uid-{job}",
                                "controller": True}]
    meta["creationTimestamp"] = created or ago(60)
    if started:
        pod["status"]["startTime"] = started
    return pod


def pod_view(replica: int, attempt: int = 0, phase: str = "Pending", node: str | None = None,
             gated: bool = False, deleting: bool = False, message: str = "", job: str = "train") -> PodView:
    """The operator's view of one replica's pod."""
    return PodView(pod_name(job, replica, attempt), replica, attempt, phase, node, gated, deleting, message)


class FitStub:
    """The `fit` callback: a fixed answer, and how often it was asked."""

    def __init__(self, placeable: int = 2, needed: int = 2, message: str = "2 of 2 fit", why: str = "Fits"):
        self.result = Fit(placeable, needed, message, why=why)
        self.calls = 0

    def __call__(self) -> Fit:
        self.calls += 1
        return self.result


# rack-a1 (a1-0, a1-1) and rack-a2 (a2-0) in zone-a; rack-b1 (b1-0) in zone-b
CLUSTER = [make_node("a1-0"), make_node("a1-1"), make_node("a2-0", rack="rack-a2"),
           make_node("b1-0", "zone-b", "rack-b1")]
LABELS = {n["metadata"]["name"]: n["metadata"]["labels"] for n in CLUSTER}


class Clock:
    """A clock a test moves by hand: `clock.now += 31`."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass(frozen=True)
class Gang:
    """A workload of no particular kind, for the capacity rules: they read only the seam
    (netsched.jobs.workload)."""
    member_request: Resources
    min_available: int
    member_spec: dict = field(default_factory=dict)
    needs: NetworkNeeds = NetworkNeeds()
    size: int = 0
    gpus_per_member: int = 0
    priority_class_name: str | None = None
    workload_kind: str = "training"
    expected_seconds: float | None = None
    fields: SizeFields = GPUJOB_FIELDS
