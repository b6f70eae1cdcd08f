"""Kueue's plain-pod groups: bare pods that Kueue admits as one workload carry the group's name as a
label and the group's total count as an annotation."""

from netsched.jobs.kinds.kind import GangKind
from netsched.jobs.workload import pod_gang_fields

KUEUE_POD_GROUP = GangKind("KueuePodGroup", 10, ("kueue.x-k8s.io/pod-group-name",),
                           size_annotation="kueue.x-k8s.io/pod-group-total-count",
                           fields=pod_gang_fields("the group's pods (kueue.x-k8s.io/pod-group-total-count)",
                                                  "kueue.x-k8s.io/pod-group-total-count", "the pods' spec"))
