"""The extender's in-memory view of the cluster, kept fresh by watchers.

Requests never do I/O: they read a `Snapshot` (netsched.extender.snapshot) taken under a
short lock. GPUs, CPU and memory requested per node and where each job's pods sit are
updated in place from pod events; a snapshot copies what it needs.

When the filter hands kube-scheduler exactly one node, the extender *assumes* the
pod lands there (as kube-scheduler's own cache does) until the watch confirms the
binding or `assume_ttl` passes, so the next replica of a job, scheduled
milliseconds later, already sees its peer.

When a job's first pod is placed (assumed or bound), the rest of the room on its node is *held*
for the job's other replicas for `hold_ttl` seconds (or until they are all there): snapshots for
other pods show those GPUs as held, so scoring steers single pods and other jobs elsewhere
(netsched.extender.plugins.gang_hold). The job's size comes from its pods' annotations
(`job_size`); unknown, the hold is all the node's free room. A hold never outlives its TTL, so no
node is blocked for long by a job that never sends its other replicas.

Active PackingPlans are kept too, as the `Pins` the filter enforces.

Node changes a request reads (a new or deleted node, labels, allocatable) need a new node table.
Once `start_publisher` runs, a thread builds it off the request path, with what is derived from it
(GPU capability rows, encoded host entries), coalescing a burst of changes into one build, and
swaps it in; until then requests read the previous table. A fresh LIST of nodes is published by
the watch thread before the cache counts as synced. Without the publisher (tests, tools),
the next snapshot builds it. At 5,000 nodes a build with what derives from it takes some 20 ms,
which the request that found the table out of date used to pay.

Age is the time since the apiserver was last heard from on the slowest of the
watches; `Snapshot.stale` says it is past `max_age`, and the extender then answers with
its documented fallback instead of stale data.

Nodes and pods are required: nothing is decided without them. PackingPlans are optional: where
their CRD is not installed (`absent`), there can be no plan to enforce, so the extender serves
without pins rather than not at all, and takes the plans up when the CRD appears. Once they
were synced, a plan watch that goes silent makes the cache stale like any other: a pin must
never be dropped because its watch broke.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from netsched.api.labels import (
    GPU_LABELS,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    JOB_GPUS,
    JOB_LABEL,
    RACK_LABEL,
    REPLICAS,
    ZONE_LABEL,
    whole_number,
)
from netsched.api.objects import KubeObject
from netsched.api.plans import is_active
from netsched.api.pods import DONE
from netsched.api.resources import pod_requests, quantities
from netsched.extender.pins import Pins
from netsched.extender.protocol import BadRequest, pod_gpus
from netsched.extender.snapshot import NodeFacts, NodeTable, Snapshot

WATCHED = ("nodes", "pods", "packingplans")
REQUIRED = ("nodes", "pods")  # the others may be `absent` (their resource is not served)
PUBLISH_AFTER = 0.2  # seconds the publisher waits after a node change for more before building
HOLD_SECONDS = 15.0  # how long a job's first node keeps its room for the job's other replicas
JOB_SIZES = 10_000  # jobs whose size the cache remembers (the newest)


@dataclass(frozen=True)
class Placement:
    """A pod bound (or assumed bound) to a node, with what it requests."""

    job: str | None  # "<namespace>/<job>" or None
    node: str
    gpus: int
    cpu: float = 0.0  # cores
    memory: float = 0.0  # bytes


@dataclass
class Hold:
    """Room on a job's first node kept for its other replicas until `until`."""

    node: str
    until: float
    size: int | None  # GPUs of the whole job; None: unknown, hold all the node's free room


def job_size(annotations: Mapping[str, str], gpus: int) -> int | None:
    """GPUs of a pod's whole job from its annotations: `netsched.io/job-gpus`, else
    `netsched.io/replicas` times the pod's GPUs; None when neither is a positive whole number."""
    for key, times in ((JOB_GPUS, 1), (REPLICAS, gpus)):
        value = whole_number(annotations.get(key))
        if value:
            return value * times
    return None


