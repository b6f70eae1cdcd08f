"""What the operator knows of the cluster's nodes and pods, kept by its own list-and-watch.

Gang admission reads it on every tick: each node's room, the requests of the live pods bound to
each node, the requests of released pods not bound yet, and each GPUJob's replica pods. The
forecaster reads every node's room and every pod as the API server sent it (without its
managedFields, which nothing here reads and which are a large part of a pod). The
watches (netsched.api.watch) run on two threads and keep plain dicts decoded by orjson. A node
event that changes nothing about its room (a status heartbeat) costs one comparison; one that
does calls `on_room_change` (the packer may now make room, or must no longer count on it). With DRA
drivers configured, ResourceSlices and ResourceClaims are watched too (`kinds`), and a node's room counts
the GPUs they publish (netsched.api.dra), worked out again when they change.

Not kopf indexes: kopf gives every watched object a worker task, and until all its indexes are
filled it wakes every waiting worker whenever another object's worker starts. On 5,000 KWOK nodes,
whose heartbeats restart those workers every few seconds, the operator never got there: a GPUJob
waited minutes without a pod, and the operator used 0.7 of a core doing nothing else.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from netsched.api import dra
from netsched.api.gpujob import KIND as GPUJOB
from netsched.api.labels import JOB_LABEL, REPLICA_LABEL
from netsched.api.objects import KubeObject
from netsched.api.pods import DONE, PodPhase
from netsched.api.resources import Resources, add_usage, pod_requests
from netsched.api.topology import DEFAULT, Topology
from netsched.jobs.capacity import NodeRoom, node_room, with_dra_gpus
from netsched.jobs.gpujob import GPUJob
from netsched.jobs.pod_gangs import gang_of
from netsched.jobs.replica_pods import gang_gated
from netsched.jobs.stale_pins import pinned_node
from netsched.operator.pod_view import PodView

WATCHED = ("nodes", "pods")
JobKey = tuple[str, str, str]  # namespace, GPUJob name, GPUJob uid
GangKey = tuple[str, str, str]  # a pod gang's kind, namespace and name (netsched.jobs.pod_gangs.GangRef)


@dataclass(frozen=True)
class GangMember:
    """A live pod of a pod gang: gated by netsched (then the pod itself, to read and release), or
    released already."""
    name: str
    pod: KubeObject | None  # None once released: only counted
    pinned: tuple[str, str] | None = None  # released into this domain (node label, value): its peers follow
    node: str | None = None  # released: the node it is bound to, else the one its gang's placement pinned


@dataclass(frozen=True)
class Indices:
    """What gang admission reads, taken from the ClusterIndex for one tick."""
    used: dict[str, Resources]  # node -> requests of the live pods bound there
    pending: list[Resources]  # requests of each released pod not yet bound and pinned nowhere
    job_pods: Mapping[JobKey, list[PodView]]  # each GPUJob's replica pods
    # "namespace/pod" -> the active PackingPlans placing it; "namespace/controller uid" -> those moving a
    # pod of that controller
    planned: Mapping[str, Collection[str]] = field(default_factory=dict)
    # node -> GPUs active PackingPlans hold there for their pods (netsched.jobs.plan_room)
    plan_room: Mapping[str, int] = field(default_factory=dict)
    # node -> requests of the released pods not yet bound that their gang's placement pinned there
    pinned: dict[str, Resources] = field(default_factory=dict)

    def taken(self, also: Mapping[str, Resources] | None = None) -> dict[str, Resources]:
        """What each node's room has given: its bound pods, the pods pinned to it on their way, and `also`.
        Admission counts a pinned pod on its pin, not wherever it would fit first: another gang
        counted on the wrong node would be released into room that is already spoken for."""
        return add_usage(self.used, self.pinned, also or {})

    def pods_of(self, key: JobKey) -> list[PodView]:
        return list(self.job_pods.get(key, ()))

    def plan_of(self, job: GPUJob) -> str | None:
        """The active PackingPlan that places a pod of `job`, or moves one (it releases the replacement to
        the node the move goes to), if one does."""
        for plan in self.planned.get(f"{job.namespace}/{job.uid}", ()):
            return plan
        for pod in self.pods_of(job.key):
            for plan in self.planned.get(f"{job.namespace}/{pod.name}", ()):
                return plan
        return None


@dataclass(frozen=True)
class _Pod:
    node: str | None  # bound and live: counts against this node's room
    requests: Resources
    pending: bool  # released (no gate), not bound, not finished: counts before it is bound
    replica: tuple[JobKey, PodView] | None  # the GPUJob it is a replica of, and how it looks
    member: tuple[GangKey, GangMember] | None = None  # the pod gang it is a live member of
    stray: KubeObject | None = None  # the pod, when netsched's gang gate holds it but it is in no gang
    pinned: str | None = None  # pending: the node its gang's placement pinned it to, its room held there


class ClusterIndex:
    def __init__(self, on_room_change: Callable[[], object] = lambda: None, topology: Topology = DEFAULT,
                 dra_gpu_drivers: tuple[str, ...] = ()):
        self.on_room_change = on_room_change
        self.topology = topology  # its levels' labels are what a released gang's pods are pinned by
        self.dra = dra.DraGpus(dra_gpu_drivers)
        self.kinds = (*WATCHED, *dra.KINDS) if dra_gpu_drivers else WATCHED  # what to watch into this index
        self._lock = threading.Lock()
        self._bare: dict[str, NodeRoom] = {}  # each node's room as its object says, before DRA's GPUs
        self._rooms: dict[str, NodeRoom] = {}
        self._pods: dict[str, _Pod] = {}
        self._bodies: dict[str, KubeObject] = {}  # uid -> every pod not deleted, finished ones too
        self._on_node: dict[str, dict[str, Resources]] = defaultdict(dict)  # node -> uid -> requests
        self._used: dict[str, Resources] = {}  # node -> the sum of _on_node[node]
        self._on_pin: dict[str, dict[str, Resources]] = defaultdict(dict)  # node -> uid -> requests
        self._pinned: dict[str, Resources] = {}  # node -> the sum of _on_pin[node]
        self._jobs: dict[JobKey, dict[str, PodView]] = defaultdict(dict)
        self._gangs: dict[GangKey, dict[str, GangMember]] = defaultdict(dict)
        self._strays: dict[str, KubeObject] = {}
        self._synced: set[str] = set()

    # ---- readers (kopf's handler threads) ------------------------------------------
    @property
    def synced(self) -> bool:
        """Both kinds listed: before that, a job's pods may look missing and be made again."""
        return self._synced.issuperset(WATCHED)

    def rooms(self) -> list[NodeRoom]:
        with self._lock:
            return list(self._rooms.values())

    def pods(self) -> list[KubeObject]:
        """Every pod not deleted, finished ones too; the dicts are shared: read them, do not change them."""
        with self._lock:
            return list(self._bodies.values())

    def indices(self, planned: Mapping[str, Collection[str]]) -> Indices:
        with self._lock:
            return Indices(dict(self._used),
                           [p.requests for p in self._pods.values() if p.pending and p.pinned is None],
                           {k: list(v.values()) for k, v in self._jobs.items()}, planned,
                           pinned=dict(self._pinned))

    def pod_gangs(self) -> dict[GangKey, list[GangMember]]:
        """Each pod gang with a live member, and its live members."""
        with self._lock:
            return {k: list(v.values()) for k, v in self._gangs.items()}

    def strays(self) -> list[KubeObject]:
        """Live pods netsched's gang gate holds that are in no gang and have no controller: their
        workload was deleted with propagationPolicy=Orphan (its pods keep running as pods of their own,
        but no gang is left to release them), or the gate was written on a pod of no gang."""
        with self._lock:
            return list(self._strays.values())

    # ---- the watches' sink ---------------------------------------------------------
    def replace(self, kind: str, objects: list[KubeObject]) -> None:
        if kind == "nodes":
            with self._lock:
                self._bare = {r.name: r for r in map(node_room, objects)}
                self._rooms = {name: self._with_dra(r) for name, r in self._bare.items()}
            self.on_room_change()
        elif kind in dra.KINDS:
            with self._lock:
                changed = self._dra_changed(self.dra.replace(kind, objects))
            if changed:
                self.on_room_change()
            return  # optional: the index is synced without them
        else:
            with self._lock:
                for uid in list(self._pods):
                    self._forget(uid)
                self._bodies.clear()
                for o in objects:
                    self._apply_pod("ADDED", o)
        self._synced.add(kind)

    def apply(self, kind: str, event_type: str, obj: KubeObject) -> None:
        if kind == "nodes":
            if self._apply_node(event_type, obj):
                self.on_room_change()
        elif kind in dra.KINDS:
            with self._lock:
                changed = self._dra_changed(self.dra.apply(kind, event_type, obj))
            if changed:
                self.on_room_change()
        else:
            with self._lock:
                self._apply_pod(event_type, obj)

    def heard(self, kind: str) -> None:
        pass  # a tick reads what it has: a GPUJob's own status says when its pods do not show up

    def absent(self, kind: str) -> None:
        if kind not in dra.KINDS:
            raise ValueError(f"{kind} are always served")
        with self._lock:  # a cluster without DRA: no DRA GPUs
            changed = self._dra_changed(self.dra.clear(kind))
        if changed:
            self.on_room_change()

    # ---- under the lock ------------------------------------------------------------
    def _apply_node(self, event_type: str, node: KubeObject) -> bool:
        name = node["metadata"]["name"]
        with self._lock:
            if event_type == "DELETED":
                self._bare.pop(name, None)
                return self._rooms.pop(name, None) is not None
            bare = node_room(node)
            if self._bare.get(name) == bare:
                return False  # a heartbeat
            self._bare[name] = bare
            self._rooms[name] = self._with_dra(bare)
            return True

    def _with_dra(self, room: NodeRoom) -> NodeRoom:
        return with_dra_gpus(room, self.dra) if self.dra.drivers else room

    def _dra_changed(self, nodes: set[str]) -> bool:
        changed = False
        for name in nodes & self._bare.keys():
            room = self._with_dra(self._bare[name])
            changed |= self._rooms.get(name) != room
            self._rooms[name] = room
        return changed

    def _apply_pod(self, event_type: str, pod: KubeObject) -> None:
        uid = pod["metadata"].get("uid", "")
        self._forget(uid)
        self._bodies.pop(uid, None)
        if event_type != "DELETED":
            pod["metadata"].pop("managedFields", None)
            self._bodies[uid] = pod
            facts = _facts(pod, self.topology)
            if facts is not None:
                self._remember(uid, facts)

    def _remember(self, uid: str, p: _Pod) -> None:
        self._pods[uid] = p
        if p.node is not None:
            self._on_node[p.node][uid] = p.requests
            _sum(self._on_node, self._used, p.node)
        if p.pinned is not None:
            self._on_pin[p.pinned][uid] = p.requests
            _sum(self._on_pin, self._pinned, p.pinned)
        if p.replica is not None:
            job, view = p.replica
            self._jobs[job][uid] = view
        if p.member is not None:
            gang, member = p.member
            self._gangs[gang][uid] = member
        if p.stray is not None:
            self._strays[uid] = p.stray

    def _forget(self, uid: str) -> None:
        p = self._pods.pop(uid, None)
        if p is None:
            return
        if p.node is not None:
            self._on_node[p.node].pop(uid, None)
            _sum(self._on_node, self._used, p.node)
        if p.pinned is not None:
            self._on_pin[p.pinned].pop(uid, None)
            _sum(self._on_pin, self._pinned, p.pinned)
        if p.replica is not None:
            job = p.replica[0]
            self._jobs[job].pop(uid, None)
            if not self._jobs[job]:
                del self._jobs[job]
        if p.member is not None:
            gang = p.member[0]
            self._gangs[gang].pop(uid, None)
            if not self._gangs[gang]:
                del self._gangs[gang]
        self._strays.pop(uid, None)


