"""Builders for the pods netsched creates and the facts read back from them."""

from __future__ import annotations

from netsched.api.labels import GPU_RESOURCE, SCHEDULER_NAME
from netsched.jobs.replica_pods import GANG_GATE

# KWOK's pod-complete-after-duration stage (kwok-stages.yaml) finishes a Running
# pod this many seconds after it started; a Go duration such as "30s" or "2m".
DURATION_ANNOTATION = "netsched.io/duration"
FAIL_AFTER_ANNOTATION = "netsched.io/fail-after"  # the same, but the pod fails (exit code 1)
# A pod being deleted lingers this long before KWOK removes it: a slow graceful shutdown.
STOP_AFTER_ANNOTATION = "netsched.io/stop-after"


def gpu_pod(
    name: str,
    gpus: int,
    duration: str | None = None,
    scheduler: str = SCHEDULER_NAME,
    labels: dict[str, str] | None = None,
    owner: dict | None = None,
    annotations: dict[str, str] | None = None,
) -> dict:
    """A pod asking for `gpus` nvidia.com/gpu, scheduled by `scheduler`."""
    metadata: dict = {"name": name, "labels": labels or {}, "annotations": dict(annotations or {})}
    if duration is not None:
        metadata["annotations"][DURATION_ANNOTATION] = duration
    if owner is not None:
        metadata["ownerReferences"] = [owner]
    limits = {GPU_RESOURCE: str(gpus), "cpu": "1", "memory": "1Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "schedulerName": scheduler,
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "netsched/workload:dev",
                            "resources": {"limits": limits, "requests": limits}}],
        },
    }


def indexed_job(name: str, pods: int, gpus: int, duration: str | None = None,
                annotations: dict[str, str] | None = None, gated: bool = False) -> dict:
    """An indexed batch/v1 Job running `pods` pods of `gpus` GPUs at once, scheduled by netsched, as a
    user writes it: its pods get the gang gate from the admission webhook (in an opted-in namespace),
    or from the template when `gated`."""
    pod = gpu_pod("x", gpus, duration=duration, annotations=annotations)
    if gated:
        pod["spec"]["schedulingGates"] = [{"name": GANG_GATE}]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed", "backoffLimit": 0,
                     "template": {"metadata": {"annotations": pod["metadata"]["annotations"]},
                                  "spec": pod["spec"]}}}


def scheduled_condition(pod):
    """The PodScheduled condition of a V1Pod, or None before the scheduler looked at it."""
    for cond in (pod.status and pod.status.conditions) or []:
        if cond.type == "PodScheduled":
            return cond
    return None


def gated_job(name: str, pods: int, gpus: int, duration: str, annotations: dict[str, str] | None = None,
              labels: dict[str, str] | None = None) -> dict:
    """An indexed batch/v1 Job of `pods` pods at once, as a user writes it for netsched: each pod a
    gpu_pod that KWOK finishes after `duration`, gated by its template (as the admission webhook
    gates it in a real install) so that the operator releases the gang whole."""
    pod = gpu_pod("x", gpus, duration=duration, annotations=annotations, labels=labels)
    spec = {**pod["spec"], "schedulingGates": [{"name": GANG_GATE}]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed", "backoffLimit": 0,
                     "template": {"metadata": {k: v for k, v in pod["metadata"].items() if k != "name"},
                                  "spec": spec}}}
