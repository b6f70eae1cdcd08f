"""What is wrong with a GPUJob that the API server accepted but that can never run as written.

The CRD's schema cannot see inside the pod template (it is kept as the user wrote it), nor
compare the job with the cluster, nor know the cluster's topology levels (netsched.api.topology),
which name the distances a job may ask for. Each problem names the field and the fix; a job with any
waits with an `InvalidSpec` condition and one Warning instead of failing in a handler or
waiting in silence. Pure: the handler passes the job and the nodes it knows; the job is read
through the workload seam (its member pod's spec, its network needs), the messages name the
GPUJob's fields.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kubernetes.utils import parse_quantity

from netsched.api import conditions as c
from netsched.api import labels
from netsched.api.annotations import ENDPOINT, NETWORK_LIMITS, READERS, BadAnnotation, network_limit
from netsched.api.gpujob import PREDICTED_AFTER, PREDICTED_FINISH, PREDICTED_START, Phase
from netsched.api.topology import DEFAULT, Topology
from netsched.jobs.capacity import NodeRoom, domain_of
from netsched.jobs.replica_pods import NETWORK_ANNOTATIONS
from netsched.jobs.workload import Workload

ANNOTATIONS_LIMIT = 256 * 1024  # bytes: the API server's limit on a pod's annotations, keys and values
TEMPLATE = "spec.template.spec"
PREDICTIONS = (PREDICTED_START, PREDICTED_AFTER, PREDICTED_FINISH)  # the times a Blocked job has none of


def problems(job: Workload, annotations: dict[str, str], nodes: list[NodeRoom],
             spec_fields: bool = True, topology: Topology = DEFAULT) -> list[str]:
    """Everything wrong with `job`, given the annotations its pods will carry (the template's plus
    netsched's), the cluster's nodes and its topology. `spec_fields`: the workload has GPUJob's
    spec.network fields to offer instead of an annotation (a pod gang has only the annotations)."""
    levels = _levels(job, topology) if spec_fields else []
    found = [*_pod_template(job.member_spec), *levels,
             *_annotation_values(annotations, spec_fields, job, topology)]
    size = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in annotations.items())
    if size > ANNOTATIONS_LIMIT:
        found.append(f"spec.template.metadata.annotations: {size} bytes with netsched's own, over the API "
                     f"server's {ANNOTATIONS_LIMIT} (256 kB); keep large values in a ConfigMap or a volume")
    return found + ([] if levels else _data(job, nodes, topology))


def _levels(job: Workload, topology: Topology) -> list[str]:
    """The level names a GPUJob's spec writes that the cluster's topology does not have. The API server
    takes any name: only the operator knows the levels configured."""
    needs = job.needs
    named = [("spec.network.maxPeerDistance", needs.max_peer_distance),
             ("spec.network.maxDataDistance", needs.max_data_distance),
             ("spec.dataSources[0].kind", needs.data[0] if needs.data else None)]
    return [f"{field}: {topology.unknown(name)}" for field, name in named
            if name is not None and name not in (*topology.limits, ENDPOINT)]


def _annotation_values(annotations: dict[str, str], spec_fields: bool, job: Workload,
                       topology: Topology) -> list[str]:
    """The netsched annotations a template sets by hand, as the extender will read them: a value it
    refuses would leave the pods unscheduled with no word on the job. Those a GPUJob's spec sets are
    said by `_levels`, under the spec's field."""
    found = []
    from_spec = {labels.MAX_PEER_DISTANCE: job.needs.max_peer_distance,
                 labels.MAX_DATA_DISTANCE: job.needs.max_data_distance,
                 labels.DATA_SOURCE: job.needs.data} if spec_fields else {}
    for key, value in annotations.items():
        if from_spec.get(key) is not None:
            continue
        field = _ANNOTATION_FIELDS.get(key) if spec_fields else None
        instead = f", or set {field} instead" if field else ""
        at = f"spec.template.metadata.annotations[{key}]"
        if key in _DISTANCES:
            if not _allowed(key, value, topology):
                found.append(f"{at}: {topology.unknown(value)}{instead}")
            continue
        allowed = _ANNOTATION_VALUES.get(key)
        if allowed is not None and not _allowed(key, value, topology):
            found.append(f"{at}: {value!r} is not allowed; write {allowed(topology)}{instead}")
    return found


def _allowed(key: str, value: str, topology: Topology) -> bool:
    """Whether the extender takes `value` for annotation `key` (netsched.api.annotations' rules)."""
    try:
        if key in NETWORK_LIMITS:
            network_limit({key: value}, key, any_size=True)
        else:
            READERS[key]({key: value}, topology)
    except BadAnnotation:
        return False
    return True


_DISTANCES = (labels.MAX_PEER_DISTANCE, labels.MAX_DATA_DISTANCE)
_ANNOTATION_VALUES: dict[str, Callable[[Topology], str]] = {  # annotation -> the allowed values in words
    labels.DATA_SOURCE: lambda t: f"<kind>:<name>, kind one of {', '.join(t.limits)}, {ENDPOINT}, "
                                  f"e.g. {t.names[-1]}:a",
    **{key: lambda t: "a positive number, e.g. 2.5" for key in NETWORK_LIMITS},
}
_ANNOTATION_FIELDS = {annotation: f"spec.network.{name}" for name, annotation in NETWORK_ANNOTATIONS.items()}


def _pod_template(pod: dict[str, Any]) -> list[str]:
    found: list[str] = []
    gates = pod.get("schedulingGates")
    if gates is not None and not _list_of_named(gates):
        found.append(f"{TEMPLATE}.schedulingGates: {gates!r} is not a list of {{name: ...}} entries; "
                     "write e.g. [{name: my-gate}] or leave it out")
    containers = pod.get("containers")
    if not isinstance(containers, list) or not containers or not all(isinstance(x, dict) for x in containers):
        return [*found, f"{TEMPLATE}.containers: {containers!r} is not a list of containers; "
                        "write at least one, e.g. [{name: main, image: trainer:1}]"]
    for i, container in enumerate(containers):
        at = f"{TEMPLATE}.containers[{i}]"
        env = container.get("env")
        if env is not None and not _list_of_named(env):
            found.append(f"{at}.env: {env!r} is not a list of {{name, value}} entries; "
                         "write e.g. [{name: A, value: '1'}]")
        resources = container.get("resources") or {}
        if not isinstance(resources, dict):
            found.append(f"{at}.resources: {resources!r} is not a map; write e.g. {{requests: {{cpu: '2'}}}}")
            continue
        for kind in ("requests", "limits"):
            values = resources.get(kind) or {}
            if not isinstance(values, dict):
                found.append(f"{at}.resources.{kind}: {values!r} is not a map of quantities")
                continue
            for name, value in values.items():
                wrong = _quantity(value)
                if wrong:
                    found.append(f"{at}.resources.{kind}.{name}: {value!r} {wrong}; "
                                 "write e.g. 500m, 2 or 16Gi")
    return found


def _data(job: Workload, nodes: list[NodeRoom], topology: Topology) -> list[str]:
    distance, data = job.needs.max_data_distance, job.needs.data
    if distance is None or distance not in topology.limits:
        return []  # an unknown level is said on its own
    places = _or(topology.limits)
    if data is None:
        return [f"spec.network.maxDataDistance {distance!r} needs spec.dataSources to say where the data is; "
                f"add a data source (kind {places}) or remove maxDataDistance"]
    kind, location = data
    if kind not in topology.limits:
        return [f"spec.network.maxDataDistance needs spec.dataSources[0] at a {places}, not a "
                f"{kind}; for an endpoint bound the measured link instead (maxDataRttMs, "
                "minDataBandwidthMbps)"]
    if topology.distance_of(distance) < topology.distance_of(kind):
        return [f"spec.network.maxDataDistance {distance!r} is finer than spec.dataSources[0], known only to "
                f"its {kind}; set maxDataDistance to {kind} (or wider), or name the data's {distance}"]
    label = topology.label_of(kind)
    known = sorted({domain_of(n, kind, topology) for n in nodes if label in n.labels})
    if nodes and location not in known:
        return [f"spec.dataSources[0].location {location!r}: no node has {label}={location}; name one of "
                f"{', '.join(known[:10]) or 'none'}{' ...' if len(known) > 10 else ''}"]
    return []


def _or(names: tuple[str, ...]) -> str:
    """"node, rack or zone"."""
    return f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]


