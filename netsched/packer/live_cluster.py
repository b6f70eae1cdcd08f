"""A live cluster read into a packing problem: what `netsched pack --kubeconfig` and the packer
controller solve over.

- Nodes: Ready and schedulable ones, allocatable in integer units (CPU millicores, memory
  bytes, GPUs, pod slots, any extended resource).
- Pods: every bound pod that is not finished, and the pending pods of the netsched scheduler
  that wait: unschedulable ones, and GPUJob gangs held behind the gang gate (one gang each).
- A pod is movable only when a controller recreates it (ReplicaSet, Job, StatefulSet,
  GPUJob), it is not a DaemonSet's or in kube-system, and it is not annotated
  `netsched.io/protected: "true"`.
- A pod is stateless (a restart loses no work, so the default policy may move it for lower-
  priority work) when a ReplicaSet owns it and it keeps nothing on its node or in a volume of its
  own (no hostPath, persistentVolumeClaim or ephemeral volume): the replicas of a Deployment are
  interchangeable, and their controller replaces them at will on rollouts. A StatefulSet's pods
  (identity and volumes), a Job's, a GPUJob's, a pod gang's (work in progress) and bare pods are not.
- nodeSelector, required node affinity and tolerated taints (capacity.may_use, the same rule
  gang admission uses) decide the nodes a pod may use; PodDisruptionBudgets (label selectors)
  give each covered pod its budget, with status.disruptionsAllowed as the number that may go
  (the tightest, when budgets overlap: the packer checks each plan against all of them).
- A gang is a GPUJob's pods, or a pod gang's (netsched.jobs.pod_gangs: a Job's, a JobSet group's, ...
  when they are this scheduler's): placed all or nothing, evicted all or nothing, priced alike. A pod
  gang waits for room only once all the members it releases together exist (its size from the
  workload, `gang_sizes`); until then it waits for its pods, not for room.
- A gang's pods carry the domain their `netsched.io/max-peer-distance` names (the node label they
  must share), and every pod its start time, for policies that price what a restart loses.
- A pod with `netsched.io/max-data-distance` may use only the nodes that near its data source, as
  the extender's filter and the operator's gang admission count them.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from kubernetes import client

from netsched.api import annotations as read
from netsched.api.connect import listed
from netsched.api.dra import DraGpus
from netsched.api.events import parse_rfc3339
from netsched.api.labels import DATA_SOURCE, JOB_LABEL, MAX_DATA_DISTANCE, SCHEDULER_NAME
from netsched.api.objects import KubeObject
from netsched.api.pods import DONE
from netsched.api.resources import pod_requests
from netsched.api.topology import DEFAULT, Topology
from netsched.jobs.capacity import NodeRoom, label_expression, may_use, near_data, node_room
from netsched.jobs.gang_size import gang_size
from netsched.jobs.pod_gang import still_to_release
from netsched.jobs.pod_gangs import gang_of
from netsched.jobs.replica_pods import GANG_GATE, gang_gated
from netsched.packing.problem import Budget, Node, Pod, Problem

RECREATED_BY = {"ReplicaSet", "Job", "StatefulSet", "GPUJob"}
log = logging.getLogger(__name__)
STATELESS_OWNER = "ReplicaSet"
LOCAL_STATE = ("hostPath", "persistentVolumeClaim", "ephemeral")  # volumes whose data a move would strand
STATE = ("/api/v1/nodes", "/api/v1/pods", "/apis/policy/v1/poddisruptionbudgets")  # what a pass lists


def problem_from_cluster(api: client.ApiClient, scheduler: str = SCHEDULER_NAME,
                         topology: Topology = DEFAULT, dra_gpu_drivers: tuple[str, ...] = ()) -> Problem:
    nodes, pods, pdbs = cluster_state(api, dra_gpu_drivers)
    return problem_of(nodes, pods, pdbs, scheduler, gang_sizes(api, pods, scheduler), topology)


def cluster_state(api: client.ApiClient, dra_gpu_drivers: tuple[str, ...] = (),
                  ) -> tuple[list[KubeObject], list[KubeObject], list[KubeObject]]:
    """Nodes, pods and PodDisruptionBudgets as plain dicts: one list each, one at a time (a packing pass
    shares the operator's connections); the nodes with the GPUs `dra_gpu_drivers` publish
    (netsched.api.dra)."""
    nodes, pods, pdbs = (listed(api, path) for path in STATE)
    if dra_gpu_drivers:
        gpus, notes = DraGpus.read(api, dra_gpu_drivers)
        for note in notes:
            log.warning("packing pass: %s", note)
        nodes = gpus.nodes_folded(nodes)
    return nodes, pods, pdbs


def problem_of(raw_nodes: list[KubeObject], raw_pods: list[KubeObject], pdbs: list[KubeObject],
               scheduler: str = SCHEDULER_NAME, sizes: Mapping[str, int] | None = None,
               topology: Topology = DEFAULT) -> Problem:
    """`sizes`: members of each pod gang (by `pod_gang`) with gated pods; one not in it counts as
    the size its pods say, else as the members that exist. `topology`: the levels gangs and data
    sources name."""
    rooms = [r for r in map(node_room, raw_nodes) if r.schedulable]
    nodes = tuple(Node(r.name, _ints(r.allocatable), r.labels) for r in rooms)
    names = {n.name for n in nodes}
    allowed = _AllowedNodes(rooms, topology)
    gangs = {_name(p): pod_gang(p, scheduler) for p in raw_pods}
    short = _incomplete(raw_pods, gangs, sizes or {}, scheduler)
    pods = tuple(_pod(p, rooms, pdbs, allowed, gangs[_name(p)], topology) for p in raw_pods
                 if _counts(p, names, scheduler) and gangs[_name(p)] not in short)
    budgets = tuple(Budget(_key(b), _allowed(b)) for b in pdbs)
    return Problem(nodes, pods, budgets, taken=time.time())


def pod_gang(pod: KubeObject, scheduler: str = SCHEDULER_NAME) -> str | None:
    """The packer's name of the pod gang a pod of `scheduler` belongs to: namespace/Kind/name (a
    GPUJob's gang is namespace/name)."""
    if (pod.get("spec") or {}).get("schedulerName") != scheduler:
        return None  # a Job another scheduler places is no gang of netsched's
    ref = gang_of(pod)
    return f"{ref.namespace}/{ref.kind}/{ref.name}" if ref else None


def gang_sizes(api: client.ApiClient, raw_pods: list[KubeObject], scheduler: str = SCHEDULER_NAME,
               ) -> dict[str, int]:
    """The members of each pod gang that has a pod gated for room: one read of its Job (PodGroup, ...)
    per such gang whose pods do not say their size."""
    sizes: dict[str, int] = {}
    objects = None  # made at the first gang to read: importing the API class costs about a second
    for pod in raw_pods:
        key, ref = pod_gang(pod, scheduler), gang_of(pod)
        if key is None or ref is None or key in sizes or not gang_gated(pod):
            continue
        objects = objects or client.CustomObjectsApi(api)
        size = gang_size(objects, ref, pod)
        if size is not None:
            sizes[key] = size
    return sizes


def _incomplete(raw_pods: list[KubeObject], gangs: Mapping[str, str | None], sizes: Mapping[str, int],
                scheduler: str) -> set[str]:
    """The pod gangs with fewer gated pods than they release together: they wait for their pods,
    and a plan must not place part of one."""
    live: dict[str, int] = defaultdict(int)
    gated: dict[str, int] = defaultdict(int)
    for pod in raw_pods:
        key = gangs[_name(pod)]
        if key is None or _gone(pod["metadata"], pod.get("status") or {}):
            continue
        live[key] += 1
        if gang_gated(pod):
            gated[key] += 1
    return {key for key, n in gated.items() if n < still_to_release(sizes.get(key, live[key]), live[key], n)}


def _name(pod: KubeObject) -> str:
    return f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}"


