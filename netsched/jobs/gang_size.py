"""How many members a pod gang has when its pods leave it unsaid: read from the API object that says
it (a batch Job's parallelism, a PodGroup's minMember, a Kubeflow job's replicas:
netsched.jobs.pod_gangs.size_object). Gang admission and the packer both count a gang whole by it,
never by how many pods exist so far."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kubernetes import client

from netsched.api.connect import api_message
from netsched.jobs.pod_gangs import GangRef, size_object

log = logging.getLogger(__name__)


def read_size(objects: client.CustomObjectsApi, pod: Mapping[str, Any],
              ref: GangRef) -> tuple[int | None, str]:
    """The size of a gang only an API object knows (a Job's, a PodGroup's, a Kubeflow job's), or None
    and why not, for the Warning (the API does not serve the object's CRD, or has no such object)."""
    where = size_object(pod, ref)
    if where is None:
        return None, ""
    try:
        body = objects.get_namespaced_custom_object(where.group, where.version, where.namespace, where.plural,
                                                    where.name)
    except client.ApiException as exc:
        if exc.status == 404:
            return None, f": the API has no {where}"
        log.warning("reading %s failed: %s", where, api_message(exc))
        return None, f": reading {where} failed ({api_message(exc)})"
    size = where.size(body)
    return size, "" if size is not None else f": {where} does not say it"


def gang_size(objects: client.CustomObjectsApi, ref: GangRef, pod: Mapping[str, Any]) -> int | None:
    """The members of the gang `ref` whose member is `pod`: what its pods say, else what its object says;
    None when netsched cannot tell."""
    return ref.size if ref.size is not None else read_size(objects, pod, ref)[0]
