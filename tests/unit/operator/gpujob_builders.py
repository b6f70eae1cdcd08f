"""Plain GPUJob and Node dicts, as the API server hands them to the operator, and pod views."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from netsched.api.events import rfc3339
from netsched.api.gpujob import JobSpec, job_spec
from netsched.devcluster.topology import GPUNode
from netsched.operator.capacity import Fit
from netsched.operator.reconcile import PodView
from netsched.operator.replica_pods import pod_name

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


stamp = rfc3339


def ago(seconds: float) -> str:
    return stamp(NOW - timedelta(seconds=seconds))


def make_gpujob(name: str = "train", replicas: int = 2, gpus: int = 4, *, ns: str = "ml", uid: str = "uid-1",
                gang: dict | None = None, data: list[dict] | None = None, network: dict | None = None,
                workload: dict | None = None, max_runtime: int | None = None, backoff: int | None = None,
                created: str | None = None, template: dict | None = None,
                priority: str | None = None) -> dict:
    spec: dict = {"replicas": replicas, "gpusPerReplica": gpus,
                  "template": template or {"spec": {"containers": [{"name": "main", "image": "trainer:1"}]}}}
    optional = {"gang": gang, "dataSources": data, "network": network, "workload": workload,
                "maxRuntimeSeconds": max_runtime, "backoffLimit": backoff, "priorityClassName": priority}
    spec.update({k: v for k, v in optional.items() if v is not None})
    return {"apiVersion": "netsched.io/v1alpha1", "kind": "GPUJob",
            "metadata": {"name": name, "namespace": ns, "uid": uid, "generation": 3,
                         "creationTimestamp": created or ago(30)},
            "spec": spec}


def job(**kwargs) -> JobSpec:
    return job_spec(make_gpujob(**kwargs))


def pod(replica: int, attempt: int = 0, phase: str = "Pending", node: str | None = None, gated: bool = False,
        deleting: bool = False, message: str = "", job: str = "train") -> PodView:
    return PodView(pod_name(job, replica, attempt), replica, attempt, phase, node, gated, deleting, message)


class FitStub:
    """The `fit` callback: a fixed answer, and how often it was asked."""

    def __init__(self, placeable: int = 2, needed: int = 2, message: str = "2 of 2 fit"):
        self.result = Fit(placeable, needed, message)
        self.calls = 0

    def __call__(self) -> Fit:
        self.calls += 1
        return self.result


def node(name: str, zone: str = "zone-a", rack: str = "rack-a1", gpus: int = 8, *, cpu: str = "96",
         memory: str = "1024Gi", ready: bool = True, unschedulable: bool = False, taints: list | None = None,
         labels: dict | None = None) -> dict:
    manifest = GPUNode(name, zone, rack, "NVIDIA-H100-80GB-HBM3", gpus, cpu, memory).manifest()
    manifest["metadata"]["labels"].update(labels or {})
    manifest["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    manifest["spec"] = {"unschedulable": unschedulable, "taints": taints or []}
    return manifest


# rack-a1 (a1-0, a1-1) and rack-a2 (a2-0) in zone-a; rack-b1 (b1-0) in zone-b
CLUSTER = [node("a1-0"), node("a1-1"), node("a2-0", rack="rack-a2"), node("b1-0", "zone-b", "rack-b1")]
LABELS = {n["metadata"]["name"]: n["metadata"]["labels"] for n in CLUSTER}
