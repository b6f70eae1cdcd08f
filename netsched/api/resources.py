"""Resource quantities of nodes and pods, as kube-scheduler counts them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from kubernetes.utils import parse_quantity

Resources = dict[str, float]


def quantities(resources: dict[str, Any] | None) -> Resources:
    return {k: _parsed(v) if isinstance(v, str) else float(parse_quantity(v))
            for k, v in (resources or {}).items()}


@lru_cache(maxsize=1024)
def _parsed(text: str) -> float:
    """A quantity string, parsed once: a cluster's nodes and pods repeat a few dozen of them thousands of
    times, and each parse costs tens of microseconds."""
    return float(parse_quantity(text))


def pod_requests(spec: dict[str, Any]) -> Resources:
    """Summed container requests (limits where a request is missing), as the scheduler counts them."""
    total: Resources = defaultdict(float)
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        for name, value in {**quantities(res.get("limits")), **quantities(res.get("requests"))}.items():
            total[name] += value
    return dict(total)


def add_usage(*usages: Mapping[str, Resources]) -> dict[str, Resources]:
    """Per node, the requests of several counts (node -> requests) added up."""
    total: dict[str, Resources] = {}
    for usage in usages:
        for node, requests in usage.items():
            into = total.setdefault(node, {})
            for k, v in requests.items():
                into[k] = into.get(k, 0.0) + v
    return total
