"""`netsched train`: cross-validate the regressors, pick one by a stated rule, write a versioned artifact.

The most recent `holdout` share of candidate sets (by start time) is left out entirely, so
`netsched evaluate` on the same file judges the model on jobs it never saw. The rest is
cross-validated two ways, each pooled over its folds, and every fold split by job (all of a
job's rows on one side) and by time (a fold's model never saw a job that started after one
it is tested on):

- by time: the jobs in start order cut into 5 blocks; fold k trains on blocks before k and
  tests on block k;
- by site: the same folds, fold k testing only the rows of one zone (zone by zone in turn)
  and training only on the other zones' rows (no node on both sides).

The chosen kind is then fitted on all training rows, and again on the network-blind
features for evaluation's network-blind baseline.
"""

from __future__ import annotations

import json
import math
import platform
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import sklearn

from netsched import __version__
from netsched.api.events import rfc3339
from netsched.models.artifact import SERVING_SPEC, write_artifact
from netsched.models.compiled import compiled, is_trees, onnx_graph
from netsched.models.features import FEATURE_NAMES, INDEX, NETWORK_BLIND, SCHEMA_VERSION, SchemaError
from netsched.models.predictor import SCREEN_ROWS, LinearScreen, fastest, predict_ms
from netsched.training.dataset import Dataset, data_sha256, read_datasets
from netsched.training.fitting import MODEL_KINDS, fit_model, fit_screen
from netsched.training.metrics import MAPE_TIE, REGRET_TIE, Scores, better, score

TIME_BLOCKS = 5
SERVABLE = ("hist_gradient_boosting", "ridge")
SELECTION_RULE = (
    f"Each kind's score is the mean of its by-time and by-site cross-validation scores. Only "
    f"{' and '.join(SERVABLE)} may serve: at their fixed settings the serving path (the linear screen over "
    f"5,000 candidates, the model over the best {SCREEN_ROWS}) takes about 2 ms at the median, where "
    f"random_forest and knn take 3.5-5 ms (bench/model_kinds.py, docs/models.md); those two are "
    f"cross-validated for comparison only. No time measured while training takes part: on a busy "
    f"machine it would change the pick from run to run. Among the servable kinds, in the "
    f"order {', '.join(k for k in MODEL_KINDS if k in SERVABLE)}, a kind replaces the pick so far only if it "
    f"beats it: mean regret lower by more than {REGRET_TIE * 100:g} percentage point, or, within that, MAPE "
    f"lower by more than {MAPE_TIE * 100:g} points."
)


@dataclass(frozen=True)
class KindResult:
    kind: str
    by_time: Scores
    by_site: Scores | None
    overall: Scores

    def to_json(self) -> dict:
        return {"by_time": self.by_time.to_json(), "by_site": self.by_site and self.by_site.to_json(),
                "overall": self.overall.to_json(), "servable": self.kind in SERVABLE}


def split_holdout(ds: Dataset, fraction: float) -> tuple[Dataset, Dataset]:
    """(earlier sets, the most recent `fraction` of sets by start time)."""
    if not 0 <= fraction < 1:
        raise ValueError(f"holdout fraction {fraction} must be in [0, 1)")
    sets = ds.sets()
    cut = len(sets) - int(round(len(sets) * fraction))
    if cut < 2:
        raise SchemaError(f"only {len(sets)} candidate sets: too few to train on after holding out "
                          f"{fraction:.0%}")
    held = np.zeros(len(ds), dtype=bool)
    for rows in sets[cut:]:
        held[rows] = True
    return ds.take(~held), ds.take(held)


def time_folds(jobs: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train rows, test rows) per fold: `jobs` (row indices per job, in start order) cut into
    TIME_BLOCKS blocks; fold k trains on the blocks before k and tests on block k."""
    blocks = np.array_split(np.arange(len(jobs)), TIME_BLOCKS)
    folds = []
    for k in range(1, TIME_BLOCKS):
        train = [jobs[i] for b in blocks[:k] for i in b]
        test = [jobs[i] for i in blocks[k]]
        if train and test:
            folds.append((np.concatenate(train), np.concatenate(test)))
    return folds


def site_folds(ds: Dataset, jobs: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The time folds, fold k tested on one zone's rows (zone by zone in turn) and trained on the
    other zones' rows: no node, no job and no later job on both sides."""
    sites = sorted(set(ds.site))
    if len(sites) < 2:
        return []
    folds = []
    for k, (train, test) in enumerate(time_folds(jobs)):
        site = sites[k % len(sites)]
        train, test = train[ds.site[train] != site], test[ds.site[test] == site]
        if len(test) and len(train):
            folds.append((train, test))
    return folds


