"""The extender's read model of the cluster, fed by the watches.

Requests never do I/O: they read a `Snapshot` (netsched.extender.snapshot) taken under a
short lock. GPUs, CPU and memory requested per node and where each job's pods sit are
updated in place from pod events; a snapshot copies what it needs, and adds what the request
path reserved (netsched.extender.reservations: assumed placements), which the watch confirms or
ends: a binding ends a pod's assumption. The room held for a job's other replicas follows from where
its pods are and when they were bound (netsched.extender.holds), so every replica, and a replica that
has just started, holds the same room until the same moment: a pod's binding time is the one the
API server wrote on it (`bound_at`), converted once to this model's clock.

Active PackingPlans are kept too, as the `Pins` the filter enforces. With DRA drivers configured, their
ResourceSlices and ResourceClaims (netsched.api.dra) make the GPUs of the nodes they publish: a node's
facts are its object as DraGpus shows it, worked out again when its slices or the claims on it change.

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

import math
import threading
import time
from collections.abc import Callable, Collection, Mapping

import numpy as np

from netsched.api import dra
from netsched.api.events import parse_rfc3339
from netsched.api.labels import (
    GPU_LABELS,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    JOB_LABEL,
)
from netsched.api.objects import KubeObject
from netsched.api.plans import is_active
from netsched.api.pods import DONE
from netsched.api.resources import pod_requests, quantities
from netsched.api.topology import DEFAULT, Topology
from netsched.extender.holds import HOLD_SECONDS, Hold, JobPods
from netsched.extender.pins import Pins
from netsched.extender.plugins import job_size
from netsched.extender.protocol import BadRequest, pod_gpus
from netsched.extender.reservations import Placement, Reservations, Reserved, count_by_node
from netsched.extender.snapshot import NodeFacts, NodeTable, Snapshot
from netsched.jobs.stale_pins import released_pin
from netsched.telemetry.store import TelemetryStore

WATCHED = ("nodes", "pods", "packingplans", *dra.KINDS)
REQUIRED = ("nodes", "pods")  # the others may be `absent` (their resource is not served, or not asked for)
PUBLISH_AFTER = 0.2  # seconds the publisher waits after a node change for more before building


class ReadModel:
    def __init__(self, max_age: float = 30.0, assume_ttl: float = 30.0,
                 clock: Callable[[], float] = time.monotonic, hold_ttl: float = HOLD_SECONDS,
                 topology: Topology = DEFAULT, wall: Callable[[], float] = time.time,
                 dra_gpu_drivers: tuple[str, ...] = ()):
        self.max_age = max_age
        self.topology = topology
        self.clock = clock
        self.wall = wall  # the clock the API server's timestamps are read against
        self.reservations = Reservations(clock, assume_ttl)
        self.jobs = JobPods(hold_ttl)
        self._lock = threading.Lock()
        self._nodes: dict[str, NodeFacts] = {}
        # with DRA, each node's essentials: its facts are made again from them when its DRA GPUs change
        self._raw: dict[str, KubeObject] = {}
        self.dra = dra.DraGpus(dra_gpu_drivers)
        self._table: NodeTable | None = None
        self._outdated = True  # the nodes changed since _table was built
        self._changed = threading.Event()  # wakes the publisher
        self._publisher: threading.Thread | None = None
        self._building = threading.Lock()  # one build at a time: a second waits, then finds it done
        self._used: np.ndarray = np.zeros(0, dtype=np.int32)  # GPUs of bound pods per table index
        self._requested = np.zeros((2, 0))  # CPU cores and memory bytes requested per table index
        self._pods: dict[str, Placement] = {}  # pod uid -> placement of the bound pods
        self._plans: dict[str, KubeObject] = {}  # active PackingPlans by name
        self._pins: Pins | None = Pins()
        self._heard: dict[str, float] = {}
        self._synced: set[str] = set()
        self._absent: set[str] = set()  # optional kinds the apiserver does not serve
        # what the watcher lists and watches: DRA's slices and claims only when a driver is configured
        self.watched = WATCHED if dra_gpu_drivers else tuple(k for k in WATCHED if k not in dra.KINDS)
        # What else derives from a node table (the telemetry's domain aggregates): built with it
        self.on_table: list[Callable[[NodeTable], object]] = []

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
                self._raw = {o["metadata"]["name"]: o for o in objects} if self.dra.drivers else {}
                self._nodes = {o["metadata"]["name"]: self._facts(o) for o in objects}
                self._node_changed()
            elif kind in dra.KINDS:
                self._dra_changed(self.dra.replace(kind, objects))
            elif kind == "packingplans":
                self._plans = {o["metadata"]["name"]: o for o in objects if is_active(o)}
                self._pins = None
            else:
                self.jobs = JobPods(self.jobs.hold_ttl)
                for uid in list(self._pods):
                    self._forget(uid)
                for o in objects:
                    self._apply_pod("ADDED", o)
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
            if kind in dra.KINDS:
                self._dra_changed(self.dra.clear(kind))

    def sources(self) -> dict[str, str]:
        """Each watched kind's state: synced, absent (not served), or waiting (not listed yet)."""
        return {k: "synced" if k in self._synced else "absent" if k in self._absent else "waiting"
                for k in self.watched}

    def apply(self, kind: str, event_type: str, obj: KubeObject) -> None:
        with self._lock:
            if kind == "nodes":
                self._apply_node(event_type, obj)
            elif kind in dra.KINDS:
                self._dra_changed(self.dra.apply(kind, event_type, obj))
            elif kind == "packingplans":
                self._apply_plan(event_type, obj)
            else:
                self._apply_pod(event_type, obj)
        self.heard(kind)

    def _apply_node(self, event_type: str, obj: KubeObject) -> None:
        name = obj["metadata"]["name"]
        if event_type == "DELETED":
            self._nodes.pop(name, None)
            self._raw.pop(name, None)
            self._node_changed()
            return
        if self.dra.drivers:
            self._raw[name] = obj
        self._refresh(name, obj)

    def _refresh(self, name: str, node: KubeObject) -> None:
        facts = self._facts(node)
        if self._nodes.get(name) != facts:
            self._nodes[name] = facts
            self._node_changed()

    def _facts(self, node: KubeObject) -> NodeFacts:
        return _node_facts(self.dra.node(node) if self.dra.drivers else node, self.topology)

    def _dra_changed(self, nodes: set[str]) -> None:
        for name in nodes & self._raw.keys():
            self._refresh(name, self._raw[name])

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
            table = NodeTable.build(nodes, self.topology)
            table.gpu_capability, table.priority_heads  # noqa: B018 - derived now, not by the first request
            for derive in self.on_table:
                derive(table)
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

    def _apply_pod(self, event_type: str, obj: KubeObject) -> None:
        uid = obj["metadata"].get("uid", "")
        live = event_type != "DELETED" and (obj.get("status") or {}).get("phase") not in DONE
        self.jobs.sized(uid, *(_job_size(obj) if live else (None, None)))
        placement = _placement(obj, self._since(uid, obj)) if live else None
        ledger = self.reservations
        if placement is None and live and ledger.is_assumed(uid):
            return  # an assumed pod whose binding the watch has not shown yet
        self._forget(uid)
        ledger.forget(uid)
        if placement is not None:
            self._pods[uid] = placement
            self._count(uid, placement, +1)

    def _since(self, uid: str, pod: KubeObject) -> float:
        """When the pod was bound, on this model's clock: the API server's time converted by how far the
        wall clock has gone since (the same moment on every replica, whenever it reads the pod); a pod
        whose object gives no time counts as bound long ago: nothing says its room is still awaited."""
        node = (pod.get("spec") or {}).get("nodeName")
        old = self._pods.get(uid)
        if old is not None and old.node == node:
            return old.since  # a pod is bound once: an update (its status) keeps the time first read
        at = bound_at(pod) if node else None
        return -math.inf if at is None else self.clock() - (self.wall() - at)

    def settle(self, uid: str, placement: Placement | None) -> None:
        """A filter's post-step: pod `uid` is assumed at `placement` (its job's hold follows from it
        until a pod of the job is watched bound, netsched.extender.holds), or, with none, assumed
        nowhere. Under the read model's lock, so a watch event cannot come between; a pod the watch
        already shows bound is left as the watch has it."""
        with self._lock:
            if uid not in self._pods:
                self.reservations.settle(uid, placement)

    def _forget(self, uid: str) -> Placement | None:
        p = self._pods.pop(uid, None)
        if p is not None:
            self._count(uid, p, -1)
        return p

    def _count(self, uid: str, p: Placement, sign: int) -> None:
        if self._table is not None and p.node in self._table.index:
            i = self._table.index[p.node]
            self._used[i] += sign * p.gpus
            self._requested[:, i] += (sign * p.cpu, sign * p.memory)
        if p.job and sign > 0:
            self.jobs.bind(uid, p)
        elif p.job:
            self.jobs.unbind(uid, p.job)

    # ---- readers (requests) ----------------------------------------------------
    def snapshot(self, namespace: str = "", job: str | None = None, leave_out: str | Collection[str] = (),
                 telemetry: TelemetryStore | None = None) -> Snapshot:
        """The cluster for one request: bound pods and the ledger's reservations together, the nodes
        holding the pods of `namespace`/`job`, and the `telemetry` store as it is now; pod
        `leave_out`'s own assumption does not count (netsched.extender.reservations)."""
        now = self.clock()
        if self._table is None or (self._outdated and self._publisher is None):
            self.publish()
        key = f"{namespace}/{job}" if job else None
        with self._lock:
            leave = {leave_out} if isinstance(leave_out, str) else set(leave_out)
            reserved = self.reservations.reserved(now, leave)
            table = self._table
            assert table is not None  # published above
            used, requested = self._used, self._requested.copy()
            # a pod asked about while the watch shows it is on its way to a pinned node: not its own rival
            own = [p for uid in leave if (p := self._pods.get(uid)) is not None]
            if reserved.assumed or own:  # a copy only then: the read model's counts stay the watch's
                used = used.copy()
            for p, sign in [*((p, 1) for p in reserved.assumed), *((p, -1) for p in own)]:
                if p.node in table.index:
                    i = table.index[p.node]
                    used[i] += sign * p.gpus
                    requested[:, i] += (sign * p.cpu, sign * p.memory)
            free = np.maximum(table.allocatable - used, 0)
            nodes = self.jobs.nodes(key) + count_by_node(reserved.of_job(key))[0] if key else None
            peers = tuple(sorted(nodes.elements())) if nodes else ()
            if self._pins is None:
                self._pins = Pins.of(self._plans.values())
            pins = self._pins
            holds = self.jobs.holds(now, reserved.assumed)
            held, holders = self._held(table, free, key, holds, reserved) if holds else (None, {})
        age = self.age(now)
        synced = self._synced | self._absent >= set(self.watched)
        links = None if telemetry is None else telemetry.snapshot()
        return Snapshot(table, free, peers, age, not synced or age > self.max_age, synced, pins, requested,
                        telemetry=links, held=held, holders=holders)

    def _held(self, table: NodeTable, free: np.ndarray, job: str | None, holds: dict[str, Hold],
              reserved: Reserved) -> tuple[np.ndarray | None, dict[int, str]]:
        """GPUs held per table index for jobs other than `job`, and which job holds each node."""
        held: np.ndarray | None = None
        holders: dict[int, str] = {}
        for other, hold in holds.items():
            i = table.index.get(hold.node)
            if other == job or i is None:
                continue
            # what is still to come: a job whose other pods went to other nodes awaits no more room
            placed = self.jobs.gpus(other) + sum(p.gpus for p in reserved.of_job(other))
            want = free[i] if hold.size is None else min(max(hold.size - placed, 0), free[i])
            if want > 0:
                held = np.zeros(len(free), dtype=free.dtype) if held is None else held
                held[i] += want
                holders.setdefault(i, other)
        return held, holders

    def age(self, now: float | None = None) -> float:
        now = self.clock() if now is None else now
        kinds = [k for k in self.watched if k not in self._absent]
        if not all(k in self._heard for k in kinds):
            return float("inf")
        return now - min(self._heard[k] for k in kinds)


