"""`netsched train`: cross-validate the regressors, pick one by a stated rule, write a versioned artifact.

Validation first (`validate`). The most recent `holdout` share of jobs (by start time) is
set aside; the rest is cross-validated two ways, each pooled over its folds, and every fold
split by job (all of a job's rows on one side) and by time (a fold's model never saw a job
that started after one it is tested on):

- by time: the jobs in start order cut into 5 blocks; fold k trains on blocks before k and
  tests on block k;
- by site: the same folds, fold k testing only the rows of one zone (zone by zone in turn)
  and training only on the other zones' rows (no node on both sides); where the records name
  several clusters (`netsched train --clusters-by-file`), one cluster instead of one zone, so
  that a kind is also judged on clusters it never saw.

A kind is picked by ranking (metrics.better: top-1 or mean regret beyond the noise of the comparison,
starting from the physics kind; weighted node-pair accuracy for records of one row per job) and,
fitted on the earlier jobs, scored on the held-out ones: for the report only. Then the picked
kind is refit on all records, the held-out jobs included (the newest jobs are the most like those
the model will place), and again on the network-blind features for evaluation's network-blind
baseline.

With fewer than MIN_JOBS (netsched.training.enough_jobs) usable jobs nothing is trained (TooFewJobs):
a young cluster's records are not yet enough to cross-validate on, and a nightly `retrain` must not
fail until they are.
Cross-validation prints a progress line per kind and split on stderr (`stderr_progress`).
"""

from __future__ import annotations

import json
import math
import platform
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import sklearn

from netsched import __version__
from netsched.api.events import rfc3339
from netsched.models.artifact import SERVING_SPEC, write_artifact
from netsched.models.estimators import JobPlusCandidate, LinearPlusTrees, PlainTrees
from netsched.models.features import FEATURE_NAMES, INDEX, NETWORK_BLIND, SCHEMA_VERSION, SchemaError
from netsched.models.gpu_identity import identity_columns
from netsched.models.physics import estimate_names
from netsched.models.predictor import SCREEN_ROWS, LinearScreen, fastest, predict_ms
from netsched.training.dataset import Dataset, data_sha256, dataset_from_rows, read_datasets
from netsched.training.enough_jobs import MIN_JOBS, TooFewJobs
from netsched.training.fitting import MODEL_KINDS, fit_model, fit_screen
from netsched.training.metrics import (
    BY_NODE_PAIRS,
    BY_PAIRS,
    PAIR_TIE,
    REGRET_TIE,
    TOP1_TIE,
    NodePairCounts,
    Scores,
    better,
    describe,
    judged_by,
    model_scores,
    node_pair_counts,
    with_node_pairs,
)
from netsched.training.onnx_export import compiled, is_trees, onnx_graph

TIME_BLOCKS = 5
SERVABLE = ("hist_gradient_boosting", "hist_gradient_boosting_whole", "hist_gradient_boosting_physics",
            "hist_gradient_boosting_plain", "ridge")
PREFERRED = "hist_gradient_boosting_physics"  # where the selection starts (SELECTION_RULE)
SELECTION_RULE = (
    f"Each kind's score is the mean of its by-time and by-site cross-validation scores. Only "
    f"{', '.join(SERVABLE)} may serve: at their fixed settings the serving path (the linear screen over "
    f"5,000 candidates, the model over the best {SCREEN_ROWS}) takes about 2 ms at the median, where "
    f"random_forest and knn take 3.5-5 ms (bench/model_kinds.py, docs/models.md); those two are "
    f"cross-validated for comparison only. No time measured while training takes part: on a busy "
    f"machine it would change the pick from run to run. The pick starts at {PREFERRED}, the kind that "
    f"placed best on clusters left out of training (bench/loco.py); then, among the servable kinds in the "
    f"order {', '.join(k for k in MODEL_KINDS if k in SERVABLE)}, a kind replaces the pick so far only if it "
    f"beats it by more than the noise of the comparison: top-1 higher by more than the standard error of "
    f"the difference of the two shares and by more than {TOP1_TIE * 100:g} percentage point, or mean regret "
    f"lower by more than the standard error of the difference of the two means and by more than "
    f"{REGRET_TIE * 100:g} point (bench/loco.py: on one world of nine a kind as often right with smaller "
    f"mistakes placed better). Where the "
    f"records hold one row per job (no candidate "
    f"set to pick from), node-pair accuracy (weighted) higher by more than {PAIR_TIE * 100:g} point: over "
    f"pairs of comparable jobs of one workload kind, how often the model predicting the first job on its own "
    f"node and on the second's orders the two as their true times are, each pair weighed by how far apart "
    f"those are (not pairwise accuracy between the jobs, which rewards knowing a job's length and picked "
    f"kinds that placed worse, bench/selection_rule.py). MAPE is reported, never compared."
)


