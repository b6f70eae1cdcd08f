"""Scoring by the completion-time model: the candidate predicted to finish the job first scores 10.

`ModelSource` loads a `netsched train` artifact (a directory, or a `current.json` manifest
that `netsched retrain` repoints) and re-reads it when its files change, checked every
`reload_seconds` off the request path. An artifact that cannot be served (missing, corrupt,
another feature schema) is refused with a log line naming the file and the fix, and the
extender falls back to the topology heuristic, counted in
`netsched_extender_model_fallbacks_total`, until a good artifact appears: what serves is
always the artifact on disk or the heuristic, never a silently kept older model.

A candidate's score falls one point (of 10) for every 5% its predicted completion time is
above the fastest candidate's, to 0 at 50% slower: a ratio would give every candidate
within 5% of the best the same rounded 10, and kube-scheduler could not tell them apart.
Over many candidates the model runs on the ones the artifact's linear screen ranks fastest
(Predictor.predict_candidates); the others keep the screen's estimate, never better than
the slowest screened one.

Predictions within TIE_SLOWDOWN of each other are within the model's noise (its median regret is
0, its p95 several times that), and at that distance a model can prefer an empty node to the one a
gang's first pod runs on for no reason it could name. There the topology heuristic (closeness to
the job's peers and data, then using a node's free GPUs exactly) decides: it weighs as much as
TIE_SLOWDOWN of predicted time, so it orders near-ties and never outweighs a larger predicted gap.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import numpy as np

from netsched.extender.metrics import Metrics
from netsched.extender.model_features import feature_values
from netsched.extender.plugin import Request
from netsched.extender.scorers import NodeScorer, Scored
from netsched.models.artifact import Stamp, artifact_stamp
from netsched.models.predictor import Predictor

log = logging.getLogger(__name__)
SLOWDOWN_AT_ZERO = 0.5  # predicted 50% slower than the best candidate scores 0: a point per 5%
TIE_SLOWDOWN = 0.02  # predictions closer than this are ordered by the topology heuristic
# the heuristic's share of the score: its whole range is worth TIE_SLOWDOWN of the model's value
HEURISTIC_SHARE = (TIE_SLOWDOWN / SLOWDOWN_AT_ZERO) / (1 + TIE_SLOWDOWN / SLOWDOWN_AT_ZERO)


class ModelSource:
    """The artifact at `path`, reloaded when its files change; `predictor` is None while none serves."""

    def __init__(self, path: Path, metrics: Metrics, reload_seconds: float = 5.0):
        self.path = Path(path)
        self.metrics = metrics
        self.reload_seconds = reload_seconds
        self.predictor: Predictor | None = None
        self._stamp: Stamp | None = None
        self._stop = threading.Event()

    def poll(self) -> None:
        stamp = artifact_stamp(self.path)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            predictor = Predictor.load(self.path)
        except Exception as exc:  # unpickling and a malformed bundle can raise almost anything
            self.predictor = None
            self.metrics.model_loads.labels("refused").inc()
            self.metrics.model_loaded.set(0)
            log.error("model %s refused, scoring with the topology heuristic until it is fixed: %s",
                      self.path, exc)
            return
        self.predictor = predictor
        self.metrics.model_loads.labels("loaded").inc()
        self.metrics.model_loaded.set(1)
        meta = predictor.meta
        log.info("serving model %s (%s, schema v%s, trained on %s rows)", predictor.path,
                 meta.get("model_kind"), meta.get("schema_version"),
                 meta.get("training_data", {}).get("rows"))

    def start(self) -> ModelSource:
        self.poll()
        threading.Thread(target=self._loop, name="model-reload", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.reload_seconds):
            self.poll()


class ModelScorer:
    name = "model"

    def __init__(self, source: ModelSource, fallback: NodeScorer, metrics: Metrics):
        self.source = source
        self.fallback = fallback
        self.metrics = metrics

    def score(self, req: Request, idx: np.ndarray) -> Scored:
        predictor = self.source.predictor
        if predictor is None:
            return self._fall_back("no_model", req, idx)
        if not len(idx):
            return Scored(np.empty(0), np.empty(0), scorer=self.name)
        try:
            seconds = predictor.predict_candidates(feature_values(req, idx), len(idx))
        except Exception:
            log.exception("model failed on pod %s; scoring it with the topology heuristic", req.pod.key)
            return self._fall_back("predict_error", req, idx)
        if not np.isfinite(seconds).all() or (seconds <= 0).any():
            return self._fall_back("predict_error", req, idx)
        pace = self._pace(predictor, req)
        if pace is not None:
            seconds = np.maximum(seconds, pace)
        slowdown = seconds / seconds.min() - 1
        heuristic = self.fallback.score(req, idx)
        value = ((1 - HEURISTIC_SHARE) * np.clip(1 - slowdown / SLOWDOWN_AT_ZERO, 0, 1)
                 + HEURISTIC_SHARE * heuristic.value)
        return Scored(value, value, {"predicted_seconds": seconds, **heuristic.factors}, scorer=self.name)

    @staticmethod
    def _pace(predictor: Predictor, req: Request) -> float | None:
        """The job's predicted time on the nodes its placed pods run on, the slowest of them (None: no
        pod placed). A job's pods keep one another's pace, so a pod sent to a faster GPU than its
        peers' finishes the job no sooner; predictions are raised to it, and where they meet it the
        topology heuristic (closeness to the peers) decides."""
        snap = req.snapshot
        index = snap.table.index
        at = np.array(sorted({index[p] for p in snap.peers if p in index}), dtype=np.int64)
        if not len(at):
            return None
        seconds = predictor.predict_candidates(feature_values(req, at), len(at))
        return float(seconds.max()) if np.isfinite(seconds).all() else None

    def _fall_back(self, reason: str, req: Request, idx: np.ndarray) -> Scored:
        self.metrics.model_fallbacks.labels(reason).inc()
        return self.fallback.score(req, idx)

