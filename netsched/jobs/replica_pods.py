"""The pods of a GPUJob: one per replica and attempt, built from the job's template.

Names are deterministic (`<job>-<replica>`, then `<job>-<replica>-a<attempt>` for
replacements), so creating a pod twice is a harmless AlreadyExists and a restarted
operator can never make duplicates.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from netsched.api.labels import (
    ATTEMPT_LABEL,
    COMMUNICATION,
    COMMUNICATION_GB_PER_HOUR,
    DATA_SOURCE,
    EXPECTED_SECONDS,
    INPUT_SIZE_GB,
    JOB_GPUS,
    JOB_LABEL,
    MAX_DATA_DISTANCE,
    MAX_DATA_RTT_MS,
    MAX_PEER_DISTANCE,
    MAX_PEER_RTT_MS,
    MIN_DATA_BANDWIDTH_MBPS,
    MIN_PEER_BANDWIDTH_MBPS,
    PINNED_NODE,
    REPLICA_LABEL,
    REPLICAS,
    SCHEDULER_NAME,
    WORKLOAD_KIND,
)
from netsched.jobs.gpujob import GPUJob, give_gpus
from netsched.jobs.hard_limits import NodeRequirement, with_requirement

GANG_GATE = "netsched.io/gang"
NETWORK_ANNOTATIONS = {  # spec.network field -> the annotation the extender reads
    "maxPeerDistance": MAX_PEER_DISTANCE,
    "maxDataDistance": MAX_DATA_DISTANCE,
    "maxPeerRttMs": MAX_PEER_RTT_MS,
    "minPeerBandwidthMbps": MIN_PEER_BANDWIDTH_MBPS,
    "maxDataRttMs": MAX_DATA_RTT_MS,
    "minDataBandwidthMbps": MIN_DATA_BANDWIDTH_MBPS,
}


def pod_name(job: str, replica: int, attempt: int) -> str:
    return f"{job}-{replica}" if attempt == 0 else f"{job}-{replica}-a{attempt}"


def network_annotations(job: GPUJob) -> dict[str, str]:
    """What the extender needs to place this job's pods (the extender plugins, netsched/extender/plugins/)."""
    out = {JOB_GPUS: str(job.gpus)}
    if job.data_sources:
        first = job.data_sources[0]
        out[DATA_SOURCE] = f"{first.kind}:{first.location}"
    for field_name, annotation in NETWORK_ANNOTATIONS.items():
        if field_name in job.network:
            out[annotation] = str(job.network[field_name])
    return {**out, **workload_annotations(job)}


def workload_annotations(job: GPUJob) -> dict[str, str]:
    """The job's hints for the extender's completion-time model; the input size falls back to the
    first data source's size."""
    hints = {REPLICAS: job.replicas, WORKLOAD_KIND: job.workload.get("kind"),
             INPUT_SIZE_GB: job.workload.get("inputSizeGB"),
             COMMUNICATION: job.workload.get("communicationIntensity"),
             COMMUNICATION_GB_PER_HOUR: job.workload.get("communicationGBPerHour"),
             EXPECTED_SECONDS: job.workload.get("expectedDurationSeconds")}
    if hints[INPUT_SIZE_GB] is None and job.data_sources:
        hints[INPUT_SIZE_GB] = job.data_sources[0].size_gb
    return {k: str(v) for k, v in hints.items() if v is not None}


def pod_annotations(job: GPUJob) -> dict[str, str]:
    """The annotations each of the job's pods carries: the template's and netsched's."""
    meta = job.template.get("metadata") or {}
    return {**(meta.get("annotations") or {}), **network_annotations(job)}


