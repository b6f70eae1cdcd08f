"""The operator's Prometheus metrics (its own registry, served on --metrics-port)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

DURATION_BUCKETS = (10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400, float("inf"))


class OperatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.job_duration = Histogram(
            "netsched_gpujob_duration_seconds", "Run time of finished GPUJobs (start to finish)",
            ["outcome"], buckets=DURATION_BUCKETS, registry=self.registry)
        self.jobs_finished = Counter(
            "netsched_gpujobs_finished_total", "GPUJobs that finished, by outcome and reason",
            ["outcome", "reason"], registry=self.registry)
        self.api_errors = Counter(
            "netsched_operator_api_errors_total", "Kubernetes API calls that failed, by action",
            ["action"], registry=self.registry)
