"""`netsched.io/job-gpus`: GPUs the whole job needs, so its first pod goes where the rest fits; else
`netsched.io/replicas` times the pod's GPUs (`job_size`, which the holds read too,
netsched.extender.holds)."""

from __future__ import annotations

from collections.abc import Mapping

from netsched.api.labels import JOB_GPUS, REPLICAS, whole_number
from netsched.api.topology import DEFAULT, Topology
from netsched.extender.plugin import InvalidNeeds


def job_gpus(annotations: Mapping[str, str], topology: Topology = DEFAULT) -> int | None:
    value = annotations.get(JOB_GPUS)
    if value is None:
        return None
    gpus = whole_number(value)
    if gpus is None or gpus < 1:
        raise InvalidNeeds(f"annotation {JOB_GPUS}={value!r} must be a whole number of GPUs, at least 1")
    return gpus


def job_size(annotations: Mapping[str, str], gpus: int) -> int | None:
    """GPUs of a pod's whole job from its annotations: `netsched.io/job-gpus`, else
    `netsched.io/replicas` times the pod's GPUs; None when neither is a positive whole number."""
    for key, times in ((JOB_GPUS, 1), (REPLICAS, gpus)):
        value = whole_number(annotations.get(key))
        if value:
            return value * times
    return None
