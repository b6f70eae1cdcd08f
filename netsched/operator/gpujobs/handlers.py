"""The GPUJob controller's kopf handlers: kopf's settings, the census of every GPUJob (the phase gauge;
a GPUJob being deleted has its pods deleted at once), the index of the pods PackingPlans place, and
one timer per unfinished GPUJob that runs a tick of the GPUJobController."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import kopf

from netsched.api import conditions as c
from netsched.api import plans
from netsched.api.gpujob import GROUP, PLURAL, TERMINAL, VERSION
from netsched.operator.cluster_index import ClusterIndex
from netsched.operator.gpujobs.controller import GPUJobController


def _unfinished(status: kopf.Status, **_: Any) -> bool:
    conds = list(status.get("conditions") or [])
    return not (status.get("phase") in TERMINAL and c.is_true(conds, c.RECORDED))


def register(registry: kopf.OperatorRegistry, controller: GPUJobController, cluster: ClusterIndex,
             leads: Callable[[], bool] = lambda: True) -> None:
    """`leads`: whether this replica acts (netsched.operator.leadership); one that stands by only watches."""
    @kopf.on.startup(id="configure", registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False  # Events are ours, one per transition, not kopf's log lines
        settings.watching.server_timeout = 60
        settings.execution.max_workers = 8
        # A deleted GPUJob keeps kopf's finalizer until its reconcile timer has stopped. The timer stops
        # within a tick, but kopf looks again only after `cancellation_polling` (60 s by default), and
        # the job's pods lived that long: wait a little for it, then look every second.
        settings.background.instant_exit_timeout = 0.5
        settings.background.cancellation_polling = 1.0

    @kopf.on.event(GROUP, VERSION, PLURAL, id="census", registry=registry)
    def census(event: kopf.RawEvent, **_: Any) -> None:
        """Every GPUJob the watch shows, finished ones too, for the phase gauge (netsched_gpujobs)."""
        body = event["object"]
        if event["type"] == "DELETED":
            controller.metrics.jobs.gone(body["metadata"]["uid"])
        else:
            controller.metrics.jobs.seen(body)
            if body["metadata"].get("deletionTimestamp") and cluster.synced and leads():
                controller.deleted(_plain(body), cluster.indices({}))

    @kopf.index(plans.GROUP, plans.VERSION, plans.PLURAL, id="planned_pods", registry=registry)
    def planned_pods(body: kopf.Body, **_: Any) -> dict[str, str]:
        plain = _plain(body)  # the pods it places, and the controllers whose pods it moves (Indices.plan_of)
        moved = {f"{ns}/{owner}": plan for (ns, owner), plan in plans.moving(plain).items()}
        return plans.placing(plain) | moved

    @kopf.index(plans.GROUP, plans.VERSION, plans.PLURAL, id="plan_room", registry=registry)
    def plan_room(body: kopf.Body, **_: Any) -> dict[str, int]:
        return plans.reserved_gpus([_plain(body)])

    # kopf passes an index by its id; its TimerFn protocol does not list them
    @kopf.timer(GROUP, VERSION, PLURAL, id="reconcile", interval=controller.interval,  # type: ignore[arg-type]
                when=_unfinished, registry=registry)
    def tick(body: kopf.Body, meta: kopf.Meta, planned_pods: kopf.Index[str, str],
             plan_room: kopf.Index[str, int], **_: Any) -> None:
        if meta.get("deletionTimestamp"):
            return  # its pods were deleted with it (census)
        if not cluster.synced or not leads():
            # until nodes and pods are listed, a job's pods would look missing and be made again; a
            # replica that stands by leaves the job to the leader
            return
        held = {node: sum(gpus) for node, gpus in plan_room.items()}
        controller.tick(_plain(body), cluster.rooms(), replace(cluster.indices(planned_pods), plan_room=held))


def _plain(view: Mapping[str, Any]) -> dict[str, Any]:
    """A kopf body/spec view as plain, deep-copied dicts."""
    return copy.deepcopy(dict(view))
