"""The operator's Prometheus metrics (its own registry, served on --metrics-port): the packer's, with the
error counters every loop of the process shares (netsched.packer.metrics), and the GPUJobs'."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from netsched.packer.metrics import PackerMetrics

DURATION_BUCKETS = (10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400, float("inf"))


class OperatorMetrics(PackerMetrics):
    def __init__(self) -> None:
        super().__init__()
        self.job_duration = Histogram(
            "netsched_gpujob_duration_seconds", "Run time of finished GPUJobs (start to finish)",
            ["outcome"], buckets=DURATION_BUCKETS, registry=self.registry)
        self.jobs_finished = Counter(
            "netsched_gpujobs_finished_total", "GPUJobs that finished, by outcome and reason",
            ["outcome", "reason"], registry=self.registry)
        self.record_errors = Counter(
            "netsched_operator_record_errors_total", "Job records that could not be written yet (the "
            "records file unreadable or unwritable; each is tried again at a later tick)",
            registry=self.registry)
        self.reconcile_errors = Counter(
            "netsched_operator_reconcile_errors_total", "GPUJob ticks that raised (logged, said on the job)",
            registry=self.registry)
        self.predicted_remaining = Gauge(
            "netsched_gpujob_predicted_remaining_seconds", "Seconds until each unfinished GPUJob is "
            "predicted to complete (waiting jobs: from their predicted start)", ["namespace", "gpujob"],
            registry=self.registry)