def _list_of_named(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(x, dict) and isinstance(x.get("name"), str)
                                           for x in value)


def _quantity(value: object) -> str | None:
    """What is wrong with a resource quantity, None if nothing."""
    try:
        amount = parse_quantity(value)
    except (ValueError, TypeError, ArithmeticError):
        return "is not a Kubernetes quantity"
    # the API server keeps e.g. 1e1000 as written; every count netsched makes of it would overflow
    return None if math.isfinite(float(amount)) else "is larger than any real machine has"


def invalid(status: dict[str, Any], found: list[str], generation: int) -> tuple[dict[str, Any], str | None]:
    """The status of a job with problems, and the Warning to post (None: the same problems were
    already said). Blocked, as a job that never fits: it waits for its owner to change it, not for room,
    so it has no predicted start either."""
    new = {**status, "conditions": [dict(x) for x in status.get("conditions") or []],
           "phase": Phase.BLOCKED, "reason": c.INVALID_SPEC, "observedGeneration": generation}
    new.update({name: None for name in PREDICTIONS if status.get(name) is not None})
    message = "; ".join(found)
    changed = c.set_condition(new["conditions"], c.PODS_READY, False, c.INVALID_SPEC, message, generation)
    old = c.find(status.get("conditions") or [], c.PODS_READY)
    said = not changed and old is not None and old.get("message") == message[:c.MAX_MESSAGE]
    return new, None if said else message
