"""The operator's Prometheus metrics (its own registry, served on --metrics-port)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

SOLVE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, float("inf"))

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
        self.record_errors = Counter(
            "netsched_operator_record_errors_total", "Job records that could not be written yet (the "
            "records file unreadable or unwritable; each is tried again at a later tick)",
            registry=self.registry)
        self.reconcile_errors = Counter(
            "netsched_operator_reconcile_errors_total", "GPUJob ticks that raised (logged, said on the job)",
            registry=self.registry)
        self.loop_errors = Counter(
            "netsched_operator_loop_errors_total", "Exceptions a background loop caught and went on after",
            ["loop"], registry=self.registry)
        self.predicted_remaining = Gauge(
            "netsched_gpujob_predicted_remaining_seconds", "Seconds until each unfinished GPUJob is "
            "predicted to complete (waiting jobs: from their predicted start)", ["namespace", "gpujob"],
            registry=self.registry)
        self.pack_solves = Counter(
            "netsched_packer_solves_total", "Packer solves, by what came of them (plan, no_gain)",
            ["result"], registry=self.registry)
        self.pack_seconds = Histogram(
            "netsched_packer_solve_seconds", "Wall time of each packer solve", buckets=SOLVE_BUCKETS,
            registry=self.registry)
        self.plans_finished = Counter(
            "netsched_packing_plans_finished_total", "PackingPlans that ended, by phase and reason",
            ["phase", "reason"], registry=self.registry)
