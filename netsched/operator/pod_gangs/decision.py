"""What to do with one pod gang now (pure: no API calls): wait, say why it stays gated, or release its
gated members with the patches that lift the gate (netsched.operator.pod_gangs.controller carries it out)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from netsched.api import conditions as c
from netsched.api.labels import MAX_PEER_DISTANCE
from netsched.api.resources import Resources
from netsched.api.topology import DEFAULT, Topology
from netsched.jobs.capacity import NodeRoom, gang_fit, member_room, on_nodes
from netsched.jobs.hard_limits import (
    NodeRequirement,
    Unwritable,
    data_requirement,
    pinned_to,
    requirement_patch,
)
from netsched.jobs.kueue_topology import placed_by_kueue
from netsched.jobs.pod_gang import PodGang, still_to_release
from netsched.jobs.pod_gangs import GangRef
from netsched.jobs.replica_pods import pin_patch, pinned_note, size_patch, ungate_patch
from netsched.jobs.validation import problems
from netsched.operator.cluster_index import GangMember

log = logging.getLogger(__name__)
# the members to release, each node's room for one more, and the nodes of the members released already
# -> each member's node, or None
Place = Callable[[list[dict[str, Any]], dict[str, int], list[str]], dict[str, str] | None]


@dataclass(frozen=True)
class Decision:
    type: str  # of the Event: Normal or Warning
    reason: str  # netsched.api.conditions
    message: str
    release: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # pod -> JSON patch
    blocked: bool = False  # it cannot go on as it is (never fits, bad annotations): the user must act

    @property
    def blocked_note(self) -> str | None:
        """The GANG_BLOCKED annotation its gated pods carry: None when it is not Blocked."""
        return f"{self.reason}: {self.message}"[:c.MAX_MESSAGE] if self.blocked else None

    @property
    def said_as(self) -> tuple[str, str]:
        """What makes a new Event: a Warning's words (its fix may change), else the reason alone (the
        numbers of a wait change all the time)."""
        return (self.reason, self.message if self.type == "Warning" else "")


def decide(ref: GangRef, size: int | None, gang: list[GangMember], nodes: list[NodeRoom],
           used: dict[str, Resources], pending: list[Resources], no_size: str = "",
           plan: str | None = None, topology: Topology = DEFAULT,
           place: Place = lambda pods, room, peers: None, refused: str | None = None) -> Decision:
    """What to do with a pod gang whose live pods are `gang` (some gated); `no_size` says why its size
    is unknown when it is; `plan`: the active PackingPlan that places its gated pods, if one does;
    `place`: where its members go, chosen together (netsched.operator.gang_placer), when it is released
    whole; each is then pinned to its node rather than to a domain; `refused`: why the API server
    refuses the pods its controller makes (its last FailedCreate Event), if it does."""
    gated = sorted((m for m in gang if m.pod is not None), key=lambda m: m.name)
    what = f"{ref.kind} {ref.namespace}/{ref.name}"
    if plan is not None:  # the plan lifts the gates, on the nodes it freed, once its victims are gone
        return Decision("Normal", c.WAITING_FOR_PLAN, f"{what}: PackingPlan {plan} is making room for the "
                        "gang and lifts the gate when it is ready")
    kueue = placed_by_kueue(gated[0].pod or {}) if gated else None
    if kueue is not None:
        return _kueue_places(what, kueue, gated)
    if size is None:
        return Decision("Warning", c.WAITING_FOR_PODS,
                        f"{what}: netsched cannot tell how many pods the gang has{no_size}; its pods stay "
                        "gated. Create the object that says its size (with its CRD), run it as a batch Job, "
                        "or give its pods the size annotation of their kind (docs/workloads.md)")
    to_release = still_to_release(size, len(gang), len(gated))
    if len(gated) < to_release and refused:  # no wait brings its pods: the cluster or its spec must change
        return Decision("Warning", c.PODS_REFUSED, f"{what} is Blocked: {len(gated)} of {to_release} pods to "
                        f"release exist, the API server refuses the rest: {refused}; fix what it names (a "
                        "PriorityClass, a quota, ...), and the gang is released once all exist", blocked=True)
    if len(gated) < to_release:
        return Decision("Normal", c.WAITING_FOR_PODS, f"{what}: {len(gated)} of {to_release} pods to release "
                        "exist; released together once all do")
    member = gated[0].pod
    assert member is not None
    workload = PodGang(ref, size, _with_peers(member, gang), to_release)
    found = problems(workload, workload.annotations, nodes, spec_fields=False, topology=topology)
    if found:
        return Decision("Warning", c.INVALID_SPEC, f"{what} stays gated: " + "; ".join(found), blocked=True)
    fit = gang_fit(nodes, used, pending, workload, topology)
    if fit.why == c.NEVER_FITS:  # no wait makes room for it: the user must change it, or the cluster
        return Decision("Warning", c.NEVER_FITS, f"{what} is Blocked, its pods stay gated: {fit.message}",
                        blocked=True)
    if not fit.fits:
        return Decision("Normal", fit.why, f"{what} waits: {fit.message}")
    near_data = _near_data(workload, nodes, topology)
    members = [m.pod for m in gated[:to_release] if m.pod is not None]
    # placed together, beside the members released already (a replacement, or a release cut short)
    peers = sorted(m.node for m in gang if m.pod is None and m.node)
    nodes_of = place(members, member_room(nodes, used, pending, workload, topology), peers)
    release = {}
    for m in gated[:to_release]:
        assert m.pod is not None
        spec = m.pod.get("spec") or {}
        node = (nodes_of or {}).get(m.name)
        pin = pin_patch(spec.get("nodeSelector"), *fit.domain) if fit.domain and not node else []
        requirement = pinned_to(node, near_data) if node else near_data
        annotations = (m.pod.get("metadata") or {}).get("annotations")
        sized = size_patch(annotations, size, workload.gpus_per_member)
        noted = [pinned_note(annotations, node, sized)] if node else []
        release[m.name] = [*pin, *requirement_patch(spec, requirement), *sized, *noted, _ungate(m)]
    if nodes_of:
        where = f" on {on_nodes(nodes_of)}, chosen together"
    else:
        where = f" in {fit.domain[0]}={fit.domain[1]}" if fit.domain else ""
    return Decision("Normal", c.GANG_RELEASED, f"{what}: released {len(release)} pods{where}: {fit.message}",
                    release)



def _kueue_places(what: str, mark: str, gated: list[GangMember]) -> Decision:
    """Kueue's topology-aware scheduling places these pods (netsched.jobs.kueue_topology): each gated
    member's gate is lifted now, with no domain pinned; a netsched peer distance it asks for cannot hold."""
    release = {m.name: [_ungate(m)] for m in gated}
    said = (f"{what}: Kueue's topology-aware scheduling places its pods ({mark}); netsched lifts its gate "
            "without ganging or pinning them")
    distance = ((gated[0].pod or {}).get("metadata", {}).get("annotations") or {}).get(MAX_PEER_DISTANCE)
    if distance is None:
        return Decision("Normal", c.PLACED_BY_KUEUE, said, release)
    return Decision("Warning", c.PLACED_BY_KUEUE, f"{said}, and {MAX_PEER_DISTANCE}: {distance} is ignored. "
                    "Ask Kueue for the domain instead (kueue.x-k8s.io/podset-required-topology on the pod "
                    "template) and remove the netsched annotation, or queue the workload in a ClusterQueue "
                    "whose ResourceFlavor has no spec.topologyName to have netsched place it", release)


