"""How long a job runs, and how far off that guess may be: learned from the finished jobs (the
operator's records, or finished GPUJobs still in the cluster) and, where one is loaded, the
completion-time model (netsched.models.predictor).

Up to three estimates, each calibrated on the history:
- the model: its prediction for the job on the GPU it runs on (or is predicted to run on), times the
  median ratio of run to the model's prediction over the finished jobs;
- the hint: the user's duration (`spec.workload.expectedDurationSeconds`, or the pods'
  `netsched.io/expected-duration-seconds`) times the median ratio of run to hint;
- the history: the median run of finished jobs of the same kind and shape, else of the same kind,
  else of any.
Each needs MIN_HISTORY finished jobs to be calibrated on. They are blended as a weighted geometric
mean, each weighted by 1 / its mean squared log error over the finished jobs: whichever has been
right before counts most, with no weight chosen by hand. The basis says what went in.

The interval: the 10th and 90th percentiles of actual / blended estimate over the finished jobs the
same blend applies to (MIN_SPREAD at least; fewer: no interval). A job's P10 and P90 run are its
estimate times those two ratios. With fewer than MIN_HISTORY finished jobs there is nothing to
calibrate on: the hint as given, else the model's own prediction, else nothing.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from netsched.api.labels import GPU_PRODUCT_LABEL
from netsched.models.gpus import gpu_features

if TYPE_CHECKING:  # numpy and the model load only where a model is (whatif's forecast often has none)
    from netsched.models.predictor import Predictor

MIN_HISTORY = 3  # finished jobs an estimate is calibrated on; fewer say too little about the next one
MIN_SPREAD = 10  # finished jobs an interval is read from
WINDOW = 1000  # the most recent finished jobs learned from: older ones cost time and say less
LOW, HIGH = 0.1, 0.9  # the interval's quantiles
FOLDS = 5  # an interval is read from each finished job's error when calibrated on the other folds


@dataclass(frozen=True)
class Estimate:
    seconds: float | None  # None: nothing to go on
    basis: str  # where the number comes from, in words
    spread: tuple[float, float] | None = None  # P10 and P90 of run / estimate before (None: too few)

    def quantiles(self) -> tuple[float, float, float] | None:
        """P10, P50 and P90 run seconds; the estimate three times over without a spread."""
        if self.seconds is None:
            return None
        low, high = self.spread or (1.0, 1.0)
        return self.seconds * low, self.seconds, self.seconds * high


@dataclass(frozen=True)
class Case:
    """What the estimates read of a job: its kind, shape, hint and the GPU it runs on."""
    kind: str
    replicas: int | None
    gpus_per_replica: int | None
    hint: float | None
    gpu: str | None = None  # the GPU product
    node_labels: tuple[tuple[str, str], ...] = ()  # the node's labels (GPU capability labels), sorted


def record_case(row: Mapping[str, Any]) -> Case:
    """The Case of a finished-job record (netsched.records.format.ROW_FIELDS); its GPU is its last
    replica's, as training reads it."""
    gpus, labels = row.get("gpu_models") or [], row.get("gpu_labels") or []
    return Case(row.get("workload_kind") or "training", row.get("replicas"), row.get("gpus_per_replica"),
                row.get("expected_duration_seconds") or None, gpus[-1] if gpus else None,
                tuple(sorted((labels[-1] or {}).items())) if labels else ())


def node_case(kind: str, replicas: int, gpus_per_replica: int, hint: float | None,
              node_labels: Mapping[str, str] | None) -> Case:
    labels = node_labels or {}
    return Case(kind, replicas, gpus_per_replica, hint, labels.get(GPU_PRODUCT_LABEL),
                tuple(sorted(labels.items())))