def training_data(paths: Sequence[Path], clusters_by_file: bool = False) -> Dataset:
    """The rows of `paths`, if they hold MIN_JOBS usable jobs or more; else TooFewJobs saying what was
    read. An operator records file (.jsonl) that does not exist yet holds no job: the operator writes
    it when its first job finishes, and a new install's nightly retrain runs before that."""
    found = [Path(p) for p in paths if Path(p).suffix != ".jsonl" or Path(p).exists()]
    data = read_datasets(found, clusters_by_file) if found else dataset_from_rows([])
    jobs = len(data.jobs())
    if jobs < MIN_JOBS:
        read = ", ".join(f"{p}{'' if p in found else ' (not written yet)'}" for p in map(Path, paths))
        raise TooFewJobs(f"only {jobs} jobs, at least {MIN_JOBS} needed; read {read}")
    return data


def stderr_progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def no_progress(line: str) -> None:
    pass


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
    held_out = max(int(round(len(sets) * fraction)), 1 if fraction else 0)  # a holdout holds one at least
    cut = len(sets) - held_out
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
    """The time folds, fold k tested on one site's rows (site by site in turn) and trained on the
    other sites' rows: no node, no job and no later job on both sides. A site is a zone, or a whole
    cluster where the records name several (`cluster_groups`): a model must then place jobs on a
    cluster it never saw, as it will on one it was not trained on."""
    groups = cluster_groups(ds)
    if groups is None:
        groups = ds.site
    sites = sorted(set(groups))
    if len(sites) < 2:
        return []
    folds = []
    for k, (train, test) in enumerate(time_folds(jobs)):
        site = sites[k % len(sites)]
        train, test = train[groups[train] != site], test[groups[test] == site]
        if len(test) and len(train):
            folds.append((train, test))
    return folds


def cluster_groups(ds: Dataset) -> np.ndarray | None:
    """Each row's cluster, where the records name two clusters or more (zone names repeat from one
    cluster to the next, so zones then are no sites); else None."""
    return ds.cluster if len(set(ds.cluster)) > 1 else None


def fit_kind(kind: str, ds: Dataset, seed: int) -> JobPlusCandidate | LinearPlusTrees | PlainTrees:
    return fit_model(kind, FEATURE_NAMES, ds.X, np.log(ds.y), ds.candidate_set, seed)


def seconds(model: Any, X: np.ndarray) -> np.ndarray:
    """A fitted model's predicted completion seconds (it learns log seconds), as Predictor.predict."""
    return np.exp(model.predict(X))


def cross_validate(ds: Dataset, kind: str, folds: list[tuple[np.ndarray, np.ndarray]], seed: int) -> Scores:
    """Scores of the out-of-fold predictions, pooled over the folds; where the records hold no candidate
    set to rank, also node-pair accuracy (metrics.node_pair_counts), pooled over each fold's pairs."""
    predicted = np.full(len(ds), np.nan)
    tested = np.zeros(len(ds), dtype=bool)
    by_node = not any(len(rows) > 1 for rows in ds.sets())
    pairs = NodePairCounts()
    for train, test in folds:
        model = fit_kind(kind, ds.take(train), seed)
        predicted[test] = seconds(model, ds.X[test])
        tested[test] = True
        if by_node:
            pairs += node_pair_counts(ds.take(test), predicted[test], lambda X, m=model: seconds(m, X))
    return with_node_pairs(model_scores(ds.take(tested), predicted[tested]), pairs)


def _mean(a: Scores, b: Scores | None) -> Scores:
    """Both splits' scores averaged; a score one split leaves undefined (NaN) is the other's."""
    if b is None:
        return a
    counts = ("sets", "rows", "pairs", "node_pairs")
    fields = {k: _mean_of(getattr(a, k), getattr(b, k))
              for k in Scores.__dataclass_fields__ if k not in counts}
    return Scores(**{k: getattr(a, k) + getattr(b, k) for k in counts}, **fields)


def _mean_of(x: float, y: float) -> float:
    return y if math.isnan(x) else x if math.isnan(y) else (x + y) / 2


