"""The hard limits: a pod's data limit (netsched.io/max-data-distance of netsched.io/data-source) as
required node affinity (netsched.jobs.hard_limits), so kube-scheduler keeps it even when it skips the
extender. Never a refusal: a limit it cannot write is left to the extender, with an admission warning."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from kubernetes import client

from netsched.api.gpujob import GROUP, KIND
from netsched.api.labels import DATA_SOURCE, MAX_DATA_DISTANCE
from netsched.api.topology import NODE, Topology
from netsched.jobs.hard_limits import NodeLabels, Unwritable, data_requirement, with_requirement
from netsched.jobs.workload import NetworkNeeds
from netsched.operator.metrics import OperatorMetrics
from netsched.operator.webhook.configurations import TIMEOUT_SECONDS

log = logging.getLogger(__name__)
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
