"""The pod-gang controller: lifts netsched's gate from the pods of a Job, JobSet, LWS, Kubeflow job,
PodGroup or Kueue pod group (netsched.jobs.pod_gangs) when the whole gang fits, all at once.

Its pods come gated (GANG_GATE, from their template or the admission webhook) and made by their own
controller; this only releases them. Every `interval` a pass reads the ClusterIndex: a gang whose
gated members are all there (its size from the workload, netsched.jobs.pod_gang) and fit, by the
rules and the admission lock GPUJobs use, has each gated member's nodeSelector tightened to the
chosen domain (when its max-peer-distance asks for one) in the same patch that lifts its gate. Never
part of a gang: until all fit, all wait. A gang with bad `netsched.io/*` annotations stays gated,
with a Warning on its workload naming the annotation and the fix. A gang that Kueue's topology-aware
scheduling places (netsched.jobs.kueue_topology) has netsched's gate lifted at once, nothing pinned,
and one Event saying so. What it says of a gang is kept
only while the gang has live pods.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from netsched.api import conditions as c
from netsched.api import plans
from netsched.api.connect import api_message
from netsched.api.events import event
from netsched.api.labels import MAX_PEER_DISTANCE
from netsched.api.resources import Resources
from netsched.api.topology import DEFAULT, Topology
from netsched.jobs.capacity import NodeRoom, gang_fit
from netsched.jobs.gang_size import read_size
from netsched.jobs.hard_limits import NodeRequirement, Unwritable, data_requirement, requirement_patch
from netsched.jobs.kueue_topology import placed_by_kueue
from netsched.jobs.pod_gang import PodGang, still_to_release
from netsched.jobs.pod_gangs import GangRef, gang_of, involved
from netsched.jobs.replica_pods import pin_patch, size_patch, ungate_patch
from netsched.jobs.validation import problems
from netsched.operator.cluster_index import ClusterIndex, GangKey, GangMember
from netsched.operator.handlers import COMPONENT, Operator

log = logging.getLogger(__name__)
SETTLE_SECONDS = 10.0  # how long a release waits for the watch to show its pods released


@dataclass(frozen=True)
class Decision:
    type: str  # of the Event: Normal or Warning
    reason: str  # netsched.api.conditions
    message: str
    release: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # pod -> JSON patch

    @property
    def said_as(self) -> tuple[str, str]:
        """What makes a new Event: a Warning's words (its fix may change), else the reason alone (the
        numbers of a wait change all the time)."""
        return (self.reason, self.message if self.type == "Warning" else "")


def decide(ref: GangRef, size: int | None, gang: list[GangMember], nodes: list[NodeRoom],
           used: dict[str, Resources], pending: list[Resources], no_size: str = "",
           plan: str | None = None, topology: Topology = DEFAULT) -> Decision:
    """What to do with a pod gang whose live pods are `gang` (some gated); `no_size` says why its size
    is unknown when it is; `plan`: the active PackingPlan that places its gated pods, if one does."""
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
    if len(gated) < to_release:
        return Decision("Normal", c.WAITING_FOR_PODS, f"{what}: {len(gated)} of {to_release} pods to release "
                        "exist; released together once all do")
    member = gated[0].pod
    assert member is not None
    workload = PodGang(ref, size, _with_peers(member, gang), to_release)
    found = problems(workload, workload.annotations, nodes, spec_fields=False, topology=topology)
    if found:
        return Decision("Warning", c.INVALID_SPEC, f"{what} stays gated: " + "; ".join(found))
    fit = gang_fit(nodes, used, pending, workload, topology)
    if not fit.fits:
        return Decision("Normal", fit.why, f"{what} waits: {fit.message}")
    near_data = _near_data(workload, nodes, topology)
    release = {}
    for m in gated[:to_release]:
        assert m.pod is not None
        spec = m.pod.get("spec") or {}
        pin = pin_patch(spec.get("nodeSelector"), *fit.domain) if fit.domain else []
        sized = size_patch((m.pod.get("metadata") or {}).get("annotations"), size, workload.gpus_per_member)
        release[m.name] = [*pin, *requirement_patch(spec, near_data), *sized, _ungate(m)]
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


class PodGangController:
    def __init__(self, operator: Operator, cluster: ClusterIndex, interval: float = 1.0,
                 clock: Callable[[], float] = time.monotonic, leads: Callable[[], bool] = lambda: True):
        """`leads`: whether this replica acts (netsched.operator.leadership); only the leader releases."""
        self.operator, self.cluster, self.interval, self.clock = operator, cluster, interval, clock
        self.leads = leads
        self.core = operator.core
        self.objects = client.CustomObjectsApi(operator.api)
        self.custom = operator.custom
        self._said: dict[GangKey, tuple[str, str]] = {}
        self._released_strays: set[str] = set()

    def start(self) -> None:
        threading.Thread(target=self._loop, name="pod-gangs", daemon=True).start()

    def _loop(self) -> None:
        while True:
            if self.cluster.synced and self.leads():
                try:
                    self.run_pass()
                except Exception:  # a bug: counted, logged, tried again next pass
                    self.operator.metrics.loop_errors.labels("pod-gangs").inc()
                    log.exception("pod gang pass failed")
            time.sleep(self.interval)

    def run_pass(self) -> None:
        gangs = self.cluster.pod_gangs()
        for key in [k for k in self._said if k not in gangs]:
            del self._said[key]  # the gang is gone (finished, or its workload deleted)
        waiting = {k: g for k, g in gangs.items() if any(m.pod is not None for m in g)}
        try:
            planned = self._planned() if waiting else {}
        except client.ApiException as exc:  # releasing a gang a plan places would undo the plan
            self.operator.metrics.api_errors.labels("pod-gang").inc()
            log.warning("pod gang: listing PackingPlans failed: %s; no gang released", api_message(exc))
            planned, waiting = {}, {}
        for key, gang in waiting.items():
            self._admit(key, gang, planned)
        strays = {p["metadata"].get("uid", ""): p for p in self.cluster.strays()}
        self._released_strays &= set(strays)  # released ones the watch has not shown released yet
        for uid, pod in strays.items():
            if uid not in self._released_strays:
                self._released_strays.add(uid)
                self._release_stray(pod)

    def _planned(self) -> dict[str, str]:
        """namespace/pod -> the active PackingPlan that places it."""
        listed = self.custom.list_cluster_custom_object(plans.GROUP, plans.VERSION, plans.PLURAL)
        return {pod: plan for body in listed["items"] for pod, plan in plans.placing(body).items()}

    def _admit(self, key: GangKey, gang: list[GangMember], planned: dict[str, str]) -> None:
        member = next(m.pod for m in gang if m.pod is not None)
        ref = gang_of(member)
        if ref is None:
            return
        plan = next((planned[p] for m in gang if m.pod is not None
                     and (p := f"{ref.namespace}/{m.name}") in planned), None)
        size, no_size = ((ref.size, "") if ref.size is not None or plan is not None
                         else read_size(self.objects, member, ref))
        with self.operator.admission:
            indices = self.cluster.indices({})
            decision = decide(ref, size, gang, self.cluster.rooms(), indices.used,
                              indices.pending + self.operator.reserved(indices), no_size, plan,
                              self.operator.topology)
            for name, patch in decision.release.items():
                self._call(self.core.patch_namespaced_pod, name, ref.namespace, patch)
            if decision.release:
                self._settle(key, set(decision.release))
        if self._said.get(key) != decision.said_as:
            self._said[key] = decision.said_as
            self._call(self.core.create_namespaced_event, ref.namespace,
                       event(involved(member), decision.reason, decision.message, COMPONENT, decision.type))
            if decision.type == "Warning":
                log.warning("%s", decision.message)

    def _release_stray(self, pod: dict[str, Any]) -> None:
        """A pod the gang gate holds with no gang to release it (netsched.operator.cluster_index
        ClusterIndex.strays) is released as a pod of its own, rather than left pending for ever."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        with self.operator.admission:
            self._call(self.core.patch_namespaced_pod, meta["name"], meta["namespace"],
                       [ungate_patch(g.get("name") for g in spec.get("schedulingGates") or ())])
        message = (f"pod {meta['namespace']}/{meta['name']} carried netsched's gang gate but is in no gang "
                   "and has no controller (its workload was deleted with propagationPolicy=Orphan): "
                   "released as a pod of its own")
        self._call(self.core.create_namespaced_event, meta["namespace"],
                   event(involved(pod), c.GANG_GONE, message, COMPONENT))
        log.info("%s", message)

    def _settle(self, key: GangKey, released: set[str]) -> None:
        """Hold the admission lock until the watch shows the released pods without the gate (then
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
                self.operator.metrics.api_errors.labels("pod-gang").inc()
                log.warning("pod gang: %s failed: %s", getattr(fn, "__name__", fn), api_message(exc))