def evaluate_kinds(ds: Dataset, seed: int, kinds: tuple[str, ...] | None = None,
                   progress: Callable[[str], None] = no_progress) -> list[KindResult]:
    """Every kind's cross-validation scores (`kinds`: only these, e.g. SERVABLE, for the same pick
    sooner: `select` never picks another); `progress` is told of each kind and split as it starts."""
    jobs = ds.jobs()
    splits = {"by time": time_folds(jobs), "by site": site_folds(ds, jobs)}
    groups = [(kind, split) for kind in kinds or MODEL_KINDS for split, folds in splits.items() if folds]
    started = time.monotonic()
    scores: dict[tuple[str, str], Scores] = {}
    for k, (kind, split) in enumerate(groups, start=1):
        progress(f"cross-validating {k}/{len(groups)}: {kind} {split}, {len(splits[split])} folds "
                 f"({time.monotonic() - started:.0f} s so far)")
        scores[kind, split] = cross_validate(ds, kind, splits[split], seed)
    results = []
    for kind in kinds or MODEL_KINDS:
        by_time, by_site = scores[kind, "by time"], scores.get((kind, "by site"))
        results.append(KindResult(kind, by_time, by_site, _mean(by_time, by_site)))
    return results


def select(results: list[KindResult]) -> KindResult:
    """The serving model by SELECTION_RULE."""
    servable = [r for r in results if r.kind in SERVABLE]
    pick = next((r for r in servable if r.kind == PREFERRED), servable[0])
    for r in servable:
        if r is not pick and better(r.overall, pick.overall):
            pick = r
    return pick


@dataclass(frozen=True)
class Validation:
    """What `validate` found: the kinds' cross-validation scores, the pick, what picked it, and the
    pick fitted on the jobs before the held-out ones (`recent`) with its scores on those."""
    results: list[KindResult]
    pick: KindResult
    judged_by: str | None  # metrics.judged_by of the pick's cross-validation scores
    holdout: float
    recent: Dataset  # the held-out most recent jobs; empty without a holdout
    recent_model: JobPlusCandidate | LinearPlusTrees | PlainTrees | None  # None without a holdout
    recent_scores: Scores | None

    def to_json(self) -> dict:
        recent = {"jobs": len(self.recent.jobs()), "rows": len(self.recent),
                  "scores": self.recent_scores and self.recent_scores.to_json()}
        if len(self.recent):
            recent["first_start"] = _utc(self.recent.start.min())
        return {"selected_by": self.judged_by, "holdout_fraction": self.holdout, "held_out": recent}


def validate(data: Dataset, holdout: float, seed: int, log=print,
             progress: Callable[[str], None] = no_progress) -> Validation:
    """Cross-validate every kind on all but the most recent `holdout` share of jobs, pick one by
    SELECTION_RULE, and score it, fitted on those earlier jobs, on the held-out ones."""
    earlier, recent = split_holdout(data, holdout)
    if cluster_groups(earlier) is not None:
        log(f"the records name {len(set(earlier.cluster))} clusters: the by-site folds hold out one cluster "
            "at a time")
    log(f"cross-validating {len(MODEL_KINDS)} kinds on {len(earlier)} rows, {len(earlier.jobs())} jobs "
        f"(folds split by job, later jobs tested by models of earlier ones); the {len(recent.jobs())} most "
        f"recent jobs held out")
    results = evaluate_kinds(earlier, seed, progress=progress)
    by = judged_by(results[0].overall)
    if by in (BY_NODE_PAIRS, BY_PAIRS):
        log("the records hold one row per job (no counterfactual candidates, as the operator writes them): "
            "top-1 and regret are undefined, so kinds are compared by node-pair accuracy (weighted): pairs "
            "of jobs of comparable size (equal GPUs, expected seconds within a power of two) and one "
            "workload kind, the first job predicted on both jobs' nodes")
    for r in results:
        log(f"  {r.kind:24s} {describe(r.overall)}{'' if r.kind in SERVABLE else '  (comparison only)'}")
    pick = select(results)
    if by is None:
        log("nothing to rank by (no candidate set of two, no two comparable jobs of different durations): "
            f"kept the kind the pick starts at, {pick.kind}")
    log(f"chose {pick.kind} by {by or 'default'}")
    if not len(recent):
        return Validation(results, pick, by, holdout, recent, None, None)
    model = fit_kind(pick.kind, earlier, seed)
    scores = model_scores(recent, seconds(model, recent.X))
    log(f"  {pick.kind} fitted on those jobs, on the {len(recent.jobs())} held out: {describe(scores)}")
    return Validation(results, pick, by, holdout, recent, model, scores)


