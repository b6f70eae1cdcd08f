"""Does a gang fit? The operator lifts a gang's gate only when it does.

Free room per node is allocatable minus the requests of pods bound there. Pods
already released but not yet bound (other gangs on their way) take their room
first, largest first, so two gangs released together cannot both count on the
same GPUs. A gang that must stay within one node, rack or zone
(`spec.network.maxPeerDistance`) or near its data (`maxDataDistance`) is counted
only where that holds, the same rules the extender's filter enforces. The levels are the cluster's topology
(netsched.api.topology): a domain of a level is the nodes with the same value of that level's label,
and a node without the label is alone there.

Such a gang's fit also names the domain it is released into (`Fit.domain`: the level's node label
and value with the most room for it), which the operator adds to the pods' nodeSelector as
it lifts the gate. kube-scheduler then keeps the gang in that domain on its own, so the limit
holds when the extender is down or errs (an ignorable extender is skipped, and the pods would
be placed without it). The most room, not the tightest fit: replicas scheduled one by one
meet other pods on the way, and a domain with room to spare is the one they still fit in.

A gang that does not fit now is also checked against the cluster as it is with every node empty
(`never_fits`): one that could never fit there says so (reason NeverFits), so that it does not
read as one that only has to wait.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from netsched.api import conditions as c
from netsched.api.dra import DraGpus
from netsched.api.labels import GPU_RESOURCE
from netsched.api.resources import Resources, quantities
from netsched.api.topology import DEFAULT, NODE, Topology
from netsched.jobs.workload import NetworkNeeds, SizeFields, Workload


@dataclass(frozen=True)
class NodeRoom:
    name: str
    labels: dict[str, str]
    allocatable: Resources
    schedulable: bool
    taints: tuple[dict[str, Any], ...] = ()
    # room taken off allocatable that is no pod's request: GPUs claim-only pods hold (with_dra_gpus); it
    # comes back when they end, so never_fits counts it
    held: Resources = field(default_factory=dict)


@dataclass(frozen=True)
class Fit:
    placeable: int  # replicas that fit now, within the job's network limits
    needed: int
    message: str
    domain: tuple[str, str] | None = None  # (node label, value) the gang must stay in, when it has a limit
    why: str = c.FITS  # a Schedulable reason (netsched.api.conditions): why it does not fit
    nodes: dict[str, str] | None = None  # member pod -> node, when its members' nodes were chosen together

    @property
    def fits(self) -> bool:
        return self.placeable >= self.needed


def node_room(node: dict[str, Any]) -> NodeRoom:
    status, spec = node.get("status") or {}, node.get("spec") or {}
    conds = status.get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)
    taints = tuple(t for t in spec.get("taints") or () if t.get("effect") in ("NoSchedule", "NoExecute"))
    return NodeRoom(node["metadata"]["name"], dict(node["metadata"].get("labels") or {}),
                    quantities(status.get("allocatable")), ready and not spec.get("unschedulable"), taints)


def with_dra_gpus(room: NodeRoom, dra: DraGpus) -> NodeRoom:
    """The room with the GPUs DRA drivers publish on its node (netsched.api.dra), those claim-only pods
    hold taken off and `held`; the room itself where DRA adds nothing."""
    labels, allocatable = dra.fold(room.name, room.labels, room.allocatable, float)
    if allocatable is None:
        return room
    held = {GPU_RESOURCE: float(dra.claimed(room.name))}
    return replace(room, labels=labels, allocatable=allocatable, held=held)


def domain_of(node: NodeRoom, level: str, topology: Topology = DEFAULT) -> str:
    """The node's domain at `level` (a level name of `topology`, or node): the value of the level's
    label, the node's own name where it has none (alone there)."""
    return node.labels.get(topology.label_of(level), node.name)