def essentials(kind: str, obj: KubeObject) -> KubeObject:
    """The parts of a watched object this cache reads (and the explanation writer's trigger, a pod's uid
    and node): applying them leaves the cache as applying the whole object would. The watch process
    (netsched.extender.watcher) relays these, and only when they change, so heartbeats, lease renewals and
    status conditions (but a pod's PodScheduled, its binding time) never reach the serving process."""
    meta = obj.get("metadata") or {}
    if kind == "nodes":
        allocatable = (obj.get("status") or {}).get("allocatable")
        return {"metadata": {"name": meta.get("name"), "labels": meta.get("labels")},
                "status": {"allocatable": allocatable}}
    if kind == "pods":
        spec = obj.get("spec") or {}
        containers = spec.get("containers")
        kept = ("name", "namespace", "uid", "labels", "annotations", "creationTimestamp")
        status = obj.get("status") or {}
        return {"metadata": {k: meta[k] for k in kept if k in meta},
                "spec": {"nodeName": spec.get("nodeName"),
                         "containers": [{"name": c.get("name"), "resources": c.get("resources")}
                                        if isinstance(c, dict) else c for c in containers]
                         if isinstance(containers, list) else containers},
                "status": {"phase": status.get("phase"),
                           "conditions": [c for c in status.get("conditions") or () if _scheduled(c)]}}
    if kind in dra.KINDS:
        return dra.essentials(kind, obj)
    return obj  # PackingPlans: few, seldom changed, read whole


