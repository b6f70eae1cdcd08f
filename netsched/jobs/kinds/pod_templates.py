"""A workload manifest read as its controller would read it (for `netsched whatif`): the pod it would
make from a template, with the labels it documents, and the fields that must be maps or whole numbers,
refused with the field's path and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from netsched.api.labels import GPU_RESOURCE
from netsched.api.resources import pod_requests


class NotAGang(ValueError):
    """The manifest has no gang netsched could read; the message names the field and the fix."""


@dataclass(frozen=True)
class GangTemplate:
    """`count` identical gangs of `size` members, each member the pod `member` (made from the template at
    `template`, a path in the manifest); netsched.foresight.workload_gangs names them with gang_of."""
    member: dict[str, Any]
    size: int
    count: int
    template: str
    note: str = ""  # what the answer should also say of these gangs


@dataclass(frozen=True)
class Made:
    """An object a workload's controller makes from the template at `at`: `body`, created as `plural` of
    `api_version` (v1 for the core group)."""
    at: str
    api_version: str
    plural: str
    body: dict[str, Any]


def pod_made(at: str, template: Any) -> Made:
    """The pod a controller makes from the pod template at `at`, as the API server is asked about it:
    the template's spec, labels and annotations, named by generateName (only the template is in
    question)."""
    template = as_map(template)
    meta = as_map(template.get("metadata"))
    kept = {k: meta[k] for k in ("labels", "annotations") if k in meta}
    return Made(at, "v1", "pods", {"apiVersion": "v1", "kind": "Pod",
                                   "metadata": {**kept, "generateName": "whatif-"},
                                   "spec": template.get("spec")})


def member(template: dict[str, Any], namespace: str, labels: dict[str, str], owner: tuple[str, str, str],
           annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """The pod its controller would make from `template`."""
    meta = template.get("metadata") or {}
    version, kind, name = owner
    return {"metadata": {"name": f"{name}-0", "namespace": namespace,
                         "labels": {**(meta.get("labels") or {}), **labels},
                         "annotations": {**(meta.get("annotations") or {}), **(annotations or {})},
                         "ownerReferences": [{"apiVersion": version, "kind": kind, "name": name,
                                              "controller": True}]},
            "spec": template.get("spec") or {}}


def shape(template: dict[str, Any]) -> tuple[float, ...]:
    """What one pod of `template` asks for, GPUs first: the larger of two templates is the larger shape."""
    request = pod_requests(template.get("spec") or {})
    return tuple(request.get(k, 0.0) for k in (GPU_RESOURCE, "cpu", "memory"))


def required_map(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise NotAGang(f"{where} is not set (or not a map); write it as the kind's API reference says")
    return value


def whole(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise NotAGang(f"{where}: {value!r} is not a whole number; write e.g. 2")
    return value


def as_map(value: Any) -> dict[str, Any]:
    """`value` if a map, else an empty one (for checks that leave a wrong field to the API server)."""
    return value if isinstance(value, dict) else {}
