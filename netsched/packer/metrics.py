"""The packer's Prometheus metrics, and the error counters of the process that runs it.

The operator runs the packer and serves one registry on --metrics-port: its metrics
(netsched.operator.metrics) extend these, so the packer and the operator's own loops count
failures in the same two counters, registered once.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

SOLVE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, float("inf"))


class PackerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.api_errors = Counter(
            "netsched_operator_api_errors_total", "Kubernetes API calls that failed, by action",
            ["action"], registry=self.registry)
        self.loop_errors = Counter(
            "netsched_operator_loop_errors_total", "Exceptions a background loop caught and went on after",
            ["loop"], registry=self.registry)
        self.pack_solves = Counter(
            "netsched_packer_solves_total", "Packer solves, by what came of them (plan, no_gain)",
            ["result"], registry=self.registry)
        self.pack_seconds = Histogram(
            "netsched_packer_solve_seconds", "Wall time of each packer solve", buckets=SOLVE_BUCKETS,
            registry=self.registry)
        self.evictions = Counter(
            "netsched_packer_evictions_total", "Pods PackingPlans evicted (Evictions the API server took, "
            "or whose pod was gone already)", registry=self.registry)
        self.plans_finished = Counter(
            "netsched_packing_plans_finished_total", "PackingPlans that ended, by phase (Succeeded, "
            "Failed, TimedOut, Abandoned) and reason",
            ["phase", "reason"], registry=self.registry)