def _near_data(gang: PodGang, nodes: list[NodeRoom], topology: Topology) -> NodeRequirement | None:
    """The gang's data limit as required node affinity, added as its gates lift (the webhook may have
    added it at creation); one that cannot be written is kept by the extender alone."""
    try:
        return data_requirement(gang.needs, ((n.name, n.labels) for n in nodes), topology)
    except Unwritable as exc:
        log.info("%s %s/%s: its data limit is kept by the extender only: %s", gang.ref.kind,
                 gang.ref.namespace, gang.ref.name, exc)
        return None


def _ungate(member: GangMember) -> dict[str, Any]:
    spec = (member.pod or {}).get("spec") or {}
    return ungate_patch(g.get("name") for g in spec.get("schedulingGates") or ())


def _with_peers(member: dict[str, Any], gang: list[GangMember]) -> dict[str, Any]:
    """`member`, kept to the domain its released peers were pinned to: a gang released in part (the
    operator stopped between its patches) or a replacement of a running member joins its peers there,
    never a domain of its own."""
    pins = {m.pinned for m in gang if m.pod is None and m.pinned}
    if len(pins) != 1:
        return member
    [(label, value)] = pins
    spec = member.get("spec") or {}
    return {**member, "spec": {**spec, "nodeSelector": {**(spec.get("nodeSelector") or {}), label: value}}}