def cross_validate(ds: Dataset, kind: str, folds: list[tuple[np.ndarray, np.ndarray]], seed: int) -> Scores:
    """Scores of the out-of-fold predictions, pooled over the folds."""
    predicted = np.full(len(ds), np.nan)
    tested = np.zeros(len(ds), dtype=bool)
    for train, test in folds:
        model = fit_model(kind, FEATURE_NAMES, ds.X[train], np.log(ds.y[train]), ds.candidate_set[train],
                          seed)
        predicted[test] = np.exp(model.predict(ds.X[test]))
        tested[test] = True
    held = ds.take(tested)
    return score(held.y, predicted[tested], held.sets(), predicted[tested])


def _mean(a: Scores, b: Scores | None) -> Scores:
    if b is None:
        return a
    fields = {k: (getattr(a, k) + getattr(b, k)) / 2
              for k in Scores.__dataclass_fields__ if k not in ("sets", "rows")}
    return Scores(sets=a.sets + b.sets, rows=a.rows + b.rows, **fields)


def evaluate_kinds(ds: Dataset, seed: int) -> list[KindResult]:
    jobs = ds.jobs()
    by_time_folds, by_site_folds = time_folds(jobs), site_folds(ds, jobs)
    results = []
    for kind in MODEL_KINDS:
        by_time = cross_validate(ds, kind, by_time_folds, seed)
        by_site = cross_validate(ds, kind, by_site_folds, seed) if by_site_folds else None
        results.append(KindResult(kind, by_time, by_site, _mean(by_time, by_site)))
    return results


def select(results: list[KindResult]) -> KindResult:
    """The serving model by SELECTION_RULE."""
    servable = [r for r in results if r.kind in SERVABLE]
    pick = servable[0]
    for r in servable[1:]:
        if better(r.overall, pick.overall):
            pick = r
    return pick


def train(paths: list[Path], out: Path, seed: int = 0, holdout: float = 0.2, name: str | None = None,
          log=print, dataset: Dataset | None = None) -> Path:
    """Train on `paths` (`dataset`: their rows, when the caller has read them already), write the
    artifact under `out`, return its directory."""
    started = time.perf_counter()
    data, _ = split_holdout(dataset if dataset is not None else read_datasets(paths), holdout)
    log(f"training on {len(data)} rows, {len(data.sets())} candidate sets; "
        f"cross-validating {len(MODEL_KINDS)} kinds")
    results = evaluate_kinds(data, seed)
    for r in results:
        log(f"  {r.kind:24s} regret {r.overall.regret_mean:.4f}  top-1 {r.overall.top1:.3f}  "
            f"MAPE {r.overall.mape:.3f}{'' if r.kind in SERVABLE else '  (comparison only)'}")
    pick = select(results)
    blind = data.X[:, [INDEX[f] for f in NETWORK_BLIND]]
    log_y, sets = np.log(data.y), data.candidate_set
    bundle = {
        "schema_version": SCHEMA_VERSION, "target": "log(duration_seconds)", "kind": pick.kind,
        "features": list(FEATURE_NAMES),
        "estimator": fit_model(pick.kind, FEATURE_NAMES, data.X, log_y, sets, seed),
        "screen": fit_screen(FEATURE_NAMES, data.X, log_y),
        "network_blind_features": list(NETWORK_BLIND),
        "network_blind_estimator": fit_model(pick.kind, NETWORK_BLIND, blind, log_y, sets, seed),
        "network_blind_screen": fit_screen(NETWORK_BLIND, blind, log_y),
    }
    digest = data_sha256(paths)
    meta = _meta(bundle, results, pick, data, paths, digest, seed, holdout, time.perf_counter() - started)
    meta["serving_ms_5000"] = round(_serving_ms(bundle, data.X), 3)
    directory = write_artifact(out / (name or _name(data, digest)), bundle, meta, serving_files(bundle, log))
    log(f"chose {pick.kind} (serving 5,000 candidates here: {meta['serving_ms_5000']:.2f} ms median); "
        f"wrote {directory}")
    return directory


