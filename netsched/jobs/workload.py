"""The workload seam: what the gang rules read of a workload, whatever its kind.

Fit and placement (capacity), validation and the forecast read a gang only through `Workload`;
a GPUJob (netsched.jobs.gpujob) is the first kind. Another kind (a batch Job, a JobSet group) is
one more class with these properties: the rules then count, place and forecast it unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from netsched.api.annotations import data_source_as_written
from netsched.api.labels import GPU_RESOURCE, MAX_DATA_DISTANCE, MAX_PEER_DISTANCE
from netsched.api.resources import Resources


@dataclass(frozen=True)
class NetworkNeeds:
    """The network limits the rules enforce (the extender reads the same ones from pod annotations)."""
    # the topology constraint: node, rack or zone, every member within one
    max_peer_distance: str | None = None
    max_data_distance: str | None = None  # node, rack or zone: every member within this of the data
    data: tuple[str, str] | None = None  # (kind, location) of the data source that steers placement

    @classmethod
    def of_annotations(cls, annotations: Mapping[str, str]) -> NetworkNeeds:
        """As a pod's `netsched.io/*` annotations say them (netsched.jobs.validation says what is wrong
        with them)."""
        data = data_source_as_written(annotations)
        return cls(annotations.get(MAX_PEER_DISTANCE), annotations.get(MAX_DATA_DISTANCE),
                   data if data and data[1] else None)


@dataclass(frozen=True)
class SizeFields:
    """Where the user of a workload kind sets what a gang that never fits must change, in the kind's own
    words: the fix a message names (`netsched.jobs.capacity.never_fits`) is a field of the object the user
    wrote, never another kind's."""
    size: str  # what to lower for fewer members, e.g. "spec.replicas or spec.gang.minAvailable"
    at_most: str  # the one field that caps the members released together, e.g. "spec.gang.minAvailable"
    gpus: str  # where a member's GPUs are asked for, e.g. "spec.gpusPerReplica"
    peer_distance: str = "maxPeerDistance"  # the field or annotation of the peer distance
    data_distance: str = "maxDataDistance"


GPUJOB_FIELDS = SizeFields("spec.replicas or spec.gang.minAvailable", "spec.gang.minAvailable",
                           "spec.gpusPerReplica")
# a pod gang says its network needs in its pods' annotations
POD_ANNOTATIONS = {"peer_distance": MAX_PEER_DISTANCE, "data_distance": MAX_DATA_DISTANCE}


def pod_gang_fields(size: str, at_most: str, pod_spec: str) -> SizeFields:
    """The fields of a pod gang kind whose pods' spec is at `pod_spec` in the object the user writes."""
    return SizeFields(size, at_most, f"the {GPU_RESOURCE} limit of {pod_spec}.containers[]",
                      **POD_ANNOTATIONS)


class Workload(Protocol):
    """A gang: `size` members (numbered 0 to size - 1), each a pod of the same shape."""

    @property
    def size(self) -> int:
        """Members the workload runs."""

    @property
    def min_available(self) -> int:
        """Members that must fit at once before any is released: the gang."""

    @property
    def gpus_per_member(self) -> int: ...

    @property
    def member_request(self) -> Resources:
        """What one member's pod asks for (GPUs, CPU, memory, ...), as kube-scheduler counts it."""

    @property
    def member_spec(self) -> dict[str, Any]:
        """A member pod's spec: its nodeSelector, required node affinity and tolerations decide the
        nodes it may use."""

    @property
    def priority_class_name(self) -> str | None: ...

    @property
    def needs(self) -> NetworkNeeds: ...

    @property
    def workload_kind(self) -> str:
        """training, inference, ...: the forecast learns run times per kind."""

    @property
    def expected_seconds(self) -> float | None:
        """How long the user says it runs, if they do."""

    @property
    def fields(self) -> SizeFields:
        """The kind's own names for what its messages ask to change."""
