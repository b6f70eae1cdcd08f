"""What a pod-gang kind declares in its own file of netsched.jobs.kinds: the labels its documented
controller puts on the pods it makes, where the gang's size is, the RBAC the operator needs for it and,
when `netsched whatif` and `why` answer for it, what they need of it. netsched.jobs.kinds.registry
collects every declaration; nothing else names the kinds one by one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from netsched.jobs.kinds.pod_templates import GangTemplate, Made
from netsched.jobs.workload import SizeFields, pod_gang_fields


@dataclass(frozen=True)
class SizedBy:
    """The API object that knows a gang's size when its pods do not say it: the pod's controller when
    it is of one of `kinds` in `group`, or, with `label_version`, the object of the one kind named by
    the gang's label or pod field (a PodGroup is not the pods' owner)."""
    group: str
    kinds: tuple[tuple[str, str], ...]  # (kind, resource) pairs, e.g. ("Job", "jobs")
    size: Callable[[Mapping[str, Any]], int | None]  # the size, read from the object
    label_version: str | None = None


@dataclass(frozen=True)
class Access:
    """A rule of the operator's ClusterRole that the kind needs, and why (its comment in the chart)."""
    group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    why: str

    def rule(self) -> dict[str, list[str]]:
        """As a ClusterRole's rule."""
        return {"apiGroups": [self.group], "resources": list(self.resources), "verbs": list(self.verbs)}


@dataclass(frozen=True)
class Answered:
    """What `netsched whatif` and `why KIND/NAME` need of a kind (netsched.foresight reads it through the
    registry, so this layer never imports foresight)."""
    group: str  # where the API serves the kind: group, version and resource
    version: str
    plural: str
    # the gangs of a manifest, from its spec, name and namespace: NotAGang when it has none
    gangs: Callable[[dict[str, Any], str, str], list[GangTemplate]]
    # the label the kind's pods carry its name in; None: its pods are found by their controller (`owner`)
    pod_label: str | None = None
    short_names: tuple[str, ...] = ()  # what `why` takes besides kubectl's singular and plural, e.g. "lws"
    # what its controller makes of a manifest, checked by the API server when it does not serve the kind's
    # CRD; None: a built-in kind, always served
    made: Callable[[dict[str, Any]], list[Made]] | None = None
    # the manifest as the kind's controller defaults it before acting on it (its mutating webhook or its
    # defaulting functions), applied before the API server's dry run; None: nothing to default
    defaults: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # a gang kind that several API kinds make (Kubeflow's training jobs): each as (kind, resource, gangs),
    # answered for as a kind of its own; empty: the gang kind is the API kind
    api_kinds: tuple[tuple[str, str, Callable[[dict[str, Any], str, str], list[GangTemplate]]], ...] = ()

    def names(self, kind: str) -> tuple[str, ...]:
        """Every name `why` takes for the kind before the slash, as kubectl spells kinds (lower case): its
        short names, singular and plural, each also with the API group; the first is the one suggested."""
        singular = kind.lower()
        return (*self.short_names, singular, self.plural, f"{singular}.{self.group}",
                f"{self.plural}.{self.group}")


@dataclass(frozen=True)
class GangKind:
    """A kind of pod gang: how its pods say which gang they are in, and what the rest of netsched needs
    of it."""
    kind: str  # the gang's kind as netsched names it (GangRef.kind)
    # gang_of tries kinds lowest first, and the first whose labels a pod carries names its gang: a group
    # that states itself (10s: Kueue's, a PodGroup) wins over the controller that made the pods (30s to
    # 50s: Kueue labels an LWS group's pods, a Kubeflow job with gang scheduling labels its PodGroup), and
    # the batch Job comes last (90: a JobSet's or Kubeflow's pods are a batch Job's pods too)
    precedence: int
    name_labels: tuple[str, ...]  # every one present: their values, joined by "-", name the gang
    # or a field of the pod names it (a native PodGroup: ("spec", "schedulingGroup", "podGroupName")); a
    # kind declares labels or a field, not both
    name_field: tuple[str, ...] = ()
    size_annotation: str | None = None  # the gang's size, when the controller writes it on each pod
    owner: tuple[str, str] | None = None  # (apiVersion, kind) the pod's controller must also be
    sized_by: SizedBy | None = None  # where the size is when the pods leave it unsaid
    access: tuple[Access, ...] = ()  # the operator's RBAC for it (reading `sized_by`, ...)
    answered: Answered | None = None  # None: whatif and why do not answer for it
    # what a message asks the user to change, in the kind's own field names
    fields: SizeFields = pod_gang_fields("the number of pods in the gang", "the number of pods in the gang",
                                         "the pods' spec")
