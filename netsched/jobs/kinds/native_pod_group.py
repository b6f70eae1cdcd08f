"""Kubernetes' own PodGroups (scheduling.k8s.io/v1beta1, Beta in 1.37 behind the GenericWorkload gate):
a pod names its group in `spec.schedulingGroup.podGroupName` (no label), and the group's size is the
PodGroup's `spec.schedulingPolicy.gang.minCount`, on the object only (in the pods' namespace). Workload
controllers (Job with WorkloadWithJob, JobSet, LWS, Kueue) make PodGroups from a Workload's
podGroupTemplates; a user can also make one by hand.

A group whose policy is `basic` asks for no all-or-nothing: each pod is a gang of one. A native group
states itself, so it comes before the labels of the controller that made its pods (a Job's, a Kueue
group's). When kube-scheduler's own gang scheduling is on too, netsched still gates and releases the
group whole; kube-scheduler then places the released pods in one cycle, asking netsched's extender for
each (docs/install.md, "Kubernetes versions, native gangs and DRA").
"""

from collections.abc import Mapping
from typing import Any

from netsched.api.labels import whole_number
from netsched.jobs.kinds.kind import Access, GangKind, SizedBy

GROUP = "scheduling.k8s.io"
VERSION = "v1beta1"
POD_FIELD = ("spec", "schedulingGroup", "podGroupName")


def min_count(group: Mapping[str, Any]) -> int | None:
    """spec.schedulingPolicy.gang.minCount; 1 for a `basic` group (no gang); None when neither is set or
    minCount is not a positive whole number."""
    policy = (group.get("spec") or {}).get("schedulingPolicy") or {}
    if "gang" in policy:
        return whole_number(str((policy.get("gang") or {}).get("minCount", ""))) or None
    return 1 if "basic" in policy else None


NATIVE_POD_GROUP = GangKind(
    "NativePodGroup", 5, (), name_field=POD_FIELD,
    sized_by=SizedBy(GROUP, (("PodGroup", "podgroups"),), min_count, label_version=VERSION),
    access=(Access(GROUP, ("podgroups",), ("get",), "a native PodGroup's gang minCount sizes its gang"),))
