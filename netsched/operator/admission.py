"""The operator's mutating admission webhooks, served by every replica, leader or not.

The gang gate: netsched's gang gate on each pod of a recognised gang (batch Job, JobSet, LeaderWorkerSet,
Kubeflow, PodGroup, Kueue pod group: netsched.jobs.pod_gangs) as it is created, so that no member is
scheduled before the whole gang fits. A scheduling gate can only be added when a pod is created (the API
server refuses a new gate later), so this is the one place to add it.

The hard limits: a pod's data limit (netsched.io/max-data-distance of netsched.io/data-source) as
required node affinity (netsched.jobs.hard_limits), so kube-scheduler keeps it even when it skips the
extender. Never a refusal: a limit it cannot write is left to the extender, with an admission warning.

The operator serves them through kopf (`settings.admission.server`); the MutatingWebhookConfigurations that
send pods here are the chart's (or a test's), built from `webhook_configuration` and
`hard_limits_configuration`, never kopf's managed one:
kopf's cannot select namespaces or match conditions, and the operator then needs no RBAC on webhook
configurations.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import kopf
from kubernetes import client

from netsched.api.gpujob import GROUP, KIND
from netsched.api.labels import DATA_SOURCE, GANG_OPT_IN_LABEL, GANG_OPT_IN_VALUE, MAX_DATA_DISTANCE
from netsched.api.topology import NODE, Topology
from netsched.jobs.hard_limits import NodeLabels, Unwritable, data_requirement, with_requirement
from netsched.jobs.pod_gangs import gang_of
from netsched.jobs.replica_pods import GANG_GATE
from netsched.jobs.workload import NetworkNeeds
from netsched.operator.metrics import OperatorMetrics

log = logging.getLogger(__name__)
HANDLER_ID = "gang-gate"  # kopf serves the handler at this URL path: /gang-gate
LIMITS_HANDLER_ID = "hard-limits"  # and this one at /hard-limits
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


Holders = Callable[[str, str], list[NodeLabels]]  # (kind, location) -> the nodes holding that data


def near_data(pod: Mapping[str, Any], scheduler: str, holders: Holders,
              topology: Topology) -> dict[str, Any] | None:
    """The pod's `affinity` with its data limit added, or None to leave the pod as it is: it names
    another scheduler, a GPUJob owns it (the operator writes its pods' limit), it has no data limit a
    topology level can say, or holds it already. Unwritable (no node holds the data, ...) passes up."""
    spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
    if spec.get("schedulerName") != scheduler or any(
            o.get("kind") == KIND and str(o.get("apiVersion", "")).startswith(f"{GROUP}/")
            for o in meta.get("ownerReferences") or ()):
        return None
    needs = NetworkNeeds.of_annotations(meta.get("annotations") or {})
    kind, location = needs.data or ("", "")

    def nodes() -> Iterator[NodeLabels]:  # read only when the limit is one a level can say
        yield from holders(kind, location)
    requirement = data_requirement(needs, nodes(), topology)
    return with_requirement(spec, requirement) if requirement else None


def keep_near_data(pod: Mapping[str, Any], scheduler: str, holders: Holders, topology: Topology,
                   metrics: OperatorMetrics) -> tuple[dict[str, Any] | None, str | None]:
    """`near_data` and the warning for the pod's creator when the limit cannot be written (counted
    `limited` when it is); never a refusal: the extender still keeps the limit."""
    meta = pod.get("metadata") or {}
    who = f"{meta.get('namespace')}/{meta.get('name') or (meta.get('generateName') or '') + '*'}"
    try:
        affinity = near_data(pod, scheduler, holders, topology)
    except Unwritable as exc:
        annotations = meta.get("annotations") or {}
        return None, (f"netsched: pod {who}: {DATA_SOURCE}={annotations.get(DATA_SOURCE)}: {exc}; until "
                      f"then kube-scheduler is not told its {MAX_DATA_DISTANCE}, only the extender keeps it")
    except Exception as exc:  # the API out of reach, a bug: the pod goes on as without this webhook
        metrics.webhook_requests.labels("error").inc()
        log.exception("hard limits of pod %s failed", who)
        return None, (f"netsched: pod {who}: its data limit could not be written as node affinity "
                      f"({type(exc).__name__}); the extender still keeps it")
    if affinity is not None:
        metrics.webhook_requests.labels("limited").inc()
    return affinity, None


def api_holders(core: client.CoreV1Api, topology: Topology) -> Holders:
    """The nodes holding data at (kind, location), from the API server's cache."""
    def holders(kind: str, location: str) -> list[NodeLabels]:
        selector = (f"metadata.name={location}" if kind == NODE else None,
                    None if kind == NODE else f"{topology.label_of(kind)}={location}")
        nodes = core.list_node(field_selector=selector[0], label_selector=selector[1], resource_version="0",
                               _request_timeout=TIMEOUT_SECONDS - 1)
        return [(n.metadata.name, n.metadata.labels or {}) for n in nodes.items]
    return holders


def register_admission(registry: kopf.OperatorRegistry, metrics: OperatorMetrics, scheduler: str,
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
