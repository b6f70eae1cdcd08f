"""The serving API: load a trained artifact once, predict completion seconds for a batch of candidates.

    predictor = Predictor.load("models/current.json")   # or an artifact directory
    seconds = predictor.predict(matrix)                  # every row, the chosen model
    rows, seconds = predictor.fastest(matrix, k=1)       # the k rows predicted fastest, within budget
    seconds = predictor.predict_candidates(values, n)    # one job's n candidates, as the extender asks

`predict` runs the chosen model on every row. Tree ensembles cost about 2 us per row here
(5,000 rows: ~9 ms), over the extender's budget, so `fastest` and `predict_candidates` screen
all rows with the artifact's linear model (fused into numpy expressions) and run the chosen
model on the SCREEN_ROWS best only. `predict_candidates` takes the features by name, job
features as scalars, and screens only the columns that vary between candidates: at 5,000
candidates it never builds the 5,000-row matrix. Loading refuses an artifact whose schema version
or feature list differs from this netsched's (netsched.models.features), or whose model
file does not match the sha256 in its meta.json, with an ArtifactError naming the file and
the fix: a mismatched model would silently score the wrong columns.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from netsched.models.artifact import (
    SERVING,
    SERVING_SPEC,
    ArtifactError,
    artifact_dir,
    load_bundle,
    read_meta,
    read_serving,
)
from netsched.models.compiled import OnnxTrees
from netsched.models.estimators import JobPlusCandidate, LinearPlusTrees, PlainTrees, Regressor
from netsched.models.features import FEATURE_NAMES, NETWORK_BLIND, SCHEMA_VERSION, feature_matrix, require
from netsched.models.gpu_identity import GpuIdentity, identity_columns
from netsched.models.physics import estimate_names
from netsched.models.products import ProductOffsets

SCREEN_ROWS = 128  # rows `fastest` hands the chosen model after the linear screen
VARIANTS = {"learned": ("features", "estimator", "screen", FEATURE_NAMES),
            "network_blind": ("network_blind_features", "network_blind_estimator", "network_blind_screen",
                              NETWORK_BLIND)}


class LinearScreen:
    """A fitted log1p -> median-impute (+ indicators) -> scale -> linear pipeline as one numpy expression:
    the same numbers as the pipeline's predict, without its per-step validation cost."""

    def __init__(self, pipeline: Any, features: tuple[str, ...]):
        logs, imputer, scaler, linear = (step for _, step in pipeline.steps)
        self.features = features
        self.heavy = list(logs.kw_args["columns"])
        fill = imputer.statistics_  # in log1p units for the heavy-tailed columns
        self.raw_fill = fill.copy()  # the same values before log1p: imputing first saves a copy
        self.raw_fill[self.heavy] = np.expm1(fill[self.heavy])
        flagged = [] if imputer.indicator_ is None else list(imputer.indicator_.features_)
        n = len(features)
        self.weights = linear.coef_[:n] / scaler.scale_[:n]
        self.missing_weights = np.zeros(n)  # the weight of a column's missing-value indicator, if any
        self.missing_weights[flagged] = linear.coef_[n:] / scaler.scale_[n:]
        self.bias = float(linear.intercept_ - (linear.coef_ * scaler.mean_ / scaler.scale_).sum())

    def params(self) -> dict[str, Any]:
        """What `predict` computes with, as JSON: written beside the artifact so serving needs no
        scikit-learn (floats survive JSON exactly)."""
        return {"heavy": self.heavy, "raw_fill": self.raw_fill.tolist(), "weights": self.weights.tolist(),
                "missing_weights": self.missing_weights.tolist(), "bias": self.bias}

    @classmethod
    def of_params(cls, params: Mapping[str, Any], features: tuple[str, ...]) -> LinearScreen:
        screen = cls.__new__(cls)
        screen.features = features
        screen.heavy = [int(j) for j in params["heavy"]]
        screen.raw_fill = np.array(params["raw_fill"], dtype=np.float64)
        screen.weights = np.array(params["weights"], dtype=np.float64)
        screen.missing_weights = np.array(params["missing_weights"], dtype=np.float64)
        screen.bias = float(params["bias"])
        if not len(screen.raw_fill) == len(screen.weights) == len(screen.missing_weights) == len(features):
            raise ValueError(f"screen parameters for {len(screen.weights)} features, "
                             f"schema has {len(features)}")
        return screen

    def predict(self, X: np.ndarray) -> np.ndarray:
        missing = np.isnan(X)
        Z = np.where(missing, self.raw_fill, X).astype(np.float64, copy=False)
        Z[:, self.heavy] = np.log1p(np.maximum(Z[:, self.heavy], 0))
        log_seconds: np.ndarray = self.bias + Z @ self.weights + missing @ self.missing_weights
        return log_seconds

    def predict_values(self, values: Mapping[str, float | np.ndarray], rows: int) -> np.ndarray:
        """`predict` of the rows `feature_matrix(values, rows)` would build, without building them:
        the scalar (job) columns add one number, the array columns are screened as rows of their own."""
        scalar = [j for j, name in enumerate(self.features) if np.ndim(values[name]) == 0]
        varying = [j for j, name in enumerate(self.features) if np.ndim(values[name]) != 0]
        constant = self.bias + self._terms(scalar, [[values[self.features[j]]] for j in scalar])
        varied = self._terms(varying, [values[self.features[j]] for j in varying], rows)
        log_seconds: np.ndarray = constant + varied
        return log_seconds

    def _terms(self, columns: list[int], data: list[Any], rows: int = 1) -> np.ndarray:
        """Weighted sum over `columns` (feature positions) of their values, one row per column."""
        if not columns:
            return np.zeros(rows)
        A = np.array(data, dtype=np.float64).reshape(len(columns), -1)
        missing = np.isnan(A)
        Z = np.where(missing, self.raw_fill[columns, None], A)
        heavy = [k for k, j in enumerate(columns) if j in self.heavy]
        Z[heavy] = np.log1p(np.maximum(Z[heavy], 0))
        terms: np.ndarray = self.weights[columns] @ Z + self.missing_weights[columns] @ missing
        return terms