def replica_pod(job: GPUJob, replica: int, attempt: int, gated: bool,
                scheduler: str = SCHEDULER_NAME, near_data: NodeRequirement | None = None,
                pin: tuple[str, str] | None = None) -> dict[str, Any]:
    """`near_data`: the job's data limit as kube-scheduler keeps it (netsched.jobs.hard_limits), put
    in the pod's required node affinity; `pin`: (label, value) put in its nodeSelector, the domain its
    running peers are in, unless the template's selector names that label."""
    template = copy.deepcopy(job.template)
    meta = template.get("metadata") or {}
    spec = template["spec"]
    labels = {**(meta.get("labels") or {}), JOB_LABEL: job.name, REPLICA_LABEL: str(replica),
              ATTEMPT_LABEL: str(attempt)}
    annotations = pod_annotations(job)
    spec.setdefault("schedulerName", scheduler)  # the template may name another scheduler
    spec.setdefault("restartPolicy", "Never")
    if job.priority_class:
        spec["priorityClassName"] = job.priority_class
    if pin is not None:
        spec["nodeSelector"] = {pin[0]: pin[1], **(spec.get("nodeSelector") or {})}
    if near_data is not None:
        spec["affinity"] = with_requirement(spec, near_data) or spec.get("affinity")
    if gated:
        spec["schedulingGates"] = [*(spec.get("schedulingGates") or []), {"name": GANG_GATE}]
    give_gpus(spec["containers"][0], job.gpus_per_replica)
    env = [{"name": "NETSCHED_JOB", "value": job.name},
           {"name": "NETSCHED_REPLICA", "value": str(replica)},
           {"name": "NETSCHED_REPLICAS", "value": str(job.replicas)}]
    for container in spec["containers"]:
        container["env"] = [*(container.get("env") or []), *env]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod_name(job.name, replica, attempt), "namespace": job.namespace,
                     "labels": labels, "annotations": annotations,
                     "ownerReferences": [job.owner_reference()]},
        "spec": spec,
    }


def pin_patch(node_selector: dict[str, str] | None, label: str, value: str) -> list[dict[str, Any]]:
    """JSON patch ops adding label=value to a gated pod's nodeSelector (the API server lets a gated
    pod's scheduling constraints narrow, never widen); none when the selector already holds it."""
    if node_selector is None:
        return [{"op": "add", "path": "/spec/nodeSelector", "value": {label: value}}]
    if label in node_selector:
        return []
    return [{"op": "add", "path": f"/spec/nodeSelector/{_pointer(label)}", "value": value}]


def annotate_patch(annotations: dict[str, str] | None, key: str, value: str,
                   made: bool = False) -> dict[str, Any]:
    """The JSON patch op setting annotation key=value on a pod whose annotations are `annotations`
    (a pod with none has no map to add a key to: the op adds the map, unless an earlier op of the same
    patch `made` it)."""
    if not annotations and not made:
        return {"op": "add", "path": "/metadata/annotations", "value": {key: value}}
    return {"op": "add", "path": f"/metadata/annotations/{_pointer(key)}", "value": value}


def _pointer(key: str) -> str:
    """A map key as one JSON pointer segment (RFC 6901: "~" and "/" escaped)."""
    return key.replace("~", "~0").replace("/", "~1")


def size_patch(annotations: dict[str, str] | None, members: int, gpus_per_member: int
               ) -> list[dict[str, Any]]:
    """JSON patch ops telling the extender the size of a gang a pod belongs to (`netsched.io/job-gpus`),
    for its first pod to go where the whole gang fits and its node to hold room for the rest; none when
    the pod already says it or has no GPUs."""
    said = annotations or {}
    if JOB_GPUS in said or REPLICAS in said or gpus_per_member < 1:
        return []
    return [annotate_patch(annotations, JOB_GPUS, str(members * gpus_per_member))]


def gang_gated(pod: dict[str, Any]) -> bool:
    """Whether netsched's gang gate still holds the pod."""
    return any(g.get("name") == GANG_GATE for g in (pod.get("spec") or {}).get("schedulingGates") or ())


def pinned_note(annotations: dict[str, str] | None, node: str,
                earlier: list[dict[str, Any]]) -> dict[str, Any]:
    """The op noting on a pod the node its gang's placement pinned it to (PINNED_NODE), after the
    `earlier` ops of the same patch (which may have made the annotations map)."""
    made = any(op.get("path") == "/metadata/annotations" for op in earlier)
    return annotate_patch(annotations, PINNED_NODE, node, made)


def ungate_patch(gates: Iterable[str]) -> dict[str, Any]:
    """The JSON patch op that lifts the gang gate of a pod whose scheduling gates are `gates`
    (names), keeping the others: they are someone else's."""
    keep = [{"name": g} for g in gates if g != GANG_GATE]
    return ({"op": "replace", "path": "/spec/schedulingGates", "value": keep} if keep
            else {"op": "remove", "path": "/spec/schedulingGates"})
