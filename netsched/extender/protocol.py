"""The kube-scheduler extender v1 wire format (k8s.io/kube-scheduler/extender/v1).

Top-level keys are Go field names in PascalCase; the embedded Pod uses normal
Kubernetes camelCase. Parsing never raises anything but `BadRequest`, whose
message names the field and what is wrong, so the server can answer with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from netsched.cluster.topology import GPU_RESOURCE

MAX_SCORE = 10  # MaxExtenderPriority
JOB_LABEL = "netsched.io/job"


class BadRequest(ValueError):
    """The request is not a valid ExtenderArgs; the message says which field and why."""


@dataclass(frozen=True)
class PodRef:
    """What the extender needs of the pod being scheduled."""

    namespace: str
    name: str
    uid: str
    gpus: int
    job: str | None  # value of the netsched.io/job label: pods of one job are placed together
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class ExtenderArgs:
    pod: PodRef
    node_names: list[str]


def parse_args(doc: Any) -> ExtenderArgs:
    """Validate a decoded ExtenderArgs document (filter or prioritize request)."""
    if not isinstance(doc, dict):
        raise BadRequest(f"request body must be a JSON object (ExtenderArgs), got {type(doc).__name__}")
    pod = _parse_pod(doc.get("Pod"))
    return ExtenderArgs(pod, _node_names(doc))


def _parse_pod(pod: Any) -> PodRef:
    if not isinstance(pod, dict):
        raise BadRequest("field Pod is missing or not an object: send the pod being scheduled")
    meta = pod.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        raise BadRequest("field Pod.metadata.name is missing: the pod must have a name")
    labels = _str_map(meta.get("labels"), "Pod.metadata.labels")
    annotations = _str_map(meta.get("annotations"), "Pod.metadata.annotations")
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    return PodRef(
        namespace=str(meta.get("namespace") or "default"),
        name=meta["name"],
        uid=str(meta.get("uid") or ""),
        gpus=_pod_gpus(spec),
        job=labels.get(JOB_LABEL),
        labels=labels,
        annotations=annotations,
    )


def _str_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise BadRequest(f"field {where} must map strings to strings")
    return value


def _pod_gpus(spec: dict) -> int:
    """GPUs the pod requests: the sum over containers (limits when requests omit it)."""
    total = 0
    containers = spec.get("containers")
    for c in containers if isinstance(containers, list) else []:
        resources = c.get("resources") if isinstance(c, dict) else None
        if not isinstance(resources, dict):
            continue
        for kind in ("requests", "limits"):
            amounts = resources.get(kind)
            if isinstance(amounts, dict) and GPU_RESOURCE in amounts:
                try:
                    total += int(str(amounts[GPU_RESOURCE]))
                except ValueError:
                    raise BadRequest(
                        f"Pod container {c.get('name')!r} asks for {GPU_RESOURCE}="
                        f"{amounts[GPU_RESOURCE]!r}: GPUs must be a whole number"
                    ) from None
                break
    return total


def _node_names(doc: dict) -> list[str]:
    """NodeNames (nodeCacheCapable: true) or the names inside Nodes (false)."""
    names = doc.get("NodeNames")
    if names is None:
        nodes = doc.get("Nodes")
        items = nodes.get("items") if isinstance(nodes, dict) else None
        if not isinstance(items, list):
            raise BadRequest("neither NodeNames nor Nodes.items is present: send the candidate nodes")
        names = [(n.get("metadata") or {}).get("name") if isinstance(n, dict) else None for n in items]
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise BadRequest("field NodeNames must be a list of node names (non-empty strings)")
    return names


def filter_result(
    passed: list[str],
    failed: dict[str, str] | None = None,
    unresolvable: dict[str, str] | None = None,
    error: str = "",
) -> dict:
    """ExtenderFilterResult for nodeCacheCapable: NodeNames must never be null unless
    every node was filtered out, and must be a subset of the request's names."""
    return {
        "Nodes": None,
        "NodeNames": passed,
        "FailedNodes": failed or {},
        "FailedAndUnresolvableNodes": unresolvable or {},
        "Error": error,
    }


def host_priority_list(scores: dict[str, int]) -> list[dict]:
    """HostPriorityList. Hosts left out score 0, so zero scores are not sent."""
    return [{"Host": host, "Score": score} for host, score in scores.items() if score > 0]