def gang_fit(nodes: list[NodeRoom], used: dict[str, Resources], pending: list[Resources],
             job: Workload, topology: Topology = DEFAULT) -> Fit:
    """Do `job`'s minAvailable members fit now, after the `pending` pods take their room?"""
    request, needed = job.member_request, job.min_available
    free, eligible, per_node = _room(nodes, used, pending, job, topology)
    level = job.needs.max_peer_distance
    groups = _groups(eligible, per_node, level, topology)
    placeable = max(groups.values(), default=0)
    domain = None
    if level and level != NODE and placeable >= needed:  # a node limit is one node: left to the extender
        label = topology.label_of(level)
        best = _roomiest(groups, {n.labels[label] for n in eligible if label in n.labels})
        domain = (label, best) if best is not None and groups[best] >= needed else None
    where = f" in one {level}" if level else ""
    gpus = sum(free[n.name].get(GPU_RESOURCE, 0) for n in eligible)
    # a node that could not hold one replica even empty (a GPU-less system node) is not eligible
    able = sum(_count(n.allocatable, request) >= 1 for n in eligible)
    message = (f"needs {needed} replica(s) of {_describe(request)}{where}; {min(placeable, needed)} fit now "
               f"({gpus:g} free GPUs on {able} eligible of {len(nodes)} nodes)")
    if placeable >= needed:
        return Fit(placeable, needed, message, domain)
    never = never_fits(nodes, job, topology)
    if never:
        return Fit(placeable, needed, f"never fits: {never}", None, c.NEVER_FITS)
    why, change = _why_not(nodes, free, per_node, eligible, job, topology)
    best = _roomiest(groups, set(groups)) if level else None
    if level and best is not None:
        free_there = sum(free[n.name].get(GPU_RESOURCE, 0.0) for n in eligible
                         if domain_of(n, level, topology) == best)
        message += f"; the best {level}, {best}, has {free_there:g} free GPUs and holds {groups[best]}"
    return Fit(placeable, needed, message + (f"; {change}" if change else ""), None, why)


def never_fits(nodes: list[NodeRoom], job: Workload, topology: Topology = DEFAULT) -> str | None:
    """Why `job`'s gang could never fit the cluster as it is, even with every node empty, in plain
    words with the numbers and the fix; None when it could (now, or once room frees).

    Counts allocatable room, not free room, on the Ready, schedulable nodes the job may use (its
    nodeSelector, node affinity, tolerations and data limit, as `gang_fit` does), checked against
    its shape: one member on a node, the gang in the cluster, the gang in one domain of its
    maxPeerDistance. A cluster with no Ready, schedulable node at all is an outage, not a job too
    large for it: None."""
    request, needed, level = job.member_request, job.min_available, job.needs.max_peer_distance
    fields = job.fields
    ready = [n for n in nodes if n.schedulable]
    if not ready or not any(v > 0 for v in request.values()):
        return None
    usable = [_emptied(n) for n in ready if _may_run(n, job.member_spec, job.needs, nodes, topology)]
    limited = len(usable) < len(ready)
    widen = (f", or widen its nodeSelector, node affinity, tolerations or {fields.data_distance}" if limited
             else "")
    if not usable:
        return (f"none of the {len(ready)} Ready, schedulable nodes matches its nodeSelector, node affinity, "
                f"tolerations or {fields.data_distance}; change those, or add a node that matches")
    kinds = sorted((k for k, v in request.items() if v > 0), key=lambda k: (k != GPU_RESOURCE, k))
    holds = {n.name: _count(n.allocatable, request) for n in usable}
    if not any(holds.values()):
        node = "node it may use" if limited else "node"
        for k in kinds:
            largest = max(n.allocatable.get(k, 0.0) for n in usable)
            if largest < request[k]:
                number, unit = _amount(k, request[k])
                return (f"no {node} has {number} {unit}, the largest has {_amount(k, largest)[0]}; "
                        f"lower {_field(k, fields)}, or add a node with more{widen}")
        lower = _field(kinds[0], fields)
        return f"no {node} has {_describe(request)} at once; lower {lower}, or add a node with more{widen}"
    total = sum(holds.values())
    where = f"the {len(usable)} nodes it may use have" if limited else "the cluster has"
    if total < needed:
        fix = f"lower {fields.size}, or add nodes{widen}"
        for k in kinds:
            have = sum(n.allocatable.get(k, 0.0) for n in usable)
            if request[k] * needed > have:
                number, unit = _amount(k, request[k] * needed)
                return f"needs {number} {unit}, {where} {_amount(k, have)[0]}; {fix}"
        return (f"needs {needed} replica(s) of {_describe(request)}, {where} room for {total} even "
                f"empty; {fix}")
    if level:
        groups = _groups(usable, holds, level, topology)
        best = _roomiest(groups, set(groups))
        if best is not None and groups[best] < needed:
            members = [n for n in usable if domain_of(n, level, topology) == best]
            gpus = sum(n.allocatable.get(GPU_RESOURCE, 0.0) for n in members)
            wider = next(lv for lv in (*_wider(level, topology), None) if lv is None or
                         max(_groups(usable, holds, lv, topology).values()) >= needed)
            could = f"{fields.peer_distance}: {wider}" if wider else f"no {fields.peer_distance}"
            within = "on one node" if level == "node" else f"within one {level}"
            nodes_there = f"{len(members)} node{'s' * (len(members) != 1)}, "
            size = f"{gpus:g} GPUs" if level == "node" else f"{nodes_there}{gpus:g} GPUs"
            return (f"needs {needed} replica(s) of {_describe(request)} {within}, the largest {level} holds "
                    f"{groups[best]} ({best}: {size}); it could run with {could}, or with "
                    f"{fields.at_most} at most {groups[best]}")
    return None