@dataclass(frozen=True)
class Predictor:
    features: tuple[str, ...]
    estimator: Regressor
    screen: LinearScreen
    meta: dict[str, Any]
    path: Path
    served: Regressor  # the estimator as the serving path runs it

    @classmethod
    def load(cls, path: Path | str, variant: str = "learned",
             convert: Callable[[Regressor, int], Regressor] | None = None) -> Predictor:
        """The artifact at `path` (a directory or a manifest); `network_blind` is the twin trained
        without network features, for evaluation. An artifact without serving files is served from
        its pickle, through `convert` (estimator, feature count -> the estimator to serve) when
        given: training passes its ONNX conversion (netsched.training.onnx_export), which needs the
        `train` extra, as unpickling such a model does."""
        features_key, estimator_key, screen_key, expected = VARIANTS[variant]
        directory = artifact_dir(Path(path))
        meta = read_meta(directory)
        _check(directory, meta.get("schema_version"), meta.get(features_key), expected)
        if variant == "learned" and SERVING in meta:
            return cls._load_serving(directory, meta, tuple(expected))
        bundle = load_bundle(directory, meta)
        _check(directory, bundle.get("schema_version"), bundle.get(features_key), expected)
        features, estimator = tuple(expected), bundle[estimator_key]
        return cls(features, estimator, LinearScreen(bundle[screen_key], features), meta, directory,
                   _served(convert(estimator, len(features)) if convert else estimator))

    @classmethod
    def _load_serving(cls, directory: Path, meta: dict[str, Any], features: tuple[str, ...]) -> Predictor:
        """The artifact's serving files: the screen's parameters, the job part's trees as an ONNX graph
        and the candidate part as one too (or, for a linear candidate part, its parameters), or for a
        LinearPlusTrees its linear part's parameters and its trees' graph, ready to run as written: no
        pickle, no conversion."""
        files = read_serving(directory, meta)
        model: JobPlusCandidate | LinearPlusTrees | PlainTrees
        try:
            spec = json.loads(files[SERVING_SPEC])
            screen = LinearScreen.of_params(spec["screen"], features)
            identity = (GpuIdentity.of_params(spec["gpu_identity"], features) if "gpu_identity" in spec
                        else None)
            _check_identity(directory, meta, identity)
            if "linear_plus_trees" in spec:
                model = _linear_plus_trees(directory, spec["linear_plus_trees"], files, features, identity)
            elif "plain_trees" in spec:
                model = PlainTrees(OnnxTrees(files[spec["plain_trees"]]), identity)
            else:
                part = spec["candidate"]
                wide = (*features, *identity_columns(identity))
                candidate = (OnnxTrees(files[part["onnx"]]) if "onnx" in part
                             else LinearScreen.of_params(part["linear"], wide))
                model = JobPlusCandidate([int(j) for j in spec["job_columns"]], OnnxTrees(files[spec["job"]]),
                                         candidate, identity)
        except ArtifactError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactError(f"{directory / SERVING_SPEC}: not usable ({type(exc).__name__}: {exc}); "
                                "retrain the model") from None
        except Exception as exc:  # an ONNX graph onnxruntime refuses
            raise ArtifactError(f"{directory}: its ONNX graphs cannot be loaded ({type(exc).__name__}: "
                                f"{exc}); retrain the model") from None
        return cls(features, model, screen, meta, directory, model)

    def predict(self, matrix: np.ndarray) -> np.ndarray:
        """Completion seconds per row of `matrix` (rows x len(self.features), schema order, NaN = unknown)."""
        self._check_shape(matrix)
        if not len(matrix):
            return np.empty(0)
        seconds: np.ndarray = np.exp(self.estimator.predict(matrix))
        return seconds

    def predict_one_job(self, matrix: np.ndarray) -> np.ndarray:
        """`predict` for the candidates of one job (rows equal in every job feature), as the
        extender scores them: a two-part model's job part runs on one row, not on all."""
        self._check_shape(matrix)
        if not len(matrix):
            return np.empty(0)
        predict: Callable[[np.ndarray], np.ndarray] = getattr(self.served, "predict_one_job",
                                                              self.served.predict)
        seconds: np.ndarray = np.exp(predict(matrix))
        return seconds

    def predict_candidates(self, values: Mapping[str, float | np.ndarray], rows: int) -> np.ndarray:
        """Seconds for each of one job's `rows` candidates, from features by name (job features
        scalars, the others arrays of `rows`): the model's for the SCREEN_ROWS the screen ranks
        fastest, the screen's (floored at the slowest of those) for the rest, so a screened-out
        candidate never outranks a screened one."""
        require(values, self.features)
        if rows <= SCREEN_ROWS:
            return self.predict_one_job(feature_matrix(values, rows, self.features))
        screen = np.exp(self.screen.predict_values(values, rows))
        kept = np.argpartition(screen, SCREEN_ROWS - 1)[:SCREEN_ROWS]
        subset = {name: v if np.ndim(v) == 0 else cast(np.ndarray, v)[kept] for name, v in values.items()}
        exact = self.predict_one_job(feature_matrix(subset, SCREEN_ROWS, self.features))
        seconds: np.ndarray = np.maximum(screen, exact.max())
        seconds[kept] = exact
        return seconds

    def fastest(self, matrix: np.ndarray, k: int = 1, screen_rows: int = SCREEN_ROWS
                ) -> tuple[np.ndarray, np.ndarray]:
        """Row indices of the k rows predicted fastest, fastest first, and their predicted seconds."""
        self._check_shape(matrix)
        return fastest(matrix, k, self.screen.predict, self.served.predict, screen_rows)

    def _check_shape(self, matrix: np.ndarray) -> None:
        if matrix.ndim != 2 or matrix.shape[1] != len(self.features):
            raise ValueError(f"predict wants a (rows, {len(self.features)}) matrix in schema order, "
                             f"got shape {matrix.shape}")


