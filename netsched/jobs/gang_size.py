"""How many members a pod gang has: what its pods say (GangRef.size), else what its owning batch Job
says (its parallelism, netsched.jobs.kinds.batch_job.members), read from the API. Gang admission and
the packer both count a gang whole by it, never by how many pods exist so far."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from kubernetes import client

from netsched.api.connect import api_message
from netsched.jobs.kinds.batch_job import BATCH_JOB, members
from netsched.jobs.pod_gangs import GangRef, controller

log = logging.getLogger(__name__)


def gang_size(batch: client.BatchV1Api, ref: GangRef, pod: Mapping[str, Any]) -> int | None:
    """The members of the gang `ref` whose member is `pod`; None when netsched cannot tell (no size on
    the pods and no batch Job owns them, or reading the Job failed: logged)."""
    if ref.size is not None:
        return ref.size
    owner = controller(pod)
    if owner is None or (owner.get("apiVersion"), owner.get("kind")) != BATCH_JOB.owner:
        return None
    try:
        resp = batch.read_namespaced_job(owner["name"], ref.namespace, _preload_content=False)
    except client.ApiException as exc:
        log.warning("reading Job %s/%s failed: %s", ref.namespace, owner["name"], api_message(exc))
        return None
    return members(json.loads(resp.data))


def to_release(size: int, live: int, gated: int) -> int:
    """Of a gang of `size` with `live` live members, `gated` of them gated: the members to release
    together. All of them, or those still to come when some already run (a Job's replacements);
    more gated than that are replacements too, all released."""
    return max(size - (live - gated), 0) or gated
