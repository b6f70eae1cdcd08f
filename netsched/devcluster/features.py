"""What differs by Kubernetes minor in how the dev-cluster starts its components: feature gates and the
API versions it serves beyond the defaults.

From 1.37 the dev-cluster serves the native gang API (`scheduling.k8s.io/v1beta1` Workload and PodGroup,
and `pod.spec.schedulingGroup`), which is Beta and off by default: the GenericWorkload gate on the API
server and the controller-manager, and the group version in `--runtime-config`. kube-scheduler gets the
gate only when its own gang scheduling is asked for (`kube_gang_scheduling`): with it on, every profile
runs the GangScheduling plugin and schedules a PodGroup's pods in one cycle of their own; off, it
schedules them one by one and netsched's gang gate alone keeps them whole (docs/install.md,
"Kubernetes versions, native gangs and DRA"). On 1.34, whose API has none of this, nothing is added.
"""

from __future__ import annotations

NATIVE_GANGS_SINCE = 37  # the minor whose scheduling.k8s.io/v1beta1 serves Workload and PodGroup
NATIVE_GANG_GATE = "GenericWorkload"
NATIVE_GANG_API = "scheduling.k8s.io/v1beta1"


def native_gangs(minor: str) -> bool:
    """Does this Kubernetes minor ("1.37") serve the native Workload/PodGroup API at Beta?"""
    return int(minor.split(".")[1]) >= NATIVE_GANGS_SINCE


def component_flags(minor: str, kube_gang_scheduling: bool = False) -> dict[str, list[str]]:
    """The flags each control-plane component gets on top of the version-independent ones."""
    if not native_gangs(minor):
        return {}
    gate = f"--feature-gates={NATIVE_GANG_GATE}=true"
    flags = {"kube-apiserver": [gate, f"--runtime-config={NATIVE_GANG_API}=true"],
             "kube-controller-manager": [gate]}
    if kube_gang_scheduling:
        flags["kube-scheduler"] = [gate]
    return flags
