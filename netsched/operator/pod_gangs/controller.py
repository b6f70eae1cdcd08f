"""The pod-gang controller: lifts netsched's gate from the pods of a Job, JobSet, LWS, Kubeflow job,
PodGroup (scheduler-plugins or native) or Kueue pod group (netsched.jobs.pod_gangs) when the whole gang
fits, all at once.

Its pods come gated (GANG_GATE, from their template or the admission webhook) and made by their own
controller; this only releases them. Every `interval` a pass reads the ClusterIndex: a gang whose
gated members are all there (its size from the workload, netsched.jobs.pod_gang) and fit, by the
rules and the admission gate GPUJobs use (netsched.operator.admission_gate), has each gated member's
nodeSelector tightened to the chosen domain (when its max-peer-distance asks for one) in the same
patch that lifts its gate. Never part of a gang: until all fit, all wait. A gang that cannot go on as
it is (bad `netsched.io/*` annotations, one that never fits the cluster, pods its controller cannot
make) is Blocked: it stays gated, with one Warning on its workload in the kind's own field names and
the GANG_BLOCKED note on its gated pods (the workload's status is its controller's to write). A gang
an active PackingPlan places, or whose moved member's replacement it is, is left to the plan, and the
room active plans hold counts as taken for every other gang. A gang that Kueue's topology-aware
scheduling places (netsched.jobs.kueue_topology) has netsched's gate lifted at once, nothing pinned,
and one Event saying so (pod_gangs.decision decides).
What it says of a gang is kept only while the gang has live pods.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from kubernetes import client

from netsched.api import conditions as c
from netsched.api import plans
from netsched.api.connect import api_message
from netsched.api.events import event, parse_rfc3339
from netsched.api.labels import GANG_BLOCKED
from netsched.api.topology import DEFAULT, Topology
from netsched.jobs.gang_size import read_size
from netsched.jobs.plan_room import with_plan_room
from netsched.jobs.pod_gang import still_to_release
from netsched.jobs.pod_gangs import controller, gang_of, involved
from netsched.jobs.replica_pods import ungate_patch
from netsched.jobs.stale_pins import pinned_node, stale_pin, unschedulable
from netsched.operator import COMPONENT
from netsched.operator.admission_gate import AdmissionGate
from netsched.operator.cluster_index import ClusterIndex, GangKey, GangMember
from netsched.operator.gang_placer import GangPlacer
from netsched.operator.metrics import OperatorMetrics
from netsched.operator.pod_gangs.decision import Decision, decide

log = logging.getLogger(__name__)
SETTLE_SECONDS = 10.0  # how long a release waits for the watch to show its pods released
REFUSAL_SECONDS = 30.0  # how often a gang that waits for its pods has its controller's refusals read


@dataclass(frozen=True)
class Planned:
    """What the active PackingPlans decide for pod gangs, read once per pass."""
    placing: dict[str, str] = field(default_factory=dict)  # namespace/pod -> the plan that places it
    moving: dict[tuple[str, str], str] = field(default_factory=dict)  # (ns, controller uid) -> plan
    reserved: dict[str, int] = field(default_factory=dict)  # node -> GPUs the plans hold there

    def plan_of(self, namespace: str, gated: list[dict[str, Any]]) -> str | None:
        """The plan that lifts these gated pods' gates: one it places, or a moved pod's replacement (a
        new pod of the moved pod's controller)."""
        for pod in gated:
            name = f"{namespace}/{pod['metadata']['name']}"
            owner = (controller(pod) or {}).get("uid")
            plan = self.placing.get(name) or self.moving.get((namespace, owner or ""))
            if plan:
                return plan
        return None


def blocked_note(pod: dict[str, Any] | None) -> str | None:
    """What the pod's GANG_BLOCKED annotation says, None when it has none."""
    note: str | None = (((pod or {}).get("metadata") or {}).get("annotations") or {}).get(GANG_BLOCKED)
    return note


def unblock_patch(pod: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The JSON patch op that takes the Blocked note off a pod being released, if it has one."""
    if blocked_note(pod) is None:
        return []
    return [{"op": "remove", "path": "/metadata/annotations/" + GANG_BLOCKED.replace("/", "~1")}]


def _event_time(e: client.CoreV1Event) -> float:
    when = e.last_timestamp or e.event_time or e.metadata.creation_timestamp
    return when.timestamp() if when else 0.0


def _created(pod: dict[str, Any] | None) -> float:
    stamp = ((pod or {}).get("metadata") or {}).get("creationTimestamp")
    return parse_rfc3339(stamp).timestamp() if stamp else time.time()


class PodGangController:
    def __init__(self, api: client.ApiClient, metrics: OperatorMetrics, gate: AdmissionGate,
                 cluster: ClusterIndex, topology: Topology = DEFAULT, interval: float = 1.0,
                 clock: Callable[[], float] = time.monotonic, leads: Callable[[], bool] = lambda: True,
                 placer: GangPlacer | None = None):
        """`gate`: the one the GPUJob controller admits through; `leads`: whether this replica acts
        (netsched.operator.leadership): only the leader releases; `placer`: asks where a gang's members
        go as it is released whole."""
        self.placer = placer or GangPlacer(None, metrics)
        self.metrics, self.gate, self.cluster, self.topology = metrics, gate, cluster, topology
        self.interval, self.clock, self.leads = interval, clock, leads
        self.core = client.CoreV1Api(api)
        self.objects = client.CustomObjectsApi(api)
        self.custom = client.CustomObjectsApi(api)
        self._said: dict[GangKey, tuple[str, str]] = {}
        self._released_strays: set[str] = set()
        self._evicted: set[str] = set()  # pods evicted for a stale pin the watch still shows
        self._refusals: dict[GangKey, tuple[float, str | None]] = {}  # when read, the refusal then

    def start(self) -> None:
        threading.Thread(target=self._loop, name="pod-gangs", daemon=True).start()

    def _loop(self) -> None:
        while True:
            if not self.leads():
                self.metrics.gangs.update([])  # the leader counts the gangs; this replica stands by
            if self.cluster.synced and self.leads():
                try:
                    self.run_pass()
                except Exception:  # a bug: counted, logged, tried again next pass
                    self.metrics.loop_errors.labels("pod-gangs").inc()
                    log.exception("pod gang pass failed")
            time.sleep(self.interval)

    def run_pass(self) -> None:
        gangs = self.cluster.pod_gangs()
        for key in [k for k in self._said if k not in gangs]:
            del self._said[key]  # the gang is gone (finished, or its workload deleted)
        for key in [k for k in self._refusals if k not in gangs]:
            del self._refusals[key]
        waiting = {k: g for k, g in gangs.items() if any(m.pod is not None for m in g)}
        try:
            planned = self._planned() if waiting else Planned()
        except client.ApiException as exc:  # releasing a gang a plan places would undo the plan
            self.metrics.api_errors.labels("pod-gang").inc()
            log.warning("pod gang: listing PackingPlans failed: %s; no gang released", api_message(exc))
            planned, waiting = Planned(), {}
        census = []
        for key, gang in waiting.items():
            decision = self._admit(key, gang, planned)
            if decision is not None and len(decision.release) < sum(m.pod is not None for m in gang):
                created = min(_created(m.pod) for m in gang if m.pod is not None)
                census.append((key[0], "blocked" if decision.blocked else "waiting", created))
        self.metrics.gangs.update(census)
        self._replace_stale_pins()
        strays = {p["metadata"].get("uid", ""): p for p in self.cluster.strays()}
        self._released_strays &= set(strays)  # released ones the watch has not shown released yet
        for uid, pod in strays.items():
            if uid not in self._released_strays:
                self._released_strays.add(uid)
                self._release_stray(pod)

    def _planned(self) -> Planned:
        """What the active PackingPlans place, move and hold."""
        items = self.custom.list_cluster_custom_object(plans.GROUP, plans.VERSION, plans.PLURAL)["items"]
        return Planned({pod: plan for body in items for pod, plan in plans.placing(body).items()},
                       {owner: plan for body in items for owner, plan in plans.moving(body).items()},
                       plans.reserved_gpus(items))

    def _admit(self, key: GangKey, gang: list[GangMember], planned: Planned) -> Decision | None:
        """Release the gang if it fits, and say what became of it; the decision (None: no gang)."""
        member = next(m.pod for m in gang if m.pod is not None)
        ref = gang_of(member)
        if ref is None:
            return None
        plan = planned.plan_of(ref.namespace, [m.pod for m in gang if m.pod is not None])
        size, no_size = ((ref.size, "") if ref.size is not None or plan is not None
                         else read_size(self.objects, member, ref))
        held = [m.pod for m in gang if m.pod is not None]
        short = size is not None and len(held) < still_to_release(size, len(gang), len(held))
        refused = self._refused(key, member, max(map(_created, held))) if short and plan is None else None
        with self.gate:
            indices = self.cluster.indices({})
            pinned, loose = self.gate.reserved(indices)
            # the room an active plan holds for the pods it places is not this gang's to take
            used = with_plan_room(indices.taken(pinned), planned.reserved)
            decision = decide(ref, size, gang, self.cluster.rooms(), used,
                              indices.pending + loose, no_size, plan,
                              self.topology, partial(self.placer.nodes, ref.namespace,
                                                     f"{ref.kind}/{ref.name}"), refused)
            gated = {m.name: m.pod for m in gang if m.pod is not None}
            for name, patch in decision.release.items():
                self._call(self.core.patch_namespaced_pod, name, ref.namespace,
                           [*patch, *unblock_patch(gated.get(name))])
            if decision.release:
                self._settle(key, set(decision.release))
        # the Blocked state, on the gated pods: their workload's object is its controller's to write
        kept = [p for name, p in gated.items() if name not in decision.release]
        said_before = bool(kept) and all(blocked_note(p) == decision.blocked_note for p in kept)
        for pod in kept:
            if blocked_note(pod) != decision.blocked_note:
                self._call(self.core.patch_namespaced_pod, pod["metadata"]["name"], ref.namespace,
                           {"metadata": {"annotations": {GANG_BLOCKED: decision.blocked_note}}})
        if self._said.get(key) != decision.said_as:
            self._said[key] = decision.said_as
            # a restarted operator finds a Blocked gang's pods saying so already: said once, not again
            if not (decision.blocked and said_before):
                self._call(self.core.create_namespaced_event, ref.namespace, event(
                    involved(member), decision.reason, decision.message, COMPONENT, decision.type))
            if decision.type == "Warning":
                log.warning("%s", decision.message)
        return decision

    def _refused(self, key: GangKey, member: dict[str, Any], newest: float) -> str | None:
        """Why the API server refuses the pods the gang's controller makes, when it does: the message of the
        controller's last FailedCreate Event on itself (a Job's, a StatefulSet's), when it came after the
        gang's newest pod (`newest`, epoch seconds): a refusal its controller got past is none. Read at
        most every REFUSAL_SECONDS per gang, and only while the gang waits for pods."""
        now = self.clock()
        said = self._refusals.get(key)
        if said is not None and now - said[0] < REFUSAL_SECONDS:
            return said[1]
        owner = controller(member) or {}
        message = None
        if owner.get("uid"):
            try:
                events = self.core.list_namespaced_event(
                    member["metadata"]["namespace"],
                    field_selector=f"involvedObject.uid={owner['uid']},reason=FailedCreate").items
            except client.ApiException as exc:
                self.metrics.api_errors.labels("pod-gang").inc()
                log.warning("pod gang: listing %s's events failed: %s", owner.get("name"), api_message(exc))
                events = []
            last = max(events, key=_event_time, default=None)
            message = last.message if last is not None and _event_time(last) >= newest - 1 else None
        self._refusals[key] = (now, message)
        return message

    def _replace_stale_pins(self) -> None:
        """Evict the unbound members of each gang one of whose pinned nodes can no longer take its pod
        (netsched.jobs.stale_pins): their controller makes them again, gated, and the gang's unbound part
        is placed anew. Through the Eviction API, which marks each pod DisruptionTarget: a Job's
        podFailurePolicy can then ignore it. Once per pod."""
        rooms = {r.name: r for r in self.cluster.rooms()}
        used = self.cluster.indices({}).used
        pinned: dict[tuple[str, str, str], list[tuple[dict[str, Any], str]]] = {}
        for pod in self.cluster.pods():
            node, ref = pinned_node(pod), gang_of(pod)
            if node is not None and ref is not None:
                pinned.setdefault((ref.kind, ref.namespace, ref.name), []).append((pod, node))
        self._evicted &= {p["metadata"].get("uid", "") for members in pinned.values() for p, _ in members}
        for (kind, namespace, name), members in pinned.items():
            stale = (stale_pin(node, pod.get("spec") or {}, unschedulable(pod), rooms, used)
                     for pod, node in members)
            why = next((w for w in stale if w), None)
            fresh = [pod for pod, _ in members if pod["metadata"].get("uid", "") not in self._evicted]
            if why is None or not fresh:
                continue
            for pod in fresh:
                self._evicted.add(pod["metadata"].get("uid", ""))
                self._call(self.core.create_namespaced_pod_eviction, pod["metadata"]["name"], namespace,
                           client.V1Eviction(metadata=client.V1ObjectMeta(name=pod["metadata"]["name"],
                                                                          namespace=namespace)))
            message = (f"{kind} {namespace}/{name}: {why} before its pod bound; its {len(fresh)} unbound "
                       "pod(s) are evicted to be made again and placed anew (bound pods stay)")
            log.info("%s", message)
            self._call(self.core.create_namespaced_event, namespace,
                       event(involved(fresh[0]), c.PIN_STALE, message, COMPONENT, "Warning"))

    def _release_stray(self, pod: dict[str, Any]) -> None:
        """A pod the gang gate holds with no gang to release it (netsched.operator.cluster_index
        ClusterIndex.strays) is released as a pod of its own, rather than left pending for ever."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        with self.gate:
            self._call(self.core.patch_namespaced_pod, meta["name"], meta["namespace"],
                       [ungate_patch(g.get("name") for g in spec.get("schedulingGates") or ())])
        message = (f"pod {meta['namespace']}/{meta['name']} carried netsched's gang gate but is in no gang "
                   "and has no controller (its workload was deleted with propagationPolicy=Orphan): "
                   "released as a pod of its own")
        self._call(self.core.create_namespaced_event, meta["namespace"],
                   event(involved(pod), c.GANG_GONE, message, COMPONENT))
        log.info("%s", message)

    def _settle(self, key: GangKey, released: set[str]) -> None:
        """Hold the admission gate until the watch shows the released pods without the gate (then
        they count as pending room), or SETTLE_SECONDS pass: no other gang may count on it meanwhile."""
        deadline = self.clock() + SETTLE_SECONDS
        while self.clock() < deadline:
            gang = self.cluster.pod_gangs().get(key, [])
            if not any(m.name in released and m.pod is not None for m in gang):
                return
            time.sleep(0.05)

    def _call(self, fn: Callable[..., object], *args: Any) -> None:
        try:
            fn(*args)
        except client.ApiException as exc:
            if exc.status != 404:  # a pod gone meanwhile: the next pass sees it
                self.metrics.api_errors.labels("pod-gang").inc()
                log.warning("pod gang: %s failed: %s", getattr(fn, "__name__", fn), api_message(exc))