def _sum(by_node: dict[str, dict[str, Resources]], sums: dict[str, Resources], node: str) -> None:
    """sums[node] = the requests of by_node[node] added up (both gone when it holds no pod)."""
    pods = by_node[node]
    if not pods:
        del by_node[node]
        sums.pop(node, None)
        return
    total: Resources = defaultdict(float)
    for requests in pods.values():
        for k, v in requests.items():
            total[k] += v
    sums[node] = dict(total)


def _facts(pod: KubeObject, topology: Topology) -> _Pod | None:
    """What of a pod the operator counts, or None when nothing (finished and not a replica)."""
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    phase, deleting = status.get("phase", PodPhase.PENDING), bool(meta.get("deletionTimestamp"))
    node = spec.get("nodeName")
    bound = node if node and phase not in DONE and not deleting else None
    pending = (not node and not spec.get("schedulingGates") and phase == PodPhase.PENDING and not deleting)
    replica = _replica(pod)
    member = None if phase in DONE or deleting else _member(pod, topology)
    stray = pod if (member is None and replica is None and phase not in DONE and not deleting
                    and _held_without_gang(pod)) else None
    if bound is None and not pending and replica is None and member is None and stray is None:
        return None
    pin = pinned_node(pod) if pending else None
    return _Pod(bound, pod_requests(spec) if bound or pending else {}, pending, replica, member, stray, pin)


