"""The kopf handlers of the operator's mutating admission webhooks, served by every replica, leader or not.

The gang gate (webhook.gang_gate) and the hard limits (webhook.hard_limits), at /gang-gate and
/hard-limits.

The operator serves them through kopf (`settings.admission.server`); the MutatingWebhookConfigurations that
send pods here are the chart's (or a test's), built from `webhook_configuration` and
`hard_limits_configuration` (webhook.configurations), never kopf's managed one:
kopf's cannot select namespaces or match conditions, and the operator then needs no RBAC on webhook
configurations.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf
from kubernetes import client

from netsched.api.topology import Topology
from netsched.operator.metrics import OperatorMetrics
from netsched.operator.webhook.configurations import HANDLER_ID, LIMITS_HANDLER_ID
from netsched.operator.webhook.gang_gate import admit
from netsched.operator.webhook.hard_limits import api_holders, keep_near_data

log = logging.getLogger(__name__)


def register(registry: kopf.OperatorRegistry, metrics: OperatorMetrics, scheduler: str,
                       core: client.CoreV1Api, topology: Topology) -> None:
    """The webhooks' kopf handlers, served at /gang-gate and /hard-limits."""
    holders = api_holders(core, topology)

    @kopf.on.mutate("v1", "pods", id=LIMITS_HANDLER_ID, operations=["CREATE"], side_effects=False,
                    registry=registry)
    def hard_limits(body: kopf.Body, patch: kopf.Patch, warnings: list[str], **_: Any) -> None:
        affinity, warning = keep_near_data(body, scheduler, holders, topology, metrics)
        if affinity is not None:
            patch.spec["affinity"] = affinity
        if warning is not None:
            warnings.append(warning)
            log.warning("%s", warning)

    @kopf.on.mutate("v1", "pods", id=HANDLER_ID, operations=["CREATE"], side_effects=False,
                    registry=registry)
    def gang_gate(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
        gates = admit(body, scheduler, metrics)
        if gates is not None:
            patch.spec["schedulingGates"] = gates