class ArtifactExists(FileExistsError):
    """The artifact directory `train` would write exists already: it refuses rather than overwrite it."""


def train(paths: list[Path], out: Path, seed: int = 0, holdout: float = 0.2, name: str | None = None,
          log=print, dataset: Dataset | None = None, validation: Validation | None = None,
          clusters_by_file: bool = False, progress: Callable[[str], None] = no_progress,
          force: bool = False) -> Path:
    """Train on `paths` (`dataset`: their rows, when the caller has read them already; `validation`:
    `validate`'s answer on them, when the caller has it already; `clusters_by_file`: each file is one
    cluster's records), write the artifact under `out`, return its directory. The artifact is fitted
    on all rows, the held-out ones included. TooFewJobs, before any work, if `paths` hold fewer than
    MIN_JOBS usable jobs. ArtifactExists, before any fitting, if the artifact's directory exists
    already, unless `force`: then it is replaced as a whole."""
    started = time.perf_counter()
    data = dataset if dataset is not None else training_data(paths, clusters_by_file)
    digest = data_sha256(paths)
    directory = out / (name or _name(data, digest))
    if directory.exists() and not force:
        raise ArtifactExists(f"{directory} exists already; give another --name, or --force to replace it")
    checked = validation or validate(data, holdout, seed, log, progress)
    pick = checked.pick
    log(f"fitting {pick.kind} on all {len(data)} rows, {len(data.jobs())} jobs (the held-out ones included)")
    blind = data.X[:, [INDEX[f] for f in NETWORK_BLIND]]
    log_y, sets = np.log(data.y), data.candidate_set
    bundle = {
        "schema_version": SCHEMA_VERSION, "target": "log(duration_seconds)", "kind": pick.kind,
        "features": list(FEATURE_NAMES),
        "estimator": fit_kind(pick.kind, data, seed),
        "screen": fit_screen(FEATURE_NAMES, data.X, log_y),
        "network_blind_features": list(NETWORK_BLIND),
        "network_blind_estimator": fit_model(pick.kind, NETWORK_BLIND, blind, log_y, sets, seed),
        "network_blind_screen": fit_screen(NETWORK_BLIND, blind, log_y),
    }
    meta = _meta(bundle, checked, data, paths, digest, seed, time.perf_counter() - started)
    meta["serving_ms_5000"] = round(_serving_ms(bundle, data.X), 3)
    if directory.exists():
        shutil.rmtree(directory)  # --force: no file of the replaced model may outlive it
    write_artifact(directory, bundle, meta, serving_files(bundle, log))
    log(f"wrote {directory}: {pick.kind} on all {len(data.jobs())} jobs (serving 5,000 candidates here: "
        f"{meta['serving_ms_5000']:.2f} ms median)")
    return directory


def serving_files(bundle: dict, log=print) -> dict[str, bytes] | None:
    """What the extender loads (netsched.models.predictor): the linear screen's parameters, the job
    part's trees as an ONNX graph and the candidate part as one too, or its parameters when it is
    linear; converted here once rather than at every load. None (served from the pickle) for a
    model that cannot be written so. The GPU identity flags every part reads after the features
    (`gpu_identity`) are written beside them."""
    estimator = bundle["estimator"]
    files: dict[str, bytes] = {}
    screen = LinearScreen(bundle["screen"], FEATURE_NAMES).params()
    identity = estimator.identity
    wide = (*FEATURE_NAMES, *identity_columns(identity))
    if isinstance(estimator, LinearPlusTrees):
        return _linear_plus_trees_files(estimator, screen, log)
    try:
        if isinstance(estimator, PlainTrees):
            files["trees.onnx"] = onnx_graph(estimator.trees, len(wide))
            spec: dict = {"plain_trees": "trees.onnx", "screen": screen}
        else:
            files["job.onnx"] = onnx_graph(estimator.job, len(estimator.job_columns))
            if is_trees(estimator.candidate):
                files["candidate.onnx"] = onnx_graph(estimator.candidate, len(wide))
                candidate: dict = {"onnx": "candidate.onnx"}
            else:
                candidate = {"linear": LinearScreen(estimator.candidate, wide).params()}
            spec = {"job_columns": list(estimator.job_columns), "job": "job.onnx", "candidate": candidate,
                    "screen": screen}
    except Exception as exc:  # noqa: BLE001 - a converter gap costs serving speed, never the artifact
        log(f"no serving files (the extender will serve the pickled model, slower): {exc}")
        return None
    if identity is not None:
        spec["gpu_identity"] = identity.params()
    return {SERVING_SPEC: (json.dumps(spec, indent=1) + "\n").encode(), **files}


