"""The kinds `why KIND/NAME` reads besides those `whatif` reads manifests of (netsched.foresight
.workload_gangs.WORKLOADS): each Kubeflow training job kind (PyTorchJob, TFJob, ...) and
scheduler-plugins PodGroups, whose pods netsched gangs too. Their pods are found by the label their
controller (or the PodGroup's user) puts on them, their gang's size is read from the object (a job's
replicas, a PodGroup's minMember), and their predicted times from the first pod of the gang, where the
forecast writes them (netsched.jobs.live_gangs): netsched may not annotate those objects.
"""

from __future__ import annotations

from typing import Any

from netsched.foresight.workload_gangs import WORKLOADS
from netsched.jobs.kinds.kind import Answered
from netsched.jobs.kinds.kubeflow import JOB_KINDS, KUBEFLOW
from netsched.jobs.kinds.pod_group import POD_GROUP
from netsched.jobs.kinds.pod_templates import GangTemplate, NotAGang


def _no_manifest(spec: dict[str, Any], name: str, namespace: str) -> list[GangTemplate]:
    raise NotAGang("whatif does not read this kind's manifests; `why KIND/NAME` reads its live pods")


WHY_ONLY: dict[str, Answered] = {
    **{kind: Answered("kubeflow.org", "v1", plural, _no_manifest, pod_label=KUBEFLOW.name_labels[0])
       for kind, plural in JOB_KINDS},
    POD_GROUP.kind: Answered("scheduling.x-k8s.io", "v1alpha1", "podgroups", _no_manifest,
                             pod_label=POD_GROUP.name_labels[0]),
}
# every kind `why` reads: whatif's as whatif reads them, then those only why reads
WHY_KINDS: dict[str, Answered] = {**WHY_ONLY, **WORKLOADS}