def fastest(matrix: np.ndarray, k: int, screen: Callable[[np.ndarray], np.ndarray],
            exact: Callable[[np.ndarray], np.ndarray], screen_rows: int = SCREEN_ROWS
            ) -> tuple[np.ndarray, np.ndarray]:
    """The k rows with the lowest exact log-seconds among the screen_rows rows the screen ranks lowest."""
    rows = np.arange(len(matrix))
    if len(matrix) > screen_rows:
        rows = np.argpartition(screen(matrix), screen_rows - 1)[:screen_rows]
    log_seconds = exact(matrix[rows]) if len(rows) else np.empty(0)
    best = np.argsort(log_seconds, kind="stable")[:k]
    return rows[best], np.exp(log_seconds[best])


def _served(estimator: Regressor) -> Regressor:
    """A LinearPlusTrees' linear part as one numpy expression: scikit-learn's pipeline validates its
    input at each of its four steps, 0.7 ms on 128 rows where the model's trees take 0.2."""
    if isinstance(estimator, LinearPlusTrees) and not isinstance(estimator.linear, LinearScreen):
        identity = getattr(estimator, "identity", None)
        names = (*estimator.features, *estimate_names(estimator.features), *identity_columns(identity))
        return LinearPlusTrees(estimator.features, LinearScreen(estimator.linear, names), estimator.trees,
                               getattr(estimator, "products", None), getattr(estimator, "by_reach", False),
                               identity)
    return estimator


