"""The packer's kopf handlers: carry out the active PackingPlan, one step per tick (or, deleted while
active, requeue the pods it held back), and ask the packer for a pass when a pod of the scheduler waits
for room or a PodDisruptionBudget changes.

Kept here, with the operator's other kopf wiring, so that netsched.packer has no kopf: `netsched whatif`
runs the packer's decision without kopf's second of imports."""

from __future__ import annotations

import copy
from typing import Any

import kopf

from netsched.api import plans
from netsched.packer.controller import Packer
from netsched.packer.live_cluster import waits_for_room


def register(registry: kopf.OperatorRegistry, packer: Packer, interval: float = 1.0) -> None:
    def active(body: kopf.Body, **_: Any) -> bool:
        return plans.is_active(dict(body))

    @kopf.timer(plans.GROUP, plans.VERSION, plans.PLURAL, id="carry-out", interval=interval, when=active,
                registry=registry)
    def carry_out(body: kopf.Body, **_: Any) -> None:
        if packer.leads():
            packer.step(copy.deepcopy(dict(body)))

    @kopf.on.event(plans.GROUP, plans.VERSION, plans.PLURAL, id="plan-deleted", registry=registry)
    def plan_deleted(event: kopf.RawEvent, **_: Any) -> None:
        """A plan deleted while active lifts its reservations as one that ends does."""
        body: dict[str, Any] = dict(event["object"])
        if event["type"] == "DELETED" and plans.Phase(plans.phase(body)) in plans.ACTIVE:
            packer.requeue_held(body["metadata"]["name"])

    @kopf.on.startup(id="watch-waiting-pods", registry=registry)
    def unbound_pods_only(settings: kopf.OperatorSettings, **_: Any) -> None:
        # kopf's one pod handler is this one, for unbound pods of the scheduler: the API server sends
        # kopf no other pod (the operator's own pod watch, netsched.operator.cluster_index, sees all)
        settings.watching.field_selectors["pods"] = f"spec.schedulerName={packer.scheduler},spec.nodeName="

    def waiting(meta: kopf.Meta, spec: kopf.Spec, status: kopf.Status, **_: Any) -> bool:
        return waits_for_room(meta, spec, status, packer.scheduler)

    @kopf.on.event("pods", id="waiting-pods", when=waiting, registry=registry)
    def pod_waits(**_: Any) -> None:
        packer.pod_waits()

    # room the packer may now make, or must no longer count on: look again now, not on a timer
    @kopf.on.event("policy", "v1", "poddisruptionbudgets", id="budgets", registry=registry)
    def budget_changed(**_: Any) -> None:
        packer.request()