def _node_facts(obj: KubeObject, topology: Topology) -> NodeFacts:
    labels = obj["metadata"].get("labels") or {}
    allocatable = (obj.get("status") or {}).get("allocatable") or {}
    try:
        gpus = int(str(allocatable.get(GPU_RESOURCE, "0")))
    except ValueError:
        gpus = 0  # a malformed quantity: treat the node as having no GPUs
    cpu, memory = _allocatable(allocatable)
    return {
        "levels": topology.path(labels),
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


def bound_at(pod: KubeObject) -> float | None:
    """When the pod was bound (Unix seconds), as the API server wrote it on the pod: its PodScheduled
    condition's last transition to True (the binding sets it), else its creation (a pod created
    with its node already named); None where the object has neither."""
    found = [c.get("lastTransitionTime") for c in (pod.get("status") or {}).get("conditions") or ()
             if _scheduled(c)]
    for stamp in (*found, pod["metadata"].get("creationTimestamp")):
        try:
            return parse_rfc3339(stamp).timestamp()
        except (AttributeError, TypeError, ValueError):
            continue  # absent or malformed: the next source
    return None


def _scheduled(condition: object) -> bool:
    return isinstance(condition, dict) and condition.get("type") == "PodScheduled" and \
        condition.get("status") == "True"


def _job_size(pod: KubeObject) -> tuple[str | None, int | None]:
    """A labelled pod's job and the size its annotations give that job (pending pods give it before
    any of the job is placed)."""
    meta = pod["metadata"]
    job = (meta.get("labels") or {}).get(JOB_LABEL)
    if not job:
        return None, None
    try:
        gpus = pod_gpus(pod.get("spec") or {})
    except BadRequest:
        return None, None
    return f"{meta.get('namespace', 'default')}/{job}", job_size(meta.get("annotations") or {}, gpus)


def _placement(pod: KubeObject, since: float) -> Placement | None:
    """What a bound, unfinished pod holds (bound at `since`), or a released one on its way to the node its
    gang's placement pinned it to (the room is spoken for there: every replica of the extender sees it
    through its watch, not only the one that chose the node); None for anything else."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    node = spec.get("nodeName") or released_pin(pod)
    if not node or status.get("phase") in DONE:
        return None
    meta = pod["metadata"]
    job = (meta.get("labels") or {}).get(JOB_LABEL)
    try:
        gpus = pod_gpus(spec)
    except BadRequest:
        gpus = 0  # the apiserver validates quantities; be safe anyway
    job_key = f"{meta.get('namespace', 'default')}/{job}" if job else None
    return Placement(job_key, node, gpus, *_requests(spec), since=since)