def _linear_plus_trees(directory: Path, spec: Mapping[str, Any], files: Mapping[str, bytes],
                       features: tuple[str, ...], identity: GpuIdentity | None = None) -> LinearPlusTrees:
    """A LinearPlusTrees from its serving spec, refused if it was trained on other physics estimates
    than this netsched computes; without `products` (written before product offsets) it has none,
    without `by_reach` (written before physics.peers_by_reach) it reads the peer columns as written."""
    estimates = estimate_names(features)
    if tuple(spec["estimates"]) != estimates:
        raise ArtifactError(f"{directory / SERVING_SPEC}: trained on the estimates {spec['estimates']}, this "
                            f"netsched computes {list(estimates)}; retrain the model with `netsched train`")
    linear = LinearScreen.of_params(spec["linear"], (*features, *estimates, *identity_columns(identity)))
    products = spec.get("products")
    return LinearPlusTrees(features, linear, OnnxTrees(files[spec["trees"]]),
                           None if products is None else ProductOffsets.of_params(products, features),
                           bool(spec.get("by_reach", False)), identity)


def _check_identity(directory: Path, meta: Mapping[str, Any], identity: GpuIdentity | None) -> None:
    """The serving files' GPU identity flags must be those meta.json records (none where it records none,
    as artifacts written before them): else the files and the record are of different models."""
    recorded = list(meta.get("gpu_identity", []))
    if recorded != list(identity_columns(identity)):
        raise ArtifactError(f"{directory}: meta.json records the GPU identity flags {recorded}, its serving "
                            f"files {list(identity_columns(identity))}; retrain the model")


def _check(directory: Path, version: object, features: Iterable[str] | None,
           expected: tuple[str, ...]) -> None:
    if version != SCHEMA_VERSION:
        raise ArtifactError(f"{directory}: model schema version {version}, this netsched uses "
                            f"{SCHEMA_VERSION}; retrain it with `netsched train` on data of this version")
    if features is None or tuple(features) != expected:
        got = list(features or [])
        missing = [f for f in expected if f not in got]
        extra = [f for f in got if f not in expected]
        detail = f"missing {missing}, unexpected {extra}" if missing or extra else "same names, another order"
        raise ArtifactError(f"{directory}: feature list does not match schema v{SCHEMA_VERSION} ({detail}); "
                            "retrain the model with `netsched train`")


def predict_ms(predict: Callable[[np.ndarray], object], X: np.ndarray, rows: int = 5000,
               repeats: int = 9, seed: int = 0) -> float:
    """Median wall time of one call over `rows` rows drawn from X, in milliseconds (after a warm-up)."""
    batch = np.ascontiguousarray(X[np.random.default_rng(seed).integers(len(X), size=rows)])
    predict(batch)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        predict(batch)
        times.append(time.perf_counter() - t)
    return float(np.median(times) * 1000)
