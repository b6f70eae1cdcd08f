"""A GPUJob's spec as the operator uses it, with the CRD's defaults applied: the first workload kind.

The API server validates the spec (OpenAPI schema and CEL rules in
netsched/crds/gpujobs.netsched.io.yaml); this only reads it. Its replicas are the gang's members
(netsched.jobs.workload); its pods are built by netsched.jobs.replica_pods.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from netsched.api.gpujob import GROUP, KIND, VERSION
from netsched.api.labels import EVICTED_BY, GPU_RESOURCE
from netsched.api.plans import Eviction
from netsched.api.resources import Resources, pod_requests
from netsched.jobs.workload import GPUJOB_FIELDS, NetworkNeeds, SizeFields


@dataclass(frozen=True)
class DataSource:
    name: str
    kind: str  # node, rack, zone or endpoint
    location: str  # node/rack/zone name, or host:port for an endpoint
    size_gb: float | None = None


@dataclass(frozen=True)
class GPUJob:
    namespace: str
    name: str
    uid: str
    generation: int
    created: str  # metadata.creationTimestamp
    replicas: int
    gpus_per_replica: int
    template: dict[str, Any]
    priority_class: str | None = None
    gang: bool = True
    min_available: int = 0
    scheduling_timeout: int | None = None
    max_runtime: int | None = None
    backoff_limit: int = 3
    data_sources: tuple[DataSource, ...] = ()
    network: dict[str, Any] = field(default_factory=dict)
    workload: dict[str, Any] = field(default_factory=dict)
    evicted_by: Eviction | None = None  # the PackingPlan that last evicted its pods, as the packer said

    @classmethod
    def of(cls, body: dict[str, Any]) -> GPUJob:
        """The job in a GPUJob object (a plain dict, as the API server hands it out)."""
        meta, spec = body["metadata"], body["spec"]
        gang = spec.get("gang") or {}
        sources = tuple(
            DataSource(s["name"], s["kind"],
                       s.get("endpoint") if s["kind"] == "endpoint" else s.get("location"), s.get("sizeGB"))
            for s in spec.get("dataSources") or ())
        return cls(
            namespace=meta["namespace"], name=meta["name"], uid=meta["uid"],
            generation=meta.get("generation", 1), created=meta.get("creationTimestamp", ""),
            replicas=spec["replicas"], gpus_per_replica=spec["gpusPerReplica"], template=spec["template"],
            priority_class=spec.get("priorityClassName"),
            gang=gang.get("enabled", True),
            min_available=gang.get("minAvailable") or spec["replicas"],
            scheduling_timeout=gang.get("schedulingTimeoutSeconds"),
            max_runtime=spec.get("maxRuntimeSeconds"),
            backoff_limit=spec.get("backoffLimit", 3),
            data_sources=sources,
            network=dict(spec.get("network") or {}),
            workload=dict(spec.get("workload") or {}),
            evicted_by=Eviction.of((meta.get("annotations") or {}).get(EVICTED_BY)),
        )

    @property
    def gpus(self) -> int:
        return self.replicas * self.gpus_per_replica

    @property
    def data(self) -> tuple[str, str] | None:
        """(kind, location) of the data source that steers placement (the first), if any."""
        return (self.data_sources[0].kind, self.data_sources[0].location) if self.data_sources else None

    @property
    def priority_class_name(self) -> str | None:
        """The PriorityClass its pods name: the spec's, else the template's."""
        name: str | None = self.priority_class or self.template["spec"].get("priorityClassName")
        return name

    @property
    def key(self) -> tuple[str, str, str]:
        """How the operator's pod index finds this job's pods (a re-created job has a new uid)."""
        return self.namespace, self.name, self.uid

    def owner_reference(self) -> dict[str, Any]:
        return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "name": self.name, "uid": self.uid,
                "controller": True, "blockOwnerDeletion": True}

    def involved(self) -> dict[str, Any]:
        """This job as an Event's involvedObject."""
        return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "namespace": self.namespace,
                "name": self.name, "uid": self.uid}

    # ---- the workload seam (netsched.jobs.workload.Workload) -------------------------------
    @property
    def size(self) -> int:
        return self.replicas

    @property
    def gpus_per_member(self) -> int:
        return self.gpus_per_replica

    @cached_property
    def member_request(self) -> Resources:
        """What one replica asks for, as its pod (netsched.jobs.replica_pods) will: the template's
        containers, the first given the replica's GPUs. Worked out once: the forecast asks at every
        step."""
        spec = copy.deepcopy(self.template["spec"])
        give_gpus(spec["containers"][0], self.gpus_per_replica)
        return pod_requests(spec)

    @property
    def member_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.template.get("spec") or {}
        return spec

    @property
    def needs(self) -> NetworkNeeds:
        network = self.network
        return NetworkNeeds(network.get("maxPeerDistance"), network.get("maxDataDistance"), self.data)

    @property
    def workload_kind(self) -> str:
        kind: str = self.workload.get("kind", "training")
        return kind

    @property
    def expected_seconds(self) -> float | None:
        seconds: float | None = self.workload.get("expectedDurationSeconds")
        return seconds

    @property
    def fields(self) -> SizeFields:
        return GPUJOB_FIELDS


def give_gpus(container: dict[str, Any], gpus: int) -> None:
    """A replica's GPUs: its (first) container's GPU limit and request, whatever the template says."""
    resources = container.setdefault("resources", {})
    for kind in ("limits", "requests"):
        resources.setdefault(kind, {})[GPU_RESOURCE] = str(gpus)