def placement(nodes: list[NodeRoom], used: dict[str, Resources], job: Workload,
              topology: Topology = DEFAULT) -> dict[str, int] | None:
    """Where `job`'s minAvailable members would go now (members per node), or None if they do not fit:
    in the roomiest domain the job's limits allow, the nodes that hold the most members first, so that
    a gang lands on as few nodes as it can (same node before same rack, as the extender scores)."""
    needed = job.min_available
    _, eligible, per_node = _room(nodes, used, [], job, topology)
    level = job.needs.max_peer_distance
    groups = _groups(eligible, per_node, level, topology)
    domain = _roomiest(groups, {g for g, n in groups.items() if n >= needed})
    if domain is None:
        return None
    members = [n for n in eligible if not level or domain_of(n, level, topology) == domain]
    out: dict[str, int] = {}
    for n in sorted(members, key=lambda n: (-per_node[n.name], n.name)):
        take = min(per_node[n.name], needed - sum(out.values()))
        if take > 0:
            out[n.name] = take
    return out


def member_room(nodes: list[NodeRoom], used: dict[str, Resources], pending: list[Resources], job: Workload,
                topology: Topology = DEFAULT) -> dict[str, int]:
    """How many of `job`'s members each node it may use holds now (after the `pending` pods take their
    room): what kube-scheduler's own filters would let through, handed to the extender's gang placement
    as its candidates."""
    _, _, per_node = _room(nodes, used, pending, job, topology)
    return {name: n for name, n in per_node.items() if n > 0}


def on_nodes(nodes_of: dict[str, str]) -> str:
    """Members per node as people read it: "gpu-a1-0 x4" or "gpu-a1-0 x2, gpu-a1-1 x2"."""
    counts: dict[str, int] = defaultdict(int)
    for node in nodes_of.values():
        counts[node] += 1
    return ", ".join(f"{n} x{k}" for n, k in sorted(counts.items()))


def domain_room(nodes: list[NodeRoom], used: dict[str, Resources], job: Workload,
                level: str, topology: Topology = DEFAULT) -> list[tuple[str, float, int]]:
    """Per domain of `level` (node or a level of `topology`) the job may use: its name, free GPUs, and
    how many of the job's members fit there now; the roomiest first."""
    free, eligible, per_node = _room(nodes, used, [], job, topology)
    gpus: dict[str, float] = defaultdict(float)
    for n in eligible:
        gpus[domain_of(n, level, topology)] += free[n.name].get(GPU_RESOURCE, 0.0)
    groups = _groups(eligible, per_node, level, topology)
    return sorted(((g, gpus[g], groups[g]) for g in groups), key=lambda r: (-r[2], -r[1], r[0]))


