"""Pods that Kueue's topology-aware scheduling (TAS) places itself: netsched steps aside for them.

Kueue TAS chooses a topology domain for every pod of a workload at admission, from its own count of
free capacity, and lifts its own scheduling gate pod by pod, adding the domain's node labels to each
pod's nodeSelector. A second placer on the same pods would pin the gang to another rack or zone, and a
pod whose nodeSelector names two racks fits no node. So a pod Kueue places is not ganged or pinned by
netsched: the gang controller lifts netsched's gate at once and says so on the workload.

Names as in Kueue v0.17.0 (apis/kueue/v1beta2/topology_types.go). Kueue puts the gate on the pod
template of a Job it admits with a topology assignment (pkg/podset), with the `unconstrained`
annotation when the user asked for no level (TAS by the ResourceFlavor's topologyName alone).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
TOPOLOGY_ANNOTATIONS = (  # on the pod template: the podset asks Kueue TAS for a placement
    "kueue.x-k8s.io/podset-required-topology",
    "kueue.x-k8s.io/podset-preferred-topology",
    "kueue.x-k8s.io/podset-unconstrained-topology",
    "kueue.x-k8s.io/podset-slice-required-topology",
)


def placed_by_kueue(pod: Mapping[str, Any]) -> str | None:
    """What shows that Kueue's topology-aware scheduling places `pod`: the annotation asking for it,
    with its value, else Kueue's gate; None if nothing does. The annotation first: it stays on the pod
    while Kueue lifts its gate, so what is said of a workload does not change under it."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    asked = [key for key in TOPOLOGY_ANNOTATIONS if key in annotations]
    if asked:
        return f"annotation {asked[0]}: {annotations[asked[0]]}"
    gates = ((pod.get("spec") or {}).get("schedulingGates")) or []
    return f"scheduling gate {TOPOLOGY_GATE}" if any(g.get("name") == TOPOLOGY_GATE for g in gates) else None