class ClusterCache:
    def __init__(self, max_age: float = 30.0, assume_ttl: float = 30.0,
                 clock: Callable[[], float] = time.monotonic, hold_ttl: float = HOLD_SECONDS):
        self.max_age = max_age
        self.assume_ttl = assume_ttl
        self.hold_ttl = hold_ttl
        self.clock = clock
        self._lock = threading.Lock()
        self._nodes: dict[str, NodeFacts] = {}
        self._table: NodeTable | None = None
        self._outdated = True  # the nodes changed since _table was built
        self._changed = threading.Event()  # wakes the publisher
        self._publisher: threading.Thread | None = None
        self._building = threading.Lock()  # one build at a time: a second waits, then finds it done
        self._used: np.ndarray = np.zeros(0, dtype=np.int32)  # GPUs held per table index
        self._requested = np.zeros((2, 0))  # CPU cores and memory bytes requested per table index
        self._pods: dict[str, Placement] = {}  # pod uid -> placement (bound or assumed)
        self._expiry: dict[str, float] = {}  # uid of an assumed pod -> when to forget it
        self._jobs: dict[str, Counter[str]] = {}  # job -> nodes holding its pods, with counts
        self._gpus: dict[str, Counter[str]] = {}  # job -> GPUs its pods hold per node
        self._sizes: OrderedDict[str, int] = OrderedDict()  # job -> GPUs of the whole job, from its pods
        self._holds: dict[str, Hold] = {}  # job -> room held on its first node
        self._plans: dict[str, KubeObject] = {}  # active PackingPlans by name
        self._pins: Pins | None = Pins()
        self._heard: dict[str, float] = {}
        self._synced: set[str] = set()
        self._absent: set[str] = set()  # optional kinds the apiserver does not serve

    def wait_synced(self, timeout: float) -> bool:
        """Wait until every required kind is listed (and the node table published), at most `timeout` s."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.snapshot().stale:
                return True
            time.sleep(0.05)
        return False

    # ---- writers (watch threads, netsched.api.watch) ----------------------------
    def heard(self, kind: str) -> None:
        self._heard[kind] = self.clock()

    def replace(self, kind: str, objects: list[KubeObject]) -> None:
        """A fresh LIST of nodes or pods: replaces everything known of that kind."""
        with self._lock:
            if kind == "nodes":
                self._nodes = {o["metadata"]["name"]: _node_facts(o) for o in objects}
                self._node_changed()
            elif kind == "packingplans":
                self._plans = {o["metadata"]["name"]: o for o in objects if is_active(o)}
                self._pins = None
            else:
                for uid in [u for u in self._pods if u not in self._expiry]:
                    self._forget(uid)
                for o in objects:  # a LIST says where pods are, not which just landed: no holds
                    self._apply_pod("ADDED", o, hold=False)
        if kind == "nodes":
            self.publish()  # so that once the cache says it is synced, requests see the listed nodes
        with self._lock:
            self._synced.add(kind)
            self._absent.discard(kind)
        self.heard(kind)

    def absent(self, kind: str) -> None:
        """The apiserver does not serve `kind` (404: its CRD is not installed). Only an optional
        kind may be absent: there are then none of it, and the cache is synced without it."""
        if kind in REQUIRED:
            raise ValueError(f"{kind} are required; they cannot be absent")
        with self._lock:
            self._absent.add(kind)
            self._synced.discard(kind)
            self._heard.pop(kind, None)
            if kind == "packingplans" and self._plans:
                self._plans, self._pins = {}, None

    def sources(self) -> dict[str, str]:
        """Each watched kind's state: synced, absent (not served), or waiting (not listed yet)."""
        return {k: "synced" if k in self._synced else "absent" if k in self._absent else "waiting"
                for k in WATCHED}

    def apply(self, kind: str, event_type: str, obj: KubeObject) -> None:
        with self._lock:
            if kind == "nodes":
                self._apply_node(event_type, obj)
            elif kind == "packingplans":
                self._apply_plan(event_type, obj)
            else:
                self._apply_pod(event_type, obj)
        self.heard(kind)

    def assume(self, uid: str, placement: Placement) -> None:
        with self._lock:
            if uid in self._pods and uid not in self._expiry:
                return  # already bound: the watch knows better
            self._forget(uid)
            self._remember(uid, placement)
            self._expiry[uid] = self.clock() + self.assume_ttl

    def unassume(self, uid: str) -> None:
        """Forget an assumed placement of a pod that is being scheduled again: kube-scheduler did not
        bind it there, and its own GPUs must not count against the nodes it is choosing among."""
        with self._lock:
            if uid in self._expiry:
                self._forget(uid)

    def _apply_node(self, event_type: str, obj: KubeObject) -> None:
        name = obj["metadata"]["name"]
        if event_type == "DELETED":
            self._nodes.pop(name, None)
            self._node_changed()
            return
        facts = _node_facts(obj)
        if self._nodes.get(name) != facts:
            self._nodes[name] = facts
            self._node_changed()

    def _node_changed(self) -> None:
        self._outdated = True
        self._changed.set()

    # ---- the node table (publisher) ---------------------------------------------
    def start_publisher(self) -> None:
        """From now on new node tables are built on a thread of their own, not by requests."""
        if self._publisher is None:
            self._publisher = threading.Thread(target=self._publish_loop, name="node-table", daemon=True)
            self._publisher.start()

    def _publish_loop(self) -> None:
        while True:
            self._changed.wait()
            time.sleep(PUBLISH_AFTER)  # a burst of node changes (a relist, a relabelling) makes one table
            self._changed.clear()
            self.publish()

    def publish(self) -> None:
        """Build a node table from the nodes as they are now, with what derives from it, and swap it in."""
        with self._building:
            with self._lock:
                if not self._outdated:
                    return
                self._outdated = False
                nodes = dict(self._nodes)
            table = NodeTable.build(nodes)
            table.gpu_capability, table.priority_heads  # noqa: B018 - derived now, not by the first request
            with self._lock:
                self._install(table)

    def _install(self, table: NodeTable) -> None:
        """Make `table` the one requests read, with GPUs and requests counted per its indices."""
        self._table = table
        self._used = np.zeros(len(table.names), dtype=np.int32)
        self._requested = np.zeros((2, len(table.names)))
        for p in self._pods.values():
            if p.node in table.index:
                i = table.index[p.node]
                self._used[i] += p.gpus
                self._requested[:, i] += (p.cpu, p.memory)

    def _apply_plan(self, event_type: str, obj: KubeObject) -> None:
        name = obj["metadata"]["name"]
        if event_type != "DELETED" and is_active(obj):
            self._plans[name] = obj
        elif self._plans.pop(name, None) is None:
            return
        self._pins = None

    def _apply_pod(self, event_type: str, obj: KubeObject, hold: bool = True) -> None:
        uid = obj["metadata"].get("uid", "")
        if event_type != "DELETED":
            self._learn_size(obj)
        placement = None if event_type == "DELETED" else _placement(obj)
        if placement is None and event_type != "DELETED" and uid in self._expiry:
            return  # an assumed pod whose binding the watch has not shown yet
        old = self._pods.get(uid)
        if old and placement and (old.job, old.node) == (placement.job, placement.node):
            hold = False  # the binding of an assumed pod, or a status update: it landed before
        self._forget(uid)
        if event_type == "DELETED" and old and old.job and old.job not in self._jobs:
            self._holds.pop(old.job, None)  # no pod of the job is left to send its other replicas
        if placement is not None:
            self._remember(uid, placement, hold)

    def _learn_size(self, pod: KubeObject) -> None:
        """Remember the size of a labelled pod's job (pending pods tell it before any is placed)."""
        meta = pod["metadata"]
        job = (meta.get("labels") or {}).get(JOB_LABEL)
        if not job:
            return
        try:
            gpus = pod_gpus(pod.get("spec") or {})
        except BadRequest:
            return
        size = job_size(meta.get("annotations") or {}, gpus)
        if size is not None:
            key = f"{meta.get('namespace', 'default')}/{job}"
            self._sizes[key] = size
            self._sizes.move_to_end(key)
            while len(self._sizes) > JOB_SIZES:
                self._sizes.popitem(last=False)

    def _remember(self, uid: str, p: Placement, hold: bool = True) -> None:
        if hold and p.job and p.job not in self._jobs:  # the job's first pod: hold its node's room
            self._holds[p.job] = Hold(p.node, self.clock() + self.hold_ttl, self._sizes.get(p.job))
        self._pods[uid] = p
        self._count(p, +1)

    def _forget(self, uid: str) -> None:
        self._expiry.pop(uid, None)
        p = self._pods.pop(uid, None)
        if p is not None:
            self._count(p, -1)

    def _count(self, p: Placement, sign: int) -> None:
        if self._table is not None and p.node in self._table.index:
            i = self._table.index[p.node]
            self._used[i] += sign * p.gpus
            self._requested[:, i] += (sign * p.cpu, sign * p.memory)
        if p.job:
            nodes = self._jobs.setdefault(p.job, Counter())
            gpus = self._gpus.setdefault(p.job, Counter())
            nodes[p.node] += sign
            gpus[p.node] += sign * p.gpus
            if nodes[p.node] <= 0:
                del nodes[p.node]
                gpus.pop(p.node, None)
            if not nodes:  # its hold stays until it expires: the binding of an assumed pod forgets it first
                del self._jobs[p.job], self._gpus[p.job]

    # ---- readers (requests) ----------------------------------------------------
    def snapshot(self, namespace: str = "", job: str | None = None) -> Snapshot:
        now = self.clock()
        if self._table is None or (self._outdated and self._publisher is None):
            self.publish()
        with self._lock:
            self._drop_expired(now)
            table = self._table
            assert table is not None  # published above
            free = np.maximum(table.allocatable - self._used, 0)
            requested = self._requested.copy()
            nodes = self._jobs.get(f"{namespace}/{job}") if job else None
            peers = tuple(sorted(nodes.elements())) if nodes else ()
            if self._pins is None:
                self._pins = Pins.of(self._plans.values())
            pins = self._pins
            held, holders = self._held(table, free, f"{namespace}/{job}" if job else None)
        age = self.age(now)
        synced = self._synced | self._absent >= set(WATCHED)
        return Snapshot(table, free, peers, age, not synced or age > self.max_age, synced, pins, requested,
                        held=held, holders=holders)

    def _held(self, table: NodeTable, free: np.ndarray,
              job: str | None) -> tuple[np.ndarray | None, dict[int, str]]:
        """GPUs held per table index for jobs other than `job`, and which job holds each node."""
        held: np.ndarray | None = None
        holders: dict[int, str] = {}
        for other, hold in self._holds.items():
            i = table.index.get(hold.node)
            if other == job or i is None:
                continue
            there = self._gpus.get(other, Counter())[hold.node]
            want = free[i] if hold.size is None else min(max(hold.size - there, 0), free[i])
            if want > 0:
                held = np.zeros(len(free), dtype=free.dtype) if held is None else held
                held[i] += want
                holders.setdefault(i, other)
        return held, holders

    def age(self, now: float | None = None) -> float:
        now = self.clock() if now is None else now
        kinds = [k for k in WATCHED if k not in self._absent]
        if not all(k in self._heard for k in kinds):
            return float("inf")
        return now - min(self._heard[k] for k in kinds)

    def _drop_expired(self, now: float) -> None:
        for uid in [u for u, expiry in self._expiry.items() if expiry < now]:
            self._forget(uid)
        for job in [j for j, hold in self._holds.items() if hold.until < now]:
            del self._holds[job]


