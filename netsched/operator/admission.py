"""The operator's mutating admission webhook: netsched's gang gate on each pod of a recognised gang
(batch Job, JobSet, LeaderWorkerSet, Kubeflow, PodGroup, Kueue pod group: netsched.jobs.pod_gangs) as it
is created, so that no member is scheduled before the whole gang fits. A scheduling gate can only be
added when a pod is created (the API server refuses a new gate later), so this is the one place to add it.

The operator serves it through kopf (`settings.admission.server`); the MutatingWebhookConfiguration that
sends pods here is the chart's (or a test's), built from `webhook_configuration`, never kopf's managed one:
kopf's cannot select namespaces or match conditions, and the operator then needs no RBAC on webhook
configurations.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import kopf

from netsched.api.gpujob import GROUP, KIND
from netsched.api.labels import GANG_OPT_IN_LABEL, GANG_OPT_IN_VALUE
from netsched.jobs.pod_gangs import gang_of
from netsched.jobs.replica_pods import GANG_GATE
from netsched.operator.metrics import OperatorMetrics

log = logging.getLogger(__name__)
HANDLER_ID = "gang-gate"  # kopf serves the handler at this URL path: /gang-gate
TIMEOUT_SECONDS = 5  # a pod create waits at most this long for the webhook


def gated(pod: Mapping[str, Any], scheduler: str) -> list[dict[str, Any]] | None:
    """The pod's schedulingGates with the gang gate added, or None to leave the pod as it is: it names
    another scheduler, belongs to no recognised gang (GPUJob pods do not: the operator gates those
    itself), or carries the gate already."""
    spec = pod.get("spec") or {}
    if spec.get("schedulerName") != scheduler or gang_of(pod) is None:
        return None
    gates = list(spec.get("schedulingGates") or [])
    if any(gate.get("name") == GANG_GATE for gate in gates):
        return None
    return [*gates, {"name": GANG_GATE}]


def admit(pod: Mapping[str, Any], scheduler: str, metrics: OperatorMetrics) -> list[dict[str, Any]] | None:
    """`gated`, counted by outcome in `netsched_webhook_requests_total`; a pod it cannot tell about is
    refused (its controller creates it again), never let through ungated."""
    try:
        gates = gated(pod, scheduler)
    except Exception as exc:
        metrics.webhook_requests.labels("error").inc()
        meta = pod.get("metadata") or {}
        who = f"{meta.get('namespace')}/{meta.get('name') or (meta.get('generateName') or '') + '*'}"
        log.exception("admission of pod %s failed", who)
        raise kopf.AdmissionError(
            f"netsched could not tell whether pod {who} belongs to a gang ({type(exc).__name__}: {exc}); "
            "its controller will create it again; see the netsched operator's log") from exc
    metrics.webhook_requests.labels("passed" if gates is None else "gated").inc()
    return gates


def register_admission(registry: kopf.OperatorRegistry, metrics: OperatorMetrics, scheduler: str) -> None:
    """The webhook's kopf handler, served at /gang-gate."""

    @kopf.on.mutate("v1", "pods", id=HANDLER_ID, operations=["CREATE"], side_effects=False,
                    registry=registry)
    def gang_gate(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
        gates = admit(body, scheduler, metrics)
        if gates is not None:
            patch.spec["schedulingGates"] = gates


def server(host: str, port: int, cert: Path, key: Path) -> kopf.WebhookServer:
    """kopf's HTTPS server for the webhook, with a certificate it reloads when the files change."""
    return kopf.WebhookServer(addr=host, port=port, certfile=str(cert), pkeyfile=str(key))


def webhook_configuration(name: str, client_config: Mapping[str, Any], scheduler: str,
                          exclude_namespaces: tuple[str, ...] = ("kube-system",),
                          opt_in: bool = True, failure_policy: str = "Fail") -> dict[str, Any]:
    """The MutatingWebhookConfiguration sending pod creations to this webhook (the chart renders the
    same one). The API server asks only for pods in opted-in namespaces (never `exclude_namespaces`)
    that name `scheduler` and no GPUJob owns, so an outage of the webhook holds up nothing else."""
    namespaces: list[dict[str, Any]] = [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(exclude_namespaces)}]
    if opt_in:
        namespaces.append({"key": GANG_OPT_IN_LABEL, "operator": "In", "values": [GANG_OPT_IN_VALUE]})
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": f"{HANDLER_ID}.netsched.io",
            "clientConfig": dict(client_config),
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
                       "operations": ["CREATE"], "scope": "Namespaced"}],
            "namespaceSelector": {"matchExpressions": namespaces},
            "matchConditions": match_conditions(scheduler),
            "failurePolicy": failure_policy,
            "sideEffects": "None",
            "timeoutSeconds": TIMEOUT_SECONDS,
            "reinvocationPolicy": "Never",
            "admissionReviewVersions": ["v1"],
        }],
    }


def match_conditions(scheduler: str) -> list[dict[str, str]]:
    """CEL the API server checks before calling: pods of other schedulers and GPUJob pods never wait
    on the webhook (the handler checks the same again: it is the rule, this only spares the call)."""
    return [
        {"name": "netsched-scheduler", "expression": f"object.spec.schedulerName == '{scheduler}'"},
        {"name": "not-a-gpujob-pod", "expression":
            "!has(object.metadata.ownerReferences) || !object.metadata.ownerReferences.exists(o, "
            f"o.kind == '{KIND}' && o.apiVersion.startsWith('{GROUP}/'))"},
    ]