def _counts(pod: KubeObject, nodes: set[str], scheduler: str) -> bool:
    spec = pod.get("spec") or {}
    if spec.get("nodeName") and not _gone(pod["metadata"], pod.get("status") or {}):
        return spec["nodeName"] in nodes
    return waits_for_room(pod["metadata"], spec, pod.get("status") or {}, scheduler)


def waits_for_room(meta: Mapping[str, Any], spec: Mapping[str, Any], status: Mapping[str, Any],
                   scheduler: str) -> bool:
    """An unbound pod of the netsched scheduler, not finished or going, held only at the gang gate
    or found Unschedulable: what the packer makes room for."""
    if spec.get("nodeName") or spec.get("schedulerName") != scheduler or _gone(meta, status):
        return False
    gates = [g.get("name") for g in spec.get("schedulingGates") or ()]
    if gates:
        return gates == [GANG_GATE]  # a gang waiting for room; other gates are someone else's
    return any(c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
               for c in status.get("conditions") or ())


def _gone(meta: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    return status.get("phase") in DONE or bool(meta.get("deletionTimestamp"))


class _AllowedNodes:
    """The nodes a pod may use, worked out once per distinct set of constraints (nodeSelector,
    affinity, tolerations, data annotations): pods of one job or one template share them, and
    checking every pod against every node costs seconds at 1,000 nodes."""

    def __init__(self, nodes: list[NodeRoom], topology: Topology):
        self.nodes, self.topology = nodes, topology
        self._known: dict[str, tuple[str, ...]] = {}

    def __call__(self, spec: dict[str, Any], annotations: Mapping[str, str]) -> tuple[str, ...]:
        key = json.dumps([spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations"),
                          annotations.get(MAX_DATA_DISTANCE), annotations.get(DATA_SOURCE)], sort_keys=True)
        if key not in self._known:
            self._known[key] = tuple(
                n.name for n in self.nodes
                if may_use(n, spec) and _near_its_data(n, annotations, self.nodes, self.topology))
        return self._known[key]


def _pod(raw: KubeObject, nodes: list[NodeRoom], pdbs: list[KubeObject], allowed_nodes: _AllowedNodes,
         member_of: str | None, topology: Topology) -> Pod:
    meta, spec = raw["metadata"], raw.get("spec") or {}
    labels = meta.get("labels") or {}
    requests = _ints(pod_requests(spec))
    requests["pods"] = 1
    owners = {o.get("kind") for o in meta.get("ownerReferences") or () if o.get("controller")}
    movable = (bool(owners & RECREATED_BY) and "DaemonSet" not in owners
               and meta.get("namespace") != "kube-system"
               and not read.ignoring_bad(read.protected, meta.get("annotations") or {}))
    gpujob = "GPUJob" in owners and JOB_LABEL in labels
    gang = f"{meta['namespace']}/{labels[JOB_LABEL]}" if gpujob else member_of
    stateless = (movable and owners == {STATELESS_OWNER} and gang is None
                 and not any(k in v for v in spec.get("volumes") or () for k in LOCAL_STATE))
    annotations = meta.get("annotations") or {}
    allowed = allowed_nodes(spec, annotations)
    # the solver models one budget per pod: the tightest; the packer checks a plan against all of them
    covering = [b for b in pdbs if b["metadata"]["namespace"] == meta["namespace"]
                and selects((b.get("spec") or {}).get("selector"), labels)]
    pdb = _key(min(covering, key=_allowed)) if covering else None
    # a gang's pods must share the node or domain of the level it asks for, as the extender's filter (a
    # GPUJob's) or the nodeSelector pinned at release (a pod gang's) will insist: a spread plan would stall
    distance = read.ignoring_bad(read.max_peer_distance, meta.get("annotations") or {}, topology)
    domain = level_label(distance, topology) if gang else None
    started = (raw.get("status") or {}).get("startTime")
    return Pod(f"{meta['namespace']}/{meta['name']}", requests, int(spec.get("priority") or 0),
               spec.get("nodeName"), movable, gang, pdb, None if len(allowed) == len(nodes) else allowed,
               started=parse_rfc3339(started).timestamp() if started else None, domain=domain,
               priority_class=spec.get("priorityClassName"), stateless=stateless)


def level_label(name: str | None, topology: Topology) -> str | None:
    """The node label of a level name the topology has (node's hostname), else None."""
    return topology.label_of(name) if name in topology.limits else None


def _near_its_data(node: NodeRoom, annotations: Mapping[str, str], nodes: list[NodeRoom],
                   topology: Topology) -> bool:
    """Within the pod's maxDataDistance of its data source (true when it names none, or one the
    extender would refuse anyway: a plan then does not count on it either way)."""
    level = read.ignoring_bad(read.max_data_distance, annotations, topology)
    source = read.ignoring_bad(read.data_source, annotations, topology)
    if level is None or source is None or source.endpoint is not None:
        return True
    return near_data(node, level, (source.kind, source.name), nodes, topology)


def _ints(resources: dict[str, float]) -> dict[str, int]:
    """CPU in millicores; everything else in its base unit (bytes, devices)."""
    return {k: math.ceil(v * 1000) if k == "cpu" else math.ceil(v) for k, v in resources.items()}


def _allowed(pdb: KubeObject) -> int:
    return int((pdb.get("status") or {}).get("disruptionsAllowed") or 0)


def _key(obj: KubeObject) -> str:
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


def selects(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    if selector is None:
        return False  # policy/v1: a null selector covers no pods; an empty one covers them all
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(label_expression(e, labels) for e in selector.get("matchExpressions") or ())