def _member(pod: KubeObject, topology: Topology) -> tuple[GangKey, GangMember] | None:
    """The pod gang a live pod belongs to, and the pod itself while netsched's gate holds it."""
    ref = gang_of(pod)
    if ref is None:
        return None
    if gang_gated(pod):
        return (ref.kind, ref.namespace, ref.name), GangMember(pod["metadata"]["name"], pod)
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    # nearest first, as before a user's own wider selector (a zone) could be taken for the pin (a rack);
    # the packer pins a gang within one node to its node
    labels = [topology.label_of(name) for name in topology.limits]
    pinned = next(((label, selector[label]) for label in labels if label in selector), None)
    node = (pod.get("spec") or {}).get("nodeName") or pinned_node(pod)
    return (ref.kind, ref.namespace, ref.name), GangMember(pod["metadata"]["name"], None, pinned, node)


def _held_without_gang(pod: KubeObject) -> bool:
    """Gated by netsched's gang gate, with no controller, and not a GPUJob's replica: no gang and no
    workload will ever release it (call it only for pods that are in no gang)."""
    meta = pod["metadata"]
    labels = meta.get("labels") or {}
    held = gang_gated(pod)
    owned = any(ref.get("controller") for ref in meta.get("ownerReferences") or ())
    return held and not owned and not (JOB_LABEL in labels and REPLICA_LABEL in labels)


def _replica(pod: KubeObject) -> tuple[JobKey, PodView] | None:
    """The GPUJob a replica pod belongs to, and its view; None for any other pod (one that merely
    carries the job label, as a user's own gang may, is not a replica)."""
    meta = pod["metadata"]
    labels = meta.get("labels") or {}
    if JOB_LABEL not in labels or REPLICA_LABEL not in labels:
        return None
    owner = next((o.get("uid") for o in meta.get("ownerReferences") or () if o.get("kind") == GPUJOB), None)
    if owner is None:
        return None
    try:
        view = PodView.of(pod)
    except ValueError:  # a replica label that is not a number: not a pod the operator made
        return None
    return (meta.get("namespace", "default"), labels[JOB_LABEL], owner), view