def _room(nodes: list[NodeRoom], used: dict[str, Resources], pending: list[Resources], job: Workload,
          topology: Topology) -> tuple[dict[str, Resources], list[NodeRoom], dict[str, int]]:
    """Free room per schedulable node (after `pending` pods take theirs, largest first), the nodes
    the job may use, and how many of its members each of those holds."""
    free = {n.name: _minus(n.allocatable, used.get(n.name, {})) for n in nodes if n.schedulable}
    for other in sorted(pending, key=lambda r: -r.get(GPU_RESOURCE, 0)):
        spot = next((name for name, room in free.items() if _count(room, other) >= 1), None)
        if spot is not None:
            free[spot] = _minus(free[spot], other)
    spec, needs, request = job.member_spec, job.needs, job.member_request
    eligible = [n for n in nodes if n.name in free and _may_run(n, spec, needs, nodes, topology)]
    return free, eligible, {n.name: _count(free[n.name], request) for n in eligible}


def _groups(eligible: list[NodeRoom], per_node: dict[str, int], level: str | None,
            topology: Topology) -> dict[str, int]:
    """Replicas that fit per domain of `level` (one domain, the cluster, without a level)."""
    groups: dict[str, int] = defaultdict(int)
    for n in eligible:
        groups[domain_of(n, level, topology) if level else ""] += per_node[n.name]
    return groups


def _wider(level: str, topology: Topology) -> tuple[str, ...]:
    """The limits wider than `level`, nearest first."""
    return topology.limits[topology.distance_of(level) + 1:]


def _roomiest(groups: dict[str, int], among: set[str]) -> str | None:
    """The domain of `among` with room for the most replicas; ties go to the first name."""
    return min((g for g in groups if g in among), key=lambda g: (-groups[g], g), default=None)


def _why_not(nodes: list[NodeRoom], free: dict[str, Resources], per_node: dict[str, int],
             eligible: list[NodeRoom], job: Workload, topology: Topology) -> tuple[str, str]:
    """Why a gang does not fit (a Schedulable reason), and the smallest change to its network limits
    that would let it run now, if one would."""
    needed, needs = job.min_available, job.needs
    level, far = needs.max_peer_distance, needs.max_data_distance
    if level and sum(per_node.values()) >= needed:
        for lv in (*_wider(level, topology), None):
            if max(_groups(eligible, per_node, lv, topology).values(), default=0) >= needed:
                change = f"all {needed} would fit now with maxPeerDistance: {lv}" if lv else (
                    f"all {needed} would fit now without maxPeerDistance")
                return c.NO_DOMAIN_LARGE_ENOUGH, change
    if far and needs.data:
        anyplace = replace(needs, data=None)
        anywhere = [n for n in nodes
                    if n.name in free and _may_run(n, job.member_spec, anyplace, nodes, topology)]
        counts = {n.name: _count(free[n.name], job.member_request) for n in anywhere}
        if max(_groups(anywhere, counts, level, topology).values(), default=0) >= needed:
            return c.DATA_TOO_FAR, f"all {needed} would fit now without maxDataDistance: {far}"
    return c.INSUFFICIENT_RESOURCES, ""


def fits_on(node: NodeRoom, used: Resources, request: Resources) -> bool:
    """Does one pod asking `request` fit beside the `used` requests on the node?"""
    return _count(_minus(node.allocatable, used), request) >= 1


def _emptied(node: NodeRoom) -> NodeRoom:
    """The node with every pod gone: its allocatable with what it holds for no pod's request back."""
    if not node.held:
        return node
    return replace(node, allocatable={k: node.allocatable.get(k, 0.0) + node.held.get(k, 0.0)
                                      for k in node.allocatable.keys() | node.held.keys()})


def _minus(a: Resources, b: Resources) -> Resources:
    return {k: v - b.get(k, 0.0) for k, v in a.items()}


