"""A pod's data limit as required node affinity, so that kube-scheduler keeps it itself.

The extender filters nodes by every network limit, but kube-scheduler skips an extender that is down,
hung or slow (it is `ignorable`). What a Kubernetes constraint can say is therefore written on the pod
too, before it can be bound: "within <level> of the data" (`maxDataDistance`, the
`netsched.io/max-data-distance` annotation) becomes matchExpressions `In` on the level labels from the
widest down to that level (`node`: matchFields on the node's name), AND-ed into every term of the
pod's required node affinity, so it only narrows what the pod's author wrote. The peer limit is the
other such constraint: a gang's domain is pinned by nodeSelector when it is released
(replica_pods.pin_patch).

Never stricter than the extender: when a node holding the data lacks a label the limit would name,
nothing is written (`Unwritable`). A domain name that wider domains share (rack r1 in two zones) allows
each of them, as the extender does; with three or more levels the label values are combined level by
level, which may allow more than the extender (it still filters). Data at an endpoint is not in the
topology: only the extender keeps limits on it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from netsched.api.topology import NODE, Topology
from netsched.jobs.workload import NetworkNeeds

NodeLabels = tuple[str, Mapping[str, str]]  # a node's name and labels


class Unwritable(ValueError):
    """A data limit kube-scheduler cannot be told; the message says why (the extender still keeps it)."""


@dataclass(frozen=True)
class NodeRequirement:
    """What every term of a pod's required node affinity must also hold."""
    expressions: tuple[dict[str, Any], ...] = ()  # matchExpressions
    fields: tuple[dict[str, Any], ...] = ()  # matchFields

    def __str__(self) -> str:
        """"topology.kubernetes.io/zone in (zone-a)"."""
        return ", ".join(f"{e['key']} in ({', '.join(e['values'])})"
                         for e in (*self.expressions, *self.fields))


def data_requirement(needs: NetworkNeeds, nodes: Iterable[NodeLabels],
                     topology: Topology) -> NodeRequirement | None:
    """The requirement keeping a pod within `needs.max_data_distance` of its data, given the cluster's
    nodes (those holding the data are enough); None when there is no such limit or it is not one a
    topology level can say (data at an endpoint, a level the topology lacks, a limit finer than where
    the data is known: the validation and the extender say those). Unwritable when no node holds the
    data or one lacks a label it would need."""
    distance, data = needs.max_data_distance, needs.data
    if not distance or not data:
        return None
    kind, location = data
    if kind not in topology.limits or distance not in topology.limits:
        return None
    if topology.distance_of(distance) < topology.distance_of(kind):
        return None
    label = None if kind == NODE else topology.label_of(kind)
    holders = [(name, labels) for name, labels in nodes
               if (name == location if label is None else labels.get(label) == location)]
    if not holders:
        where = f"node {location}" if label is None else f"node with {label}={location}"
        raise Unwritable(f"no {where} exists (the extender refuses every node for it): fix the data source")
    if distance == NODE:
        return NodeRequirement(fields=({"key": "metadata.name", "operator": "In", "values": [location]},))
    wanted = topology.levels[:topology.names.index(distance) + 1]
    expressions = []
    for level in wanted:
        lacking = sorted(name for name, labels in holders if not labels.get(level.label))
        if lacking:
            raise Unwritable(f"node {lacking[0]} holds the data but has no {level.label} label: label it")
        values = sorted({labels[level.label] for _, labels in holders})
        expressions.append({"key": level.label, "operator": "In", "values": values})
    return NodeRequirement(tuple(expressions))


def pinned_to(node: str, also: NodeRequirement | None = None) -> NodeRequirement:
    """A gang member's node as chosen when its gate lifts (with its data limit `also`, when it has one):
    a field requirement on metadata.name, which kube-scheduler's NodeAffinity PreFilter turns into that
    one node, so its Filter runs on one node instead of all of them."""
    pin = {"key": "metadata.name", "operator": "In", "values": [node]}
    if also is None:
        return NodeRequirement(fields=(pin,))
    return NodeRequirement(also.expressions, (*also.fields, pin))


def with_requirement(spec: Mapping[str, Any], requirement: NodeRequirement) -> dict[str, Any] | None:
    """The pod's `affinity` with `requirement` added to every term of its required node affinity (one
    term of its own when it has none); None when every term holds it already. Only adding to each term
    keeps it a change the API server allows on a gated pod."""
    affinity = copy.deepcopy(dict(spec.get("affinity") or {}))
    node = affinity.setdefault("nodeAffinity", {})
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms") or [{}]
    changed = False
    for term in terms:
        for key, wanted in (("matchExpressions", requirement.expressions),
                            ("matchFields", requirement.fields)):
            have = term.get(key) or []
            missing = [w for w in wanted if w not in have]
            if missing:
                term[key] = [*have, *missing]
                changed = True
    node["requiredDuringSchedulingIgnoredDuringExecution"] = {**required, "nodeSelectorTerms": terms}
    return affinity if changed else None


def requirement_patch(spec: Mapping[str, Any], requirement: NodeRequirement | None) -> list[dict[str, Any]]:
    """JSON patch ops giving a gated pod the requirement; none when it has it already."""
    affinity = with_requirement(spec, requirement) if requirement else None
    return [] if affinity is None else [{"op": "add", "path": "/spec/affinity", "value": affinity}]