class RunTimes:
    """Estimates for any job, learned once from `history` (records rows: only Succeeded rows with a
    duration count) and `model` (None: no model)."""

    def __init__(self, history: Iterable[Mapping[str, Any]], model: Predictor | None = None):
        done = [r for r in history
                if r.get("outcome") == "Succeeded" and (r.get("duration_seconds") or 0) > 0][-WINDOW:]
        self.count = len(done)
        self.model = model
        self._model_memo: dict[Case, float] = {}
        cases = [record_case(r) for r in done]
        modelled: list[float | None] = [*self._model_seconds(cases)] if model and done else [None] * len(done)
        past = [Past(c, float(r["duration_seconds"]), m)
                for c, r, m in zip(cases, done, modelled, strict=True)]
        self.fit = Calibration(past)
        # each finished job's sources as calibrated without it (FOLDS folds): what an interval is read
        # from, since errors measured on the jobs a ratio or median was taken over would look too small
        self.held_out: list[tuple[Past, Calibration, dict[str, float]]] = []
        for k in range(FOLDS):
            fold = Calibration([p for i, p in enumerate(past) if i % FOLDS != k])
            self.held_out += [(p, fold, fold.logs(p.case, p.model)) for p in past[k::FOLDS]]
        self._spreads: dict[frozenset[str], tuple[float, float] | None] = {}

    def estimate(self, case: Case, hint_words: str = "the hint") -> Estimate:
        """The run time to expect of the job `case` describes; `hint_words` names its hint for the basis."""
        model_seconds = self._model_seconds([case])[0] if self.model else None
        if self.count < MIN_HISTORY:
            if case.hint:
                return Estimate(float(case.hint), f"{hint_words} (too few finished jobs to check it against)")
            if model_seconds is not None:
                return Estimate(model_seconds, f"the completion-time model on {case.gpu or 'its node'} (too "
                                               "few finished jobs to check it against)")
            return Estimate(None, f"only {self.count} finished job(s) to learn from; set {hint_words} to say "
                                  "how long it runs")
        fit = self.fit
        if case.hint and "hint" not in fit.weights:  # the user's word, until it can be checked
            return Estimate(float(case.hint), f"{hint_words} (too few finished jobs to check it against)")
        found, words = fit.sources(case, model_seconds, hint_words)
        used = {s: math.log(v) for s, v in found.items() if s in fit.weights}
        if not used:
            return Estimate(None, f"nothing learned fits it; set {hint_words} to say how long it runs")
        if len(used) == 1:
            [source] = used
            seconds, basis = found[source], words[source]
        else:
            seconds = math.exp(fit.blend(used))
            basis = (f"{round(seconds)} s, blended from " + "; ".join(words[s] for s in used)
                     + ", each weighted by how close it came before")
        return Estimate(seconds, basis, self._spread(frozenset(used)))

    def _spread(self, sources: frozenset[str]) -> tuple[float, float] | None:
        """P10 and P90 of run / the blend of `sources`, over the finished jobs all of them apply to,
        each estimated without itself."""
        if sources not in self._spreads:
            residuals = [math.log(p.seconds) - fold.blend({s: logs[s] for s in sources})
                         for p, fold, logs in self.held_out if sources <= logs.keys() & fold.weights.keys()]
            self._spreads[sources] = None if len(residuals) < MIN_SPREAD else _quantiles(residuals)
        return self._spreads[sources]

    def _model_seconds(self, cases: list[Case]) -> list[float]:
        """The model's seconds for each case (remembered: the forecast asks again for every pass's play)."""
        assert self.model is not None
        import numpy as np

        from netsched.models.features import feature_matrix
        new = [c for c in dict.fromkeys(cases) if c not in self._model_memo]
        if new:
            names = self.model.features
            values = {name: np.full(len(new), math.nan) for name in names}
            for i, case in enumerate(new):
                for name, value in _features(case).items():
                    if name in values:
                        values[name][i] = value
            seconds = self.model.predict(feature_matrix(values, len(new), names))
            self._model_memo.update(zip(new, (float(s) for s in seconds), strict=True))
        return [self._model_memo[c] for c in cases]


@dataclass(frozen=True)
class Past:
    """A finished job: what it was, how long it ran, and what the model says of it (None: no model)."""
    case: Case
    seconds: float
    model: float | None


