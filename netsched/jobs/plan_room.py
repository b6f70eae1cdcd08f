"""The room active PackingPlans hold for the pods they place or move, counted as used on its node by gang
admission (GPUJobs and pod gangs): the extender's filter keeps that room for the plan's pods
(netsched.extender.pins), so a gang released into it would only fail to schedule, and could take it
from the pods the plan evicted others for. Kept apart from the rules of `capacity`: it is one more
input, the `used` they already take."""

from __future__ import annotations

from collections.abc import Mapping

from netsched.api.labels import GPU_RESOURCE
from netsched.api.resources import Resources


def with_plan_room(used: Mapping[str, Resources], reserved: Mapping[str, float]) -> dict[str, Resources]:
    """`used` (node -> requests of its pods) with the GPUs plans reserve on each node added."""
    out = dict(used)
    for node, gpus in reserved.items():
        if gpus > 0:
            here = dict(out.get(node) or {})
            here[GPU_RESOURCE] = here.get(GPU_RESOURCE, 0.0) + gpus
            out[node] = here
    return out
