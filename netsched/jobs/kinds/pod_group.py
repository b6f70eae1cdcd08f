"""scheduler-plugins PodGroups (scheduling.x-k8s.io/v1alpha1): the pods of a group carry the
PodGroup's name in the label `scheduling.x-k8s.io/pod-group`; the group's size, `spec.minMember`, is on
the PodGroup object only (in the pods' namespace)."""

from collections.abc import Mapping
from typing import Any

from netsched.api.labels import whole_number
from netsched.jobs.kinds.kind import Access, GangKind, SizedBy
from netsched.jobs.workload import pod_gang_fields


def min_member(group: Mapping[str, Any]) -> int | None:
    """spec.minMember, None when unset or not a positive whole number."""
    return whole_number(str((group.get("spec") or {}).get("minMember", ""))) or None


POD_GROUP = GangKind("PodGroup", 20, ("scheduling.x-k8s.io/pod-group",),
                     fields=pod_gang_fields("the PodGroup's spec.minMember (and the pods its workload makes)",
                                            "the PodGroup's spec.minMember", "the pods' spec"),
                     sized_by=SizedBy("scheduling.x-k8s.io", (("PodGroup", "podgroups"),), min_member,
                                      label_version="v1alpha1"),
                     access=(Access("scheduling.x-k8s.io", ("podgroups",), ("get",),
                                    "a PodGroup's minMember sizes its gang"),))
