"""Which gang a pod belongs to, read from what its own controller writes on it.

Pods of batch Jobs, JobSets, LeaderWorkerSets, Kubeflow training jobs, scheduler-plugins PodGroups,
Kueue's plain-pod groups and native PodGroups (`pod.spec.schedulingGroup`) are gangs as they are: no
rewriting as a GPUJob. Each kind declares its labels (or pod field) in netsched.jobs.kinds; `gang_of`
tries them in the registry's order, most specific first (netsched.jobs.kinds.kind.GangKind.precedence).
A GPUJob's pods are not pod gangs: the GPUJob controller makes, gates and releases them itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from netsched.api.gpujob import KIND as GPUJOB_KIND
from netsched.api.labels import JOB_LABEL, REPLICA_LABEL, whole_number
from netsched.jobs.kinds.registry import KINDS, kind_named


@dataclass(frozen=True)
class GangRef:
    """A pod gang: its kind (GangKind.kind), where it is and its name; `size` is its members when
    the pods say it, None when only the owning object knows it (a Job's parallelism)."""
    kind: str
    namespace: str
    name: str
    size: int | None


def gang_of(pod: Mapping[str, Any]) -> GangRef | None:
    """The gang `pod` belongs to, None if none (or it is a GPUJob's)."""
    meta = pod.get("metadata") or {}
    labels: Mapping[str, str] = meta.get("labels") or {}
    if _is_gpujob_pod(meta, labels):
        return None
    for kind in KINDS:
        values = ([_field(pod, kind.name_field)] if kind.name_field
                  else [labels.get(label) for label in kind.name_labels])
        if not all(values) or (kind.owner and _owner(pod) != kind.owner):
            continue
        size = None
        if kind.size_annotation:
            size = whole_number((meta.get("annotations") or {}).get(kind.size_annotation)) or None
        return GangRef(kind.kind, meta.get("namespace") or "", "-".join(str(v) for v in values), size)
    return None


@dataclass(frozen=True)
class SizeObject:
    """The API object to read a gang's size from (netsched.jobs.kinds.kind.SizedBy), and how."""
    group: str
    version: str
    kind: str
    plural: str
    namespace: str
    name: str
    size: Callable[[Mapping[str, Any]], int | None]

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name} ({self.plural}.{self.group}/{self.version})"


def size_object(pod: Mapping[str, Any], ref: GangRef) -> SizeObject | None:
    """Where the size of `pod`'s gang `ref` is when the pods leave it unsaid; None when nowhere netsched
    knows (the pod's controller is of no kind its gang kind declares)."""
    gang_kind = kind_named(ref.kind)
    sized = gang_kind.sized_by if gang_kind else None
    if sized is None:
        return None
    if sized.label_version is not None:
        [(kind, plural)] = sized.kinds
        return SizeObject(sized.group, sized.label_version, kind, plural, ref.namespace, ref.name, sized.size)
    owner = controller(pod)
    if owner is None:
        return None
    group, _, version = str(owner.get("apiVersion", "")).rpartition("/")
    resource = dict(sized.kinds).get(owner.get("kind", ""))
    if group != sized.group or resource is None:
        return None
    return SizeObject(group, version, owner["kind"], resource, ref.namespace, owner["name"], sized.size)


def controller(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ownerReference of the pod's controller, if it has one."""
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    return next((ref for ref in refs if ref.get("controller")), None)


def involved(pod: Mapping[str, Any]) -> dict[str, Any]:
    """Where Events about a pod's gang go: the workload that owns the pod, else the pod itself."""
    meta = pod["metadata"]
    owner = controller(pod) or {"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                "uid": meta.get("uid")}
    return {"apiVersion": owner.get("apiVersion"), "kind": owner.get("kind"), "namespace": meta["namespace"],
            "name": owner.get("name"), "uid": owner.get("uid")}


def _field(pod: Mapping[str, Any], path: tuple[str, ...]) -> str | None:
    """The string at `path` in the pod, None when a step is missing."""
    value: Any = pod
    for step in path:
        value = value.get(step) if isinstance(value, Mapping) else None
    return value if isinstance(value, str) else None


def _owner(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    ref = controller(pod)
    return (ref.get("apiVersion", ""), ref.get("kind", "")) if ref else None


def _is_gpujob_pod(meta: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    owned = any(ref.get("kind") == GPUJOB_KIND for ref in meta.get("ownerReferences") or [])
    return owned or (JOB_LABEL in labels and REPLICA_LABEL in labels)
