"""Resource quantities of nodes and pods, as kube-scheduler counts them."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kubernetes.utils import parse_quantity

Resources = dict[str, float]


def quantities(resources: dict[str, Any] | None) -> Resources:
    return {k: float(parse_quantity(v)) for k, v in (resources or {}).items()}


def pod_requests(spec: dict[str, Any]) -> Resources:
    """Summed container requests (limits where a request is missing), as the scheduler counts them."""
    total: Resources = defaultdict(float)
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        for name, value in {**quantities(res.get("limits")), **quantities(res.get("requests"))}.items():
            total[name] += value
    return dict(total)
