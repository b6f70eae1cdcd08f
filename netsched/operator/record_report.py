"""`netsched report`'s figures for this ISO week and the last, as Prometheus gauges of the operator, read
from its job records when Prometheus scrapes: jobs, GPU-hours, time queued (p50 / p95) and, with
`--model`, the estimated gain over kube-scheduler's default and the GPU-hours it saved, with the bounds of
their 95% bootstrap intervals (netsched.records.gain; what they mean: docs/record-format.md).

The figures are worked out again at a scrape only when the records file changed and REFRESH seconds have
passed since the last time (a finished job changes the file; a year of records costs about a second to
read), so they are at most REFRESH seconds older than the file. A file or model that cannot be read
leaves the last figures in place and is logged, never an error on /metrics.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from netsched.models.artifact import artifact_stamp
from netsched.models.errors import SchemaError
from netsched.models.predictor import Predictor
from netsched.records.gain import predicted_times
from netsched.records.weekly import WeekClass, by_week_and_class, week_of
from netsched.records.writer import JobRecords

log = logging.getLogger(__name__)
REFRESH = 60.0
LABELS = ["week", "priority_class"]


class RecordReport(Collector):
    def __init__(self, clock: Callable[[], float] = time.time, refresh: float = REFRESH):
        self.clock, self.refresh = clock, refresh
        self._lock = threading.Lock()
        self._records: JobRecords | None = None
        self._model: Path | None = None
        self._predictor: tuple[Any, Predictor | None] = (None, None)  # (artifact stamp, model)
        self._seen: tuple[Any, str] | None = None  # (file stamp, this week) the figures are of
        self._at = -float("inf")
        self._rows: list[tuple[str, WeekClass]] = []

    def watch(self, records: JobRecords, model: Path | None = None) -> None:
        """Report on these records, with the gain when a model is given."""
        with self._lock:
            self._records, self._model, self._seen = records, model, None

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield from _families([])

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            self._refresh()
            rows = list(self._rows)
        yield from _families(rows)

    def _refresh(self) -> None:
        if self._records is None:
            return
        now = self.clock()
        this_week = week_of(datetime.fromtimestamp(now, UTC).isoformat())
        seen = (self._records.stamp(), this_week)
        if seen == self._seen or now - self._at < self.refresh:
            return
        self._at = now
        try:
            self._rows = self._work_out(self._records.rows(), now)
            self._seen = seen
        except (OSError, SchemaError, ValueError, KeyError, TypeError) as exc:
            log.warning("the report gauges keep their last figures: records %s: %s", self._records.path, exc)

    def _work_out(self, records: Sequence[dict[str, Any]], now: float) -> list[tuple[str, WeekClass]]:
        weeks = {week_of(datetime.fromtimestamp(now - back, UTC).isoformat()): name
                 for back, name in ((timedelta(weeks=1).total_seconds(), "previous"), (0, "current"))}
        recent = [r for r in records
                  if r.get("completion_time") and week_of(str(r["completion_time"])) in weeks]
        predictor = self._load_model()
        times = predicted_times(recent, predictor) if predictor is not None and recent else None
        return [(weeks[row.week], row) for row in by_week_and_class(recent, times)]

    def _load_model(self) -> Predictor | None:
        if self._model is None:
            return None
        stamp = artifact_stamp(self._model)
        if stamp != self._predictor[0]:
            try:
                self._predictor = (stamp, Predictor.load(self._model))
            except (OSError, SchemaError) as exc:
                log.warning("the report gauges estimate no gain until the model %s can be read: %s",
                            self._model, exc)
                self._predictor = (stamp, None)
        return self._predictor[1]


def _families(rows: list[tuple[str, WeekClass]]) -> Iterator[GaugeMetricFamily]:
    jobs = GaugeMetricFamily("netsched_report_jobs", "Finished GPUJobs by ISO week of completion (current, "
                             "previous) and priority class, from the operator's job records", labels=LABELS)
    hours = GaugeMetricFamily("netsched_report_gpu_hours", "GPU-hours (GPUs x run time) of the GPUJobs that "
                              "finished in the week, by priority class", labels=LABELS)
    queued = GaugeMetricFamily("netsched_report_queue_seconds", "Time the week's finished GPUJobs queued "
                               "(creation to running), p50 and p95 (nearest rank)",
                               labels=[*LABELS, "quantile"])
    gain = GaugeMetricFamily("netsched_report_estimated_gain_ratio", "Estimated share of completion time "
                             "netsched saved against kube-scheduler's default (model-based, netsched "
                             "report): the estimate and its 95% bootstrap bounds; absent without --model",
                             labels=[*LABELS, "bound"])
    saved = GaugeMetricFamily("netsched_report_gpu_hours_saved", "Estimated GPU-hours saved against "
                              "kube-scheduler's default in the week: the estimate and its 95% bootstrap "
                              "bounds; absent without --model", labels=[*LABELS, "bound"])
    for name, row in rows:
        labels = [name, row.priority_class]
        jobs.add_metric(labels, row.jobs)
        hours.add_metric(labels, row.gpu_hours)
        for quantile, value in (("0.5", row.queue_p50), ("0.95", row.queue_p95)):
            if value is not None:
                queued.add_metric([*labels, quantile], value)
        if row.gain is not None:
            for bound, ratio, hours_saved in (
                    ("estimate", row.gain.gain, row.gain.gpu_hours_saved),
                    ("low", row.gain.gain_low, row.gain.gpu_hours_low),
                    ("high", row.gain.gain_high, row.gain.gpu_hours_high)):
                gain.add_metric([*labels, bound], ratio)
                saved.add_metric([*labels, bound], hours_saved)
    yield from (jobs, hours, queued, gain, saved)