def serving_files(bundle: dict, log=print) -> dict[str, bytes] | None:
    """What the extender loads (netsched.models.predictor): the linear screen's parameters, the job
    part's trees as an ONNX graph and the candidate part as one too, or its parameters when it is
    linear; converted here once rather than at every load. None (served from the pickle) for a
    model that cannot be written so."""
    estimator = bundle["estimator"]
    files: dict[str, bytes] = {}
    try:
        files["job.onnx"] = onnx_graph(estimator.job, len(estimator.job_columns))
        if is_trees(estimator.candidate):
            files["candidate.onnx"] = onnx_graph(estimator.candidate, len(FEATURE_NAMES))
            candidate: dict = {"onnx": "candidate.onnx"}
        else:
            candidate = {"linear": LinearScreen(estimator.candidate, FEATURE_NAMES).params()}
    except Exception as exc:  # noqa: BLE001 - a converter gap costs serving speed, never the artifact
        log(f"no serving files (the extender will serve the pickled model, slower): {exc}")
        return None
    spec = {"job_columns": list(estimator.job_columns), "job": "job.onnx", "candidate": candidate,
            "screen": LinearScreen(bundle["screen"], FEATURE_NAMES).params()}
    return {SERVING_SPEC: (json.dumps(spec, indent=1) + "\n").encode(), **files}


def _serving_ms(bundle: dict, X: np.ndarray) -> float:
    """The chosen model's serving path timed on this machine: recorded for information, not used."""
    screen = LinearScreen(bundle["screen"], FEATURE_NAMES).predict
    estimator = compiled(bundle["estimator"], len(FEATURE_NAMES)).predict
    return predict_ms(lambda rows: fastest(rows, 1, screen, estimator), X)


def _name(data: Dataset, digest: str) -> str:
    day = datetime.fromtimestamp(float(data.start.max()), UTC).strftime("%Y%m%d")
    return f"jct-s{SCHEMA_VERSION}-{day}-{digest[:8]}"


def _meta(bundle: dict, results: list[KindResult], pick: KindResult, data: Dataset, paths: list[Path],
          digest: str, seed: int, holdout: float, seconds: float) -> dict:
    estimator = bundle["estimator"]
    return {
        "schema_version": SCHEMA_VERSION, "features": bundle["features"],
        "network_blind_features": bundle["network_blind_features"], "target": bundle["target"],
        "model_kind": pick.kind,
        "model_params": {"job": _params(estimator.job), "candidate": _params(estimator.candidate)},
        "selection_rule": SELECTION_RULE, "cv": {r.kind: r.to_json() for r in results},
        "training_data": {
            "files": [Path(p).name for p in paths], "sha256": digest, "rows": len(data),
            "candidate_sets": len(data.sets()), "sources": sorted(set(data.source)),
            "window": {"start_unix": float(data.start.min()), "end_unix": float(data.start.max()),
                       "start": _utc(data.start.min()), "end": _utc(data.start.max())},
            "holdout_fraction": holdout,
        },
        "seed": seed, "train_seconds": round(seconds, 1), "created": _utc(time.time()),
        "versions": {"netsched": __version__, "sklearn": sklearn.__version__, "numpy": np.__version__,
                     "python": platform.python_version()},
    }


def _params(model) -> dict:
    if hasattr(model, "steps"):
        return {"steps": [type(s).__name__ for _, s in model.steps]}
    return {k: v for k, v in model.get_params(deep=False).items() if _jsonable(v)}


def _jsonable(v) -> bool:
    return v is None or isinstance(v, (bool, int, str)) or (isinstance(v, float) and math.isfinite(v))


def _utc(t: float) -> str:
    return rfc3339(datetime.fromtimestamp(float(t), UTC))
