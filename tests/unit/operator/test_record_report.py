"""The operator's report gauges (netsched.operator.record_report): this week's and last week's figures
from its job records, the estimated gain with a model, and figures kept between refreshes."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from netsched.operator.metrics import OperatorMetrics
from netsched.operator.record_report import RecordReport
from netsched.records.writer import JobRecords
from netsched.testing.records import START, generated_records, operator_record

MODEL = Path(__file__).resolve().parents[3] / "models" / "current.json"
NOW = (START + timedelta(days=8)).timestamp()  # 2026-01-09: ISO week 2026-W02; START is in 2026-W01


def metrics_on(path: Path, model: Path | None = None, now: float = NOW) -> OperatorMetrics:
    metrics = OperatorMetrics()
    metrics.report.clock = lambda: now
    metrics.report.watch(JobRecords(path), model)
    return metrics


def value(metrics: OperatorMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_no_records_exports_the_families_and_no_series(tmp_path):
    metrics = metrics_on(tmp_path / "records.jsonl")
    assert value(metrics, "netsched_report_jobs", week="current", priority_class="(none)") is None
    assert {m.name for m in metrics.registry.collect()} >= {
        "netsched_report_jobs", "netsched_report_gpu_hours", "netsched_report_queue_seconds",
        "netsched_report_estimated_gain_ratio"}


def test_this_weeks_and_last_weeks_jobs_by_hand(tmp_path):
    last_week = [operator_record(["a1-0"], uid=f"old-{k}", seconds=3600, priority_class="high", queued=60)
                 for k in range(2)]  # START: 2026-W01, 4 GPUs for an hour each
    this_week = [operator_record(["a1-0", "a1-1"], uid="new", start=START + timedelta(days=7), seconds=1800,
                                 queued=120)]
    older = [operator_record(["a1-0"], uid="older", start=START - timedelta(days=14))]
    metrics = metrics_on(write(tmp_path / "records.jsonl", last_week + this_week + older))
    assert value(metrics, "netsched_report_jobs", week="previous", priority_class="high") == 2
    assert value(metrics, "netsched_report_gpu_hours", week="previous", priority_class="high") == 8.0
    assert value(metrics, "netsched_report_jobs", week="current", priority_class="(none)") == 1
    assert value(metrics, "netsched_report_gpu_hours", week="current", priority_class="(none)") == 4.0
    assert value(metrics, "netsched_report_queue_seconds", week="current", priority_class="(none)",
                 quantile="0.95") == 120
    assert value(metrics, "netsched_report_estimated_gain_ratio", week="current", priority_class="(none)",
                 bound="estimate") is None  # no model


def test_with_the_shipped_model_the_gain_and_its_bounds(tmp_path):
    path = generated_records(tmp_path / "records.jsonl", jobs=200, days=14)
    metrics = metrics_on(path, MODEL, now=(START + timedelta(days=10)).timestamp())
    bounds = [value(metrics, "netsched_report_estimated_gain_ratio", week="current", priority_class="batch",
                    bound=b) for b in ("low", "estimate", "high")]
    assert None not in bounds and bounds[0] <= bounds[1] <= bounds[2]
    assert value(metrics, "netsched_report_gpu_hours_saved", week="current", priority_class="batch",
                 bound="estimate") is not None


def test_figures_are_kept_until_the_file_changes_and_the_refresh_has_passed(tmp_path):
    path = write(tmp_path / "records.jsonl",
                 [operator_record(["a1-0"], uid="a", start=START + timedelta(days=7))])
    report = RecordReport(clock=lambda: NOW, refresh=60)
    report.watch(JobRecords(path))
    jobs = lambda: next(m for m in report.collect() if m.name == "netsched_report_jobs").samples  # noqa: E731
    assert [s.value for s in jobs()] == [1]
    with open(path, "a") as f:
        f.write(json.dumps(operator_record(["a1-0"], uid="b", start=START + timedelta(days=7))) + "\n")
    assert [s.value for s in jobs()] == [1]  # changed, but within the refresh
    report.clock = lambda: NOW + 61
    assert [s.value for s in jobs()] == [2]
