"""The workload kinds whose pods netsched gangs as they are, each declared in one file by the labels
its documented controller puts on the pods it makes (netsched.jobs.pod_gangs reads them in
`KINDS` order: the first kind whose labels a pod carries names its gang).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SizedBy:
    """The API object that knows a gang's size when its pods do not say it: the pod's controller when
    it is of one of `kinds` in `group`, or, with `label_version`, the object of the one kind named by
    the gang's label (a PodGroup is not the pods' owner)."""
    group: str
    kinds: tuple[tuple[str, str], ...]  # (kind, resource) pairs, e.g. ("Job", "jobs")
    size: Callable[[Mapping[str, Any]], int | None]  # the size, read from the object
    label_version: str | None = None


@dataclass(frozen=True)
class GangLabels:
    """How a kind's pods say which gang they are in."""
    kind: str  # the gang's kind as netsched names it (GangRef.kind)
    name_labels: tuple[str, ...]  # every one present: their values, joined by "-", name the gang
    size_annotation: str | None = None  # the gang's size, when the controller writes it on each pod
    owner: tuple[str, str] | None = None  # (apiVersion, kind) the pod's controller must also be
    sized_by: SizedBy | None = None  # where the size is when the pods leave it unsaid