class Calibration:
    """What some finished jobs say of each source: its ratio to the runs (model, hint), the medians
    (history), and its weight, 1 / its mean squared log error over them."""

    def __init__(self, past: list[Past]):
        modelled = [p for p in past if p.model is not None]
        self.model_ratio = _median_ratio([p.seconds for p in modelled], [p.model or 0.0 for p in modelled])
        hinted = [p for p in past if p.case.hint]
        self.hint_count = len(hinted)
        self.hint_ratio = _median_ratio([p.seconds for p in hinted], [p.case.hint or 0.0 for p in hinted])
        self.groups: dict[Any, list[float]] = defaultdict(list)
        for p in past:
            for key in _group_keys(p.case):
                self.groups[key].append(p.seconds)
        self.medians = {key: statistics.median(v) for key, v in self.groups.items() if len(v) >= MIN_HISTORY}
        self.weights: dict[str, float] = {}
        errors: dict[str, list[float]] = defaultdict(list)
        for p in past:
            for source, value in self.logs(p.case, p.model).items():
                errors[source].append((value - math.log(p.seconds)) ** 2)
        for source, squares in errors.items():
            if len(squares) >= MIN_HISTORY:
                self.weights[source] = 1.0 / max(statistics.fmean(squares), 1e-6)

    def logs(self, case: Case, model_seconds: float | None) -> dict[str, float]:
        return {s: math.log(v) for s, v in self.sources(case, model_seconds)[0].items()}

    def sources(self, case: Case, model_seconds: float | None, hint_words: str = "the hint"
                ) -> tuple[dict[str, float], dict[str, str]]:
        """Each calibrated source's seconds for `case`, and its words."""
        found: dict[str, float] = {}
        words: dict[str, str] = {}
        if model_seconds is not None and self.model_ratio is not None:
            found["model"] = model_seconds * self.model_ratio
            words["model"] = (f"the completion-time model on {case.gpu or 'its node'} × "
                              f"{self.model_ratio:.2f}, the median ratio of run to prediction")
        if case.hint and self.hint_ratio is not None:
            found["hint"] = case.hint * self.hint_ratio
            words["hint"] = (f"{hint_words} {case.hint:g} × {self.hint_ratio:.2f}, the median "
                             f"ratio of run to expectation over {self.hint_count} finished jobs")
        for key, what in zip(_group_keys(case), _group_words(case), strict=True):
            if key in self.medians:
                found["history"] = self.medians[key]
                words["history"] = f"the median run of {len(self.groups[key])} finished {what}"
                break
        return found, words

    def blend(self, logs: Mapping[str, float]) -> float:
        """The weighted mean of the sources' log seconds."""
        total = sum(self.weights[s] for s in logs)
        return sum(self.weights[s] * v for s, v in logs.items()) / total


def _quantiles(values: list[float]) -> tuple[float, float]:
    """exp of the LOW and HIGH quantiles of log ratios (linear interpolation, as numpy's default)."""
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return math.exp(cuts[round(LOW * 100) - 1]), math.exp(cuts[round(HIGH * 100) - 1])


def _features(case: Case) -> dict[str, float]:
    """The model's features a Case knows; the others stay unknown (NaN), as the schema allows."""
    from netsched.models.features import kind_features
    replicas = float(case.replicas) if case.replicas else math.nan
    gpus = float(case.gpus_per_replica) if case.gpus_per_replica else math.nan
    return {"job_gpus": replicas * gpus, "replicas": replicas, "gpus_per_replica": gpus,
            "expected_seconds": float(case.hint) if case.hint else math.nan, **kind_features(case.kind),
            **gpu_features(case.gpu, dict(case.node_labels))}


def _group_keys(case: Case) -> tuple[Any, ...]:
    return (("shape", case.kind, case.replicas, case.gpus_per_replica), ("kind", case.kind), "all")


def _group_words(case: Case) -> tuple[str, ...]:
    return (f"{case.kind} jobs of {case.replicas}×{case.gpus_per_replica} GPUs", f"{case.kind} jobs", "jobs")


def _median_ratio(actual: Sequence[float], predicted: Sequence[float]) -> float | None:
    """The median ratio of actual to predicted seconds, over MIN_HISTORY pairs at least."""
    if len(actual) < MIN_HISTORY:
        return None
    return statistics.median(a / p for a, p in zip(actual, predicted, strict=True))
