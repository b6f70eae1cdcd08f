"""The MutatingWebhookConfigurations that send pods to the webhooks (the chart renders the same ones, the
dev-cluster and tests create these), the URL paths kopf serves them at, and how long a pod create waits."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from netsched.api.gpujob import GROUP, KIND
from netsched.api.labels import DATA_SOURCE, GANG_OPT_IN_LABEL, GANG_OPT_IN_VALUE, MAX_DATA_DISTANCE

HANDLER_ID = "gang-gate"  # kopf serves the handler at this URL path: /gang-gate
LIMITS_HANDLER_ID = "hard-limits"  # and this one at /hard-limits
TIMEOUT_SECONDS = 5  # a pod create waits at most this long for the webhook


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


def hard_limits_configuration(name: str, client_config: Mapping[str, Any], scheduler: str,
                              exclude_namespaces: tuple[str, ...] = ("kube-system",)) -> dict[str, Any]:
    """The MutatingWebhookConfiguration sending the creation of each pod that asks for a data limit
    to /hard-limits (the chart renders the same one): pods of `scheduler` in every namespace but
    `exclude_namespaces`, no GPUJob's. `Ignore` when it cannot answer: the extender still keeps the
    limit, so no pod waits on the operator."""
    config = webhook_configuration(name, client_config, scheduler, exclude_namespaces, opt_in=False,
                                   failure_policy="Ignore")
    [hook] = config["webhooks"]
    hook["name"] = f"{LIMITS_HANDLER_ID}.netsched.io"
    hook["matchConditions"] = [*match_conditions(scheduler), {
        "name": "asks-for-a-data-limit", "expression":
            f"has(object.metadata.annotations) && '{MAX_DATA_DISTANCE}' in object.metadata.annotations "
            f"&& '{DATA_SOURCE}' in object.metadata.annotations"}]
    return config


def match_conditions(scheduler: str) -> list[dict[str, str]]:
    """CEL the API server checks before calling: pods of other schedulers and GPUJob pods never wait
    on the webhook (the handler checks the same again: it is the rule, this only spares the call)."""
    return [
        {"name": "netsched-scheduler", "expression": f"object.spec.schedulerName == '{scheduler}'"},
        {"name": "not-a-gpujob-pod", "expression":
            "!has(object.metadata.ownerReferences) || !object.metadata.ownerReferences.exists(o, "
            f"o.kind == '{KIND}' && o.apiVersion.startsWith('{GROUP}/'))"},
    ]