def essentials(kind: str, obj: KubeObject) -> KubeObject:
    """The parts of a watched object this cache reads (and the explanation writer's trigger, a pod's uid
    and node): applying them leaves the cache as applying the whole object would. The watch process
    (netsched.extender.watcher) relays these, and only when they change, so heartbeats, lease renewals and
    status conditions never reach the serving process."""
    meta = obj.get("metadata") or {}
    if kind == "nodes":
        allocatable = (obj.get("status") or {}).get("allocatable")
        return {"metadata": {"name": meta.get("name"), "labels": meta.get("labels")},
                "status": {"allocatable": allocatable}}
    if kind == "pods":
        spec = obj.get("spec") or {}
        containers = spec.get("containers")
        kept = ("name", "namespace", "uid", "labels", "annotations")
        return {"metadata": {k: meta[k] for k in kept if k in meta},
                "spec": {"nodeName": spec.get("nodeName"),
                         "containers": [{"name": c.get("name"), "resources": c.get("resources")}
                                        if isinstance(c, dict) else c for c in containers]
                         if isinstance(containers, list) else containers},
                "status": {"phase": (obj.get("status") or {}).get("phase")}}
    return obj  # PackingPlans: few, seldom changed, read whole


def _node_facts(obj: KubeObject) -> NodeFacts:
    labels = obj["metadata"].get("labels") or {}
    allocatable = (obj.get("status") or {}).get("allocatable") or {}
    try:
        gpus = int(str(allocatable.get(GPU_RESOURCE, "0")))
    except ValueError:
        gpus = 0  # a malformed quantity: treat the node as having no GPUs
    cpu, memory = _allocatable(allocatable)
    return {
        "zone": labels.get(ZONE_LABEL),
        "rack": labels.get(RACK_LABEL),
        "gpus": gpus,
        "gpu_product": labels.get(GPU_PRODUCT_LABEL),
        "gpu_labels": {k: v for k, v in labels.items() if k in GPU_LABELS},
        "cpu": cpu,
        "memory": memory,
    }


