"""The workload kinds whose pods netsched gangs as they are, each declared in one file by the labels
its documented controller puts on the pods it makes (netsched.jobs.pod_gangs reads them in
`KINDS` order: the first kind whose labels a pod carries names its gang).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GangLabels:
    """How a kind's pods say which gang they are in."""
    kind: str  # the gang's kind as netsched names it (GangRef.kind)
    name_labels: tuple[str, ...]  # every one present: their values, joined by "-", name the gang
    size_annotation: str | None = None  # the gang's size, when the controller writes it on each pod
    owner: tuple[str, str] | None = None  # (apiVersion, kind) the pod's controller must also be
