"""The forecast loop: every `interval` seconds, predicted start and completion times for every
unfinished GPUJob (netsched.jobs.forecast), written into its status and a gauge.

Status fields: `predictedStartTime` while the job waits for room (and `predictedAfter`, the jobs
whose predicted end lets it start), `predictedCompletionTime` while it waits or runs,
`predictedDurationSeconds` and `predictionBasis` (where the estimate comes from), and once, the first
forecast as played (`firstForecast`, kept until the job ends and recorded with it: how far such
forecasts missed corrects the next ones' intervals, netsched.jobs.forecast_errors).
Pod gangs (batch Jobs, JobSet-labelled Jobs, ...) are forecast in the same queue; a gang's times are
annotations (PREDICTED_START while it waits, PREDICTED_FINISH while it waits or runs) on the objects
netsched.jobs.live_gangs names (its batch Jobs, or the first pod of an ownerless gang), taken off
once its pods are done or it has no forecast. A time is written again only when it moved by more
than a tenth of what is left (at least MIN_MOVE seconds, forecaster.patches), so a steady forecast costs
no API writes.
Nodes and pods come from the operator's own watches (a ClusterView: the ClusterIndex), GPUJobs and
batch Jobs from one list each per pass: listing every node and pod each pass grew faster than the
cluster (0.34 s a pass at 1,000 nodes, 6.6 s at 5,000). A Blocked job gets no predicted time; a
job whose spec cannot be read gets none either, its basis says why (its InvalidSpec condition names
the fix), and the others are forecast as ever. What a pass raises is counted, logged once with its
traceback, and the next pass runs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from kubernetes import client

from netsched.api.connect import api_message, items
from netsched.api.gpujob import GROUP, PLURAL, TERMINAL, VERSION
from netsched.api.labels import (
    PREDICTED_FINISH,
    PREDICTED_FINISH_RANGE,
    PREDICTED_START,
    PREDICTED_START_RANGE,
)
from netsched.api.topology import DEFAULT, Topology
from netsched.jobs.capacity import NodeRoom
from netsched.jobs.forecast import Forecast, Learned, cluster_forecast
from netsched.jobs.gang_size import read_size
from netsched.jobs.live_gangs import LiveGang, live_gangs, unsized
from netsched.jobs.pod_gangs import GangRef
from netsched.models.artifact import Stamp, artifact_stamp
from netsched.models.predictor import Predictor
from netsched.operator.forecaster.patches import no_times, status_patch, times_patch, wanted_times
from netsched.operator.metrics import OperatorMetrics
from netsched.records.writer import JobRecords

log = logging.getLogger(__name__)
_KIND = {"jobs": "Job", "pods": "Pod"}


class ClusterView(Protocol):
    """The nodes and pods a pass reads (netsched.operator.cluster_index.ClusterIndex)."""

    @property
    def synced(self) -> bool: ...  # every kind listed once: before that, what it holds is partial

    def rooms(self) -> list[NodeRoom]: ...

    def pods(self) -> list[dict[str, Any]]: ...  # every pod, finished ones too (they may carry times)


class Forecaster:
    def __init__(self, api: client.ApiClient, records: JobRecords, metrics: OperatorMetrics,
                 cluster: ClusterView, interval: float = 15.0, gangs_live: Callable[[], bool] = lambda: True,
                 model: Path | None = None, topology: Topology = DEFAULT,
                 leads: Callable[[], bool] = lambda: True):
        """`cluster` holds the nodes and pods;
        `gangs_live` says whether any pod gang has a live pod (the ClusterIndex knows without a list);
        `model` is the completion-time model's artifact (None: forecasts without one); `leads` whether
        this operator replica acts (netsched.operator.leadership): only the leader forecasts."""
        self.api, self.records, self.metrics, self.interval = api, records, metrics, interval
        self.cluster = cluster
        self.model_path = model
        self.model: Predictor | None = None
        self._model_stamp: Stamp | None = None
        self.gangs_live = gangs_live
        self.topology = topology
        self.leads = leads
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.batch = client.BatchV1Api(api)
        self._annotated = {"jobs", "pods"}  # what may carry predicted times: the first pass looks at both
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._last_error: str | None = None
        self._gauged: set[tuple[str, str]] = set()
        self._unreadable: dict[str, str] = {}  # namespace/name -> why it has no forecast, as last logged
        self._learned: tuple[Any, Learned] | None = None  # (what it was learned from, what was learned)

    def start(self) -> None:
        threading.Thread(target=self._loop, name="forecast", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def wake(self) -> None:
        """Run a pass now, not an interval later (this replica has just come to lead), looking at every
        object that may carry predicted times: another leader may have written some meanwhile."""
        self._annotated = {"jobs", "pods"}
        self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            if not self.leads():
                self._gauge({}, datetime.now(UTC))  # the leader exports the forecast
                continue
            try:
                with self.metrics.forecast_seconds.time():
                    self.run_once()
            except client.ApiException as exc:
                self.metrics.api_errors.labels("forecast").inc()
                log.warning("forecast: %s; trying again in %g s", api_message(exc), self.interval)
            except Exception as exc:
                self.metrics.loop_errors.labels("forecast").inc()
                said = f"{type(exc).__name__}: {exc}"
                if said != self._last_error:
                    log.exception("forecast: the pass failed; trying again in %g s", self.interval)
                self._last_error = said
            else:
                self._last_error = None

    def run_once(self, now: datetime | None = None) -> None:
        now = now or datetime.now(UTC)
        if not self.cluster.synced:
            return  # a partial view would forecast jobs into room that is taken: the next pass
        jobs = self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
        if all((job.get("status") or {}).get("phase") in TERMINAL for job in jobs) and not self.gangs_live():
            # Nothing to forecast. Reading every node and pod anyway was about a sixth of the operator's
            # CPU while other pods were being scheduled, and the API server's to serve the lists.
            if self._annotated:  # a Job (or pod) whose gang just ended keeps its predicted times until then
                self._publish(self._annotatable(self._annotated), {}, {}, now)
            self._gauge({}, now)
            return
        nodes, pods = self.cluster.rooms(), self.cluster.pods()
        objects = {"jobs": items(self.batch.list_job_for_all_namespaces), "pods": pods}
        gangs = live_gangs(pods, {(j["metadata"]["namespace"], j["metadata"]["name"]): j
                                  for j in objects["jobs"]}, self._sizes(pods))
        forecasts = cluster_forecast(now, nodes, pods, jobs, self._learn(), gangs.values(),
                                     topology=self.topology)
        self._say_unreadable(forecasts)
        for body in jobs:
            meta, status = body["metadata"], body.get("status") or {}
            if status.get("phase") in TERMINAL:
                continue
            forecast = forecasts.get(f"{meta['namespace']}/{meta['name']}")
            # no forecast (Blocked): no predicted time either, not one from before it was blocked
            patch = status_patch(status, forecast, now) if forecast else no_times(status)
            if patch:
                self._write(meta, patch)
        self._publish(objects, gangs, forecasts, now)
        self._gauge({k: f for k, f in forecasts.items() if k not in gangs}, now)

    def _sizes(self, pods: list[dict[str, Any]]) -> dict[GangRef, int]:
        """The sizes of the gangs only a PodGroup or Kubeflow job says, read from it (one GET each): such
        a gang is forecast, and its times published on its first pod, as any other."""
        sizes = {}
        for ref, pod in unsized(pods).items():
            size, _ = read_size(self.custom, pod, ref)
            if size is not None:
                sizes[ref] = size
        return sizes

    def _learn(self) -> Learned:
        """What the records and the model teach, learned again only when either changed: up to 1,000
        finished jobs calibrated in folds, with the model's prediction for each, is too much for
        every pass."""
        model = self._predictor()
        source = (self.records.stamp(), id(model))
        if self._learned is None or self._learned[0] != source:
            self._learned = source, Learned(self.records.rows(), model)
        return self._learned[1]

    def _predictor(self) -> Predictor | None:
        """The model at `model_path`, loaded again when its files change; None while it cannot be
        served (said once in the log): the forecast then goes by the hints and the records."""
        if self.model_path is None:
            return None
        stamp = artifact_stamp(self.model_path)
        if stamp != self._model_stamp:
            self._model_stamp = stamp
            try:
                self.model = Predictor.load(self.model_path)
            except Exception as exc:  # unpickling and a malformed bundle can raise almost anything
                self.model = None
                log.error("forecast: model %s not used, run times from hints and records alone until it "
                          "is fixed: %s", self.model_path, exc)
        return self.model

    def _write(self, meta: dict[str, Any], patch: dict[str, Any]) -> None:
        """One job's forecast; a write the API server refuses costs that job its forecast, not the others."""
        try:
            self.custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, meta["namespace"], PLURAL, meta["name"], {"status": patch})
        except client.ApiException as exc:
            self.metrics.api_errors.labels("forecast").inc()
            if exc.status not in (404, 409):  # deleted, or changed since it was listed: the next pass
                log.warning("forecast of GPUJob %s/%s not written: %s", meta["namespace"], meta["name"],
                            api_message(exc))

    def _annotatable(self, plurals: set[str]) -> dict[str, list[dict[str, Any]]]:
        """Every batch Job ("jobs") and pod ("pods") that `plurals` name."""
        lists = {"jobs": lambda: items(self.batch.list_job_for_all_namespaces), "pods": self.cluster.pods}
        return {plural: lists[plural]() for plural in sorted(plurals)}

    def _publish(self, objects: dict[str, list[dict[str, Any]]], gangs: dict[str, LiveGang],
                 forecasts: dict[str, Forecast], now: datetime) -> None:
        """The annotations of each object in `objects` (by plural: "jobs", "pods"): its gang's
        predicted times where LiveGang.published_on says so, none on any other."""
        gang_on = {where: gang.key for gang in gangs.values() for where in gang.published_on}
        annotated = set()
        for plural, bodies in objects.items():
            for body in bodies:
                meta = body["metadata"]
                have = meta.get("annotations") or {}
                forecast = forecasts.get(gang_on.get((plural, meta["namespace"], meta["name"]), ""))
                wanted = wanted_times(forecast, PREDICTED_START, PREDICTED_START_RANGE, PREDICTED_FINISH,
                                PREDICTED_FINISH_RANGE)
                patch = times_patch(have, wanted, now)
                if patch:
                    self._annotate(plural, meta, patch)
                if any((have | patch).get(name) for name in wanted):
                    annotated.add(plural)
        self._annotated = annotated

    def _annotate(self, plural: str, meta: dict[str, Any], patch: dict[str, str | None]) -> None:
        """A metadata-only merge patch: no new generation, and neither the Job controller nor the
        scheduler reads these annotations."""
        patch_object = self.batch.patch_namespaced_job if plural == "jobs" else self.core.patch_namespaced_pod
        try:
            patch_object(meta["name"], meta["namespace"], {"metadata": {"annotations": patch}},
                         _content_type="application/merge-patch+json",
                         _preload_content=False)  # the object it returns is not read
        except client.ApiException as exc:
            self.metrics.api_errors.labels("forecast").inc()
            if exc.status != 404:  # deleted since it was listed
                log.warning("predicted times of %s %s/%s not written: %s", _KIND[plural], meta["namespace"],
                            meta["name"], api_message(exc))

    def _say_unreadable(self, forecasts: dict[str, Forecast]) -> None:
        """Log the jobs that cannot be forecast once per change, not at every pass."""
        unreadable = {key: f.estimate.basis for key, f in forecasts.items() if f.unreadable}
        for key, said in unreadable.items():
            if self._unreadable.get(key) != said:
                log.warning("GPUJob %s: %s", key, said)
        self._unreadable = unreadable

    def _gauge(self, forecasts: dict[str, Forecast], now: datetime) -> None:
        shown = set()
        for key, forecast in forecasts.items():
            if forecast.finish is not None:
                namespace, name = key.split("/", 1)
                self.metrics.predicted_remaining.labels(namespace, name).set(
                    max(0.0, (forecast.finish - now).total_seconds()))
                shown.add((namespace, name))
        for gone in self._gauged - shown:  # finished, deleted, or no longer predictable
            self.metrics.predicted_remaining.remove(*gone)
        self._gauged = shown