def _linear_plus_trees_files(estimator: LinearPlusTrees, screen: dict, log=print) -> dict[str, bytes] | None:
    """A LinearPlusTrees as the extender loads it: the physics estimates it appends (by name, so a
    netsched that computes other ones refuses it), the linear part's parameters over the features and
    those estimates (and the GPU identity flags), and the trees as an ONNX graph."""
    names = (*estimator.features, *estimate_names(estimator.features), *identity_columns(estimator.identity))
    try:
        trees = onnx_graph(estimator.trees, len(names))
    except Exception as exc:  # noqa: BLE001 - a converter gap costs serving speed, never the artifact
        log(f"no serving files (the extender will serve the pickled model, slower): {exc}")
        return None
    spec: dict = {"linear_plus_trees": {"estimates": list(estimate_names(estimator.features)),
                                        "linear": LinearScreen(estimator.linear, names).params(),
                                        "trees": "trees.onnx", "by_reach": estimator.by_reach},
                  "screen": screen}
    if estimator.products is not None:
        spec["linear_plus_trees"]["products"] = estimator.products.params()
    if estimator.identity is not None:
        spec["gpu_identity"] = estimator.identity.params()
    return {SERVING_SPEC: (json.dumps(spec, indent=1) + "\n").encode(), "trees.onnx": trees}


def _serving_ms(bundle: dict, X: np.ndarray) -> float:
    """The chosen model's serving path timed on this machine: recorded for information, not used."""
    screen = LinearScreen(bundle["screen"], FEATURE_NAMES).predict
    estimator = compiled(bundle["estimator"], len(FEATURE_NAMES)).predict
    return predict_ms(lambda rows: fastest(rows, 1, screen, estimator), X)


def _name(data: Dataset, digest: str) -> str:
    day = datetime.fromtimestamp(float(data.start.max()), UTC).strftime("%Y%m%d")
    return f"jct-s{SCHEMA_VERSION}-{day}-{digest[:8]}"


def _meta(bundle: dict, checked: Validation, data: Dataset, paths: list[Path], digest: str, seed: int,
          train_seconds: float) -> dict:
    estimator = bundle["estimator"]
    if isinstance(estimator, LinearPlusTrees):
        params = {"linear": _params(estimator.linear), "trees": _params(estimator.trees),
                  "estimates": list(estimate_names(estimator.features))}
    elif isinstance(estimator, PlainTrees):
        params = {"trees": _params(estimator.trees)}
    else:
        params = {"job": _params(estimator.job), "candidate": _params(estimator.candidate)}
    return {
        "schema_version": SCHEMA_VERSION, "features": bundle["features"],
        # the flags every part of the model reads after `features` (netsched.models.gpu_identity)
        "gpu_identity": list(identity_columns(estimator.identity)),
        "network_blind_features": bundle["network_blind_features"], "target": bundle["target"],
        "model_kind": checked.pick.kind,
        "model_params": params,
        "selection_rule": SELECTION_RULE, "cv": {r.kind: r.to_json() for r in checked.results},
        "validation": checked.to_json(),
        "training_data": {  # all of it: the model is refit on every row after validation
            "files": [Path(p).name for p in paths], "sha256": digest, "rows": len(data),
            "candidate_sets": len(data.sets()), "sources": sorted(set(data.source)),
            "window": {"start_unix": float(data.start.min()), "end_unix": float(data.start.max()),
                       "start": _utc(data.start.min()), "end": _utc(data.start.max())},
            "held_out_rows_included": True,
        },
        "seed": seed, "train_seconds": round(train_seconds, 1), "created": _utc(time.time()),
        "versions": {"netsched": __version__, "sklearn": sklearn.__version__, "numpy": np.__version__,
                     "python": platform.python_version()},
    }


def _params(model) -> dict:
    if hasattr(model, "steps"):
        return {"steps": [type(s).__name__ for _, s in model.steps]}
    params = model.get_params(deep=False).items()
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in params if _jsonable(v)}


def _jsonable(v) -> bool:
    if isinstance(v, (list, np.ndarray)):
        return all(_jsonable(x) for x in np.asarray(v).ravel().tolist())
    return v is None or isinstance(v, (bool, int, str)) or (isinstance(v, float) and math.isfinite(v))


def _utc(t: float) -> str:
    return rfc3339(datetime.fromtimestamp(float(t), UTC))