def _allocatable(allocatable: dict[str, str]) -> tuple[float, float]:
    try:
        return _cpu_memory(quantities({k: v for k, v in allocatable.items() if k in ("cpu", "memory")}))
    except (ValueError, TypeError):
        return 0.0, 0.0  # a malformed quantity: the node's load stays unknown


def _cpu_memory(resources: Mapping[str, float]) -> tuple[float, float]:
    return resources.get("cpu", 0.0), resources.get("memory", 0.0)


def _requests(spec: KubeObject) -> tuple[float, float]:
    """CPU cores and memory bytes the pod requests; none for quantities the apiserver would refuse."""
    try:
        return _cpu_memory(pod_requests(spec))
    except (ValueError, TypeError, AttributeError):
        return 0.0, 0.0


def _placement(pod: KubeObject) -> Placement | None:
    """What a bound, unfinished pod holds; None for anything else."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    node = spec.get("nodeName")
    if not node or status.get("phase") in DONE:
        return None
    meta = pod["metadata"]
    job = (meta.get("labels") or {}).get(JOB_LABEL)
    try:
        gpus = pod_gpus(spec)
    except BadRequest:
        gpus = 0  # the apiserver validates quantities; be safe anyway
    job_key = f"{meta.get('namespace', 'default')}/{job}" if job else None
    return Placement(job_key, node, gpus, *_requests(spec))
