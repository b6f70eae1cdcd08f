"""The pod-gang controller: lifts netsched's gate from the pods of a Job, JobSet, LWS, Kubeflow job,
PodGroup or Kueue pod group (netsched.jobs.pod_gangs) when the whole gang fits, all at once.

Its pods come gated (GANG_GATE, from their template or the admission webhook) and made by their own
controller; this only releases them. Every `interval` a pass reads the ClusterIndex: a gang whose
gated members are all there (its size from the workload, netsched.jobs.pod_gang) and fit, by the
rules and the admission lock GPUJobs use, has each gated member's nodeSelector tightened to the
chosen domain (when its max-peer-distance asks for one) in the same patch that lifts its gate. Never
part of a gang: until all fit, all wait. A gang with bad `netsched.io/*` annotations stays gated,
with a Warning on its workload naming the annotation and the fix. What it says of a gang is kept
only while the gang has live pods.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from netsched.api import conditions as c
from netsched.api.connect import api_message
from netsched.api.events import event
from netsched.api.resources import Resources
from netsched.jobs.capacity import NodeRoom, gang_fit
from netsched.jobs.kinds.batch_job import BATCH_JOB, members
from netsched.jobs.pod_gang import PodGang, still_to_release
from netsched.jobs.pod_gangs import GangRef, controller, gang_of
from netsched.jobs.replica_pods import pin_patch, ungate_patch
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
           used: dict[str, Resources], pending: list[Resources]) -> Decision:
    """What to do with a pod gang whose live pods are `gang` (some gated)."""
    gated = sorted((m for m in gang if m.pod is not None), key=lambda m: m.name)
    what = f"{ref.kind} {ref.namespace}/{ref.name}"
    if size is None:
        return Decision("Warning", c.WAITING_FOR_PODS,
                        f"{what}: netsched cannot tell how many pods the gang has; its pods stay gated. "
                        "Run it as a batch Job, or give its pods the size annotation of their kind "
                        "(docs/workloads.md)")
    to_release = still_to_release(size, len(gang), len(gated))
    if len(gated) < to_release:
        return Decision("Normal", c.WAITING_FOR_PODS, f"{what}: {len(gated)} of {to_release} pods to release "
                        "exist; released together once all do")
    member = gated[0].pod
    assert member is not None
    workload = PodGang(ref, size, member, to_release)
    found = problems(workload, workload.annotations, nodes, spec_fields=False)
    if found:
        return Decision("Warning", c.INVALID_SPEC, f"{what} stays gated: " + "; ".join(found))
    fit = gang_fit(nodes, used, pending, workload)
    if not fit.fits:
        return Decision("Normal", fit.why, f"{what} waits: {fit.message}")
    release = {}
    for m in gated[:to_release]:
        assert m.pod is not None
        spec = m.pod.get("spec") or {}
        pin = pin_patch(spec.get("nodeSelector"), *fit.domain) if fit.domain else []
        release[m.name] = [*pin, ungate_patch(g.get("name") for g in spec.get("schedulingGates") or ())]
    where = f" in {fit.domain[0]}={fit.domain[1]}" if fit.domain else ""
    return Decision("Normal", c.GANG_RELEASED, f"{what}: released {len(release)} pods{where}: {fit.message}",
                    release)


class PodGangController:
    def __init__(self, operator: Operator, cluster: ClusterIndex, interval: float = 1.0,
                 clock: Callable[[], float] = time.monotonic):
        self.operator, self.cluster, self.interval, self.clock = operator, cluster, interval, clock
        self.core = operator.core
        self.batch = client.BatchV1Api(operator.api)
        self._said: dict[GangKey, tuple[str, str]] = {}

    def start(self) -> None:
        threading.Thread(target=self._loop, name="pod-gangs", daemon=True).start()

    def _loop(self) -> None:
        while True:
            if self.cluster.synced:
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
        for key, gang in gangs.items():
            if any(m.pod is not None for m in gang):
                self._admit(key, gang)

    def _admit(self, key: GangKey, gang: list[GangMember]) -> None:
        member = next(m.pod for m in gang if m.pod is not None)
        ref = gang_of(member)
        if ref is None:
            return
        size = ref.size if ref.size is not None else self._owner_size(member)
        with self.operator.admission:
            indices = self.cluster.indices({})
            decision = decide(ref, size, gang, self.cluster.rooms(), indices.used,
                              indices.pending + self.operator.reserved(indices))
            for name, patch in decision.release.items():
                self._call(self.core.patch_namespaced_pod, name, ref.namespace, patch)
            if decision.release:
                self._settle(key, set(decision.release))
        if self._said.get(key) != decision.said_as:
            self._said[key] = decision.said_as
            self._call(self.core.create_namespaced_event, ref.namespace,
                       event(_involved(member), decision.reason, decision.message, COMPONENT, decision.type))
            if decision.type == "Warning":
                log.warning("%s", decision.message)

    def _owner_size(self, pod: dict[str, Any]) -> int | None:
        """The size of a gang only its owner knows: a batch Job's (a JobSet's pods are its Jobs')."""
        owner = controller(pod)
        if owner is None or (owner.get("apiVersion"), owner.get("kind")) != BATCH_JOB.owner:
            return None
        try:
            resp = self.batch.read_namespaced_job(owner["name"], pod["metadata"]["namespace"],
                                                  _preload_content=False)
        except client.ApiException as exc:
            log.warning("reading Job %s/%s failed: %s", pod["metadata"]["namespace"], owner["name"],
                        api_message(exc))
            return None
        return members(json.loads(resp.data))

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


def _involved(pod: dict[str, Any]) -> dict[str, Any]:
    """Where a gang's Events go: the workload that owns its pods, else the pod."""
    meta = pod["metadata"]
    owner = controller(pod) or {"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                "uid": meta.get("uid")}
    return {"apiVersion": owner.get("apiVersion"), "kind": owner.get("kind"), "namespace": meta["namespace"],
            "name": owner.get("name"), "uid": owner.get("uid")}
