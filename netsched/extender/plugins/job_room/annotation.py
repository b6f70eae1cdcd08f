"""`netsched.io/job-gpus`: GPUs the whole job needs, so its first pod goes where the rest fits; else
`netsched.io/replicas` times the pod's GPUs (`job_size`, which the holds read too,
netsched.extender.holds)."""

from __future__ import annotations

from collections.abc import Mapping

from netsched.api import annotations as read
from netsched.api.topology import DEFAULT, Topology
from netsched.extender.plugin import InvalidNeeds


def job_gpus(annotations: Mapping[str, str], topology: Topology = DEFAULT) -> int | None:
    try:
        return read.job_gpus(annotations, topology)
    except read.BadAnnotation as exc:
        raise InvalidNeeds(str(exc)) from exc


def job_size(annotations: Mapping[str, str], gpus: int) -> int | None:
    """GPUs of a pod's whole job from its annotations: `netsched.io/job-gpus`, else
    `netsched.io/replicas` times the pod's GPUs; None when neither is a positive whole number."""
    for reader, times in ((read.job_gpus, 1), (read.replicas, gpus)):
        value = read.ignoring_bad(reader, annotations)
        if value:
            return value * times
    return None