def _count(free: Resources, request: Resources) -> int:
    """How many pods asking `request` fit in `free`."""
    counts = [math.floor(free.get(k, 0.0) / v + 1e-9) for k, v in request.items() if v > 0]
    if not counts:  # it asks nothing (a pod whose GPUs come through ResourceClaims only): as many as the
        return max(0, int(free.get("pods", NO_POD_LIMIT)))  # node takes pods, not none (never released)
    return max(0, min(counts))


NO_POD_LIMIT = 1 << 20  # a node's room for pods asking nothing, where its allocatable has no `pods`
INTEGER = re.compile(r"-?[0-9]+")  # what Go's strconv.ParseInt takes: no "²", no spaces


def may_use(node: NodeRoom, spec: dict[str, Any]) -> bool:
    """May a pod with this spec run on the node: nodeSelector, required node affinity
    (In, NotIn, Exists, DoesNotExist, Gt, Lt), and NoSchedule/NoExecute taints it tolerates."""
    if any(node.labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    if terms and not any(all(label_expression(e, node.labels) for e in t.get("matchExpressions") or ())
                         for t in terms):
        return False
    return all(_tolerated(t, spec.get("tolerations") or ()) for t in node.taints)


def label_expression(e: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op, values = e.get("key", ""), e.get("operator", ""), e.get("values") or []
    if op in ("Gt", "Lt"):  # as kube-scheduler: both sides integers, else the node does not match
        label, bound = _integer(labels.get(key)), _integer(values[0] if len(values) == 1 else None)
        return label is not None and bound is not None and (label > bound if op == "Gt" else label < bound)
    return {"In": labels.get(key) in values, "NotIn": labels.get(key) not in values,
            "Exists": key in labels, "DoesNotExist": key not in labels}.get(op, False)


def _integer(value: object) -> int | None:
    return int(value) if isinstance(value, str) and INTEGER.fullmatch(value) else None


def _may_run(node: NodeRoom, spec: dict[str, Any], needs: NetworkNeeds, nodes: list[NodeRoom],
             topology: Topology) -> bool:
    if not may_use(node, spec):
        return False
    level, data = needs.max_data_distance, needs.data
    if level and data and data[0] in topology.limits:
        return near_data(node, level, data, nodes, topology)
    return True


def near_data(node: NodeRoom, level: str, data: tuple[str, str], nodes: list[NodeRoom],
              topology: Topology = DEFAULT) -> bool:
    """Is `node` within `level` of the data at (kind, location), kind node or a level of `topology`?"""
    kind, location = data
    if topology.distance_of(kind) > topology.distance_of(level):
        return False  # data known only to a zone cannot be within a rack of anything
    holders = [n for n in nodes if domain_of(n, kind, topology) == location]
    return any(domain_of(h, level, topology) == domain_of(node, level, topology) for h in holders)


def _tolerated(taint: dict[str, Any], tolerations: Iterable[dict[str, Any]]) -> bool:
    for t in tolerations:
        if t.get("effect") not in (None, "", taint.get("effect")):
            continue
        if t.get("operator") == "Exists" and t.get("key") in (None, "", taint.get("key")):
            return True
        if t.get("key") == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _amount(kind: str, value: float) -> tuple[str, str]:
    """A quantity of a resource as people read it: ("16", "GPUs"), ("96", "CPUs"), ("1024Gi", "memory")."""
    if kind == "memory":
        return f"{value / 2**30:g}Gi", "memory"
    return f"{value:g}", {GPU_RESOURCE: "GPUs", "cpu": "CPUs"}.get(kind, kind)


def _field(kind: str, fields: SizeFields) -> str:
    """Where a member's request of `kind` comes from in the workload."""
    return fields.gpus if kind == GPU_RESOURCE else f"the template's {kind} requests"


def _describe(request: Resources) -> str:
    parts = [f"{request.get(GPU_RESOURCE, 0):g} GPUs"]
    if request.get("cpu"):
        parts.append(f"{request['cpu']:g} CPU")
    if request.get("memory"):
        parts.append(f"{request['memory'] / 2**30:g}Gi memory")
    return ", ".join(parts)
