"""How `netsched train` fits the regressors it compares, with fixed settings chosen for serving speed.

Every kind learns log(completion seconds) in two parts (JobPlusCandidate): a job part, the
mean over the job's candidate set, from the job features alone; and a candidate part, each
row's offset from that mean, from all features. Only the candidate part ranks a job's
nodes, and it no longer spends its capacity on the job-to-job spread (a job's own length
varies far more than its candidates do): on simulator data this raised top-1 by 3.4 points
over learning log seconds directly (docs/models.md, "Tuning runs"). The kinds differ in how
they learn the candidate part; the job part is always a small gradient-boosted model. A
record of one candidate (the operator's) has no set mean: its candidate target is its
residual from the job part.

`hist_gradient_boosting_whole` is one model of log seconds over (job, candidate) rows: the job
part is its starting point and its trees learn every row's residual from it, never an offset
from the other candidates of the row's set. That offset depends on candidates the row does not
show; within one cluster it is a stable function of the cluster's GPU mix, across clusters it is
not: on clusters left out of training (bench/loco.py) the set offset lost 20 points of top-1 to
the residual (docs/benchmarks.md). Cross-validation picks between them (train.SELECTION_RULE).

`hist_gradient_boosting_physics` is one model over (job, candidate) rows too (LinearPlusTrees):
ridge over the features and their physics estimates (netsched.models.physics: compute, transfer
and exchange seconds), then the same trees learning its residual, constrained to be monotone
where the direction is physics (MONOTONE: more GPU TFLOPS or bandwidth, more link bandwidth,
more of the job's peers within reach never slower; more RTT, NIC load or estimated seconds never
faster). The linear part keeps the same directions (SignedRidge: a coefficient of the wrong sign
is held at 0), so neither part can rank a node lower because the job's peers are closer: both
read the peer columns restated by reach (netsched.models.physics.peers_by_reach), where moving a
peer closer raises shares and lowers none, and an exchange over no link is the fastest value of
each link column. A link left unmeasured is never read as faster than no link at all: the linear
part's missing-value indicators of those columns (NO_FASTER_UNKNOWN) are held at 0 or above, and
in the trees the no-link value (0) is the fast end of every split, while NaN goes with a side or
past the largest value. Trees alone score a GPU or
link outside their training range like the nearest one they saw; the linear part in the logs
carries it on. The trees learn each row's residual less its candidate set's mean residual:
what the ridge missed about the job as a whole is the same on every candidate and decides no
ranking, and left in, it is most of what the trees would spend their splits on. Unlike the
two-part kind's offset from the set's mean log seconds, this one is taken after the ridge has
accounted for the GPUs and links of the set, so it no longer depends on the cluster's GPU mix.
A set of one (operator records) keeps its whole residual.

`hist_gradient_boosting_plain` is the kind with none of those assumptions: one boosted model of log
seconds over the raw columns, no parts, no physics estimates, no monotone constraints, at the
two-part kind's tree settings. It stays in the running so that a world whose law is not the one the
other kinds encode still has a kind that only learns from its rows.

Every kind reads, beside the GPU capability columns, a flag per GPU product the training rows hold
gpu_identity.MIN_JOBS jobs or more of (netsched.models.gpu_identity): the candidate part of the
two-part kinds, both parts of the physics kind, the plain kind's trees. A product without a flag
(unseen, or too few jobs) is placed by its capability numbers alone.

Trees read NaN (unknown) natively; the linear and kNN models get log1p of heavy-tailed
features, median imputation with missing-value indicators, and standard scaling. Settings
are fixed, not searched. They were chosen when scikit-learn served the trees, at ~9 us per
tree call whatever the rows: the candidate part has 100 trees of at most 31 leaves (150 at
learning rate 0.1 scored 0.6 points better top-1 on three simulated clusters, within noise,
for half again the serving time) and the job part 30 of at most 15. ONNX Runtime serves
them now (netsched.training.onnx_export writes them as graphs), where trees cost far less. The
random forest predicts on one thread: with two, the thread pool's start-up cost more than the 128
rows it serves.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.linalg import cholesky, solve_triangular
from scipy.optimize import lsq_linear
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
from sklearn.impute import SimpleImputer
from sklearn.linear_model import Ridge
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from netsched.models.estimators import JobPlusCandidate, LinearPlusTrees, PlainTrees, log1p_columns
from netsched.models.features import FEATURES
from netsched.models.gpu_identity import GpuIdentity, appended, identity_columns
from netsched.models.physics import estimate_names, peers_by_reach, with_estimates
from netsched.models.products import ProductOffsets

MODEL_KINDS = ("hist_gradient_boosting", "hist_gradient_boosting_whole", "hist_gradient_boosting_physics",
               "hist_gradient_boosting_plain", "random_forest", "ridge", "knn")
PLAIN = "hist_gradient_boosting_plain"
WHOLE = {"hist_gradient_boosting_whole": "hist_gradient_boosting"}  # kind -> its trees' settings
PHYSICS = "hist_gradient_boosting_physics"
# +1: completion time never falls as the feature rises; -1: never rises. Every physics estimate is +1.
# The peer columns are as peers_by_reach restates them: the shares cumulative (within the node, the
# rack, the zone), peer_bw_mbps as seconds per megabit.
MONOTONE = {"gpu_tflops16": -1, "gpu_mem_bw_gbps": -1, "data_bw_mbps": -1, "peer_bw_mbps": 1,
            "data_rtt_ms": 1, "peer_rtt_ms": 1, "nic_util": 1,
            "peer_frac_node": -1, "peer_frac_rack": -1, "peer_frac_zone": -1}
# columns whose value without a link (0, peers_by_reach) is their fastest: unknown must not read faster
NO_FASTER_UNKNOWN = ("peer_bw_mbps", "peer_rtt_ms", "est_log1p_exchange_s")
JOB_FEATURES = frozenset(f.name for f in FEATURES if f.group == "job")
ESTIMATES = frozenset(estimate_names(tuple(f.name for f in FEATURES)))
KNN_MAX_ROWS = 10_000  # kNN keeps a random sample this big: its cost grows with every row it keeps
KNN_NEIGHBORS = 15  # or every row, when fewer: a cross-validation fold of a young cluster's records


def make_model(kind: str, features: tuple[str, ...], seed: int):
    """An unfitted regressor of `kind` over `features` (a subset of the schema, in schema order)."""
    kind = WHOLE.get(kind, kind)
    if kind in ("hist_gradient_boosting", PHYSICS, PLAIN):
        monotone = None if kind != PHYSICS else [direction(f) for f in features]
        return HistGradientBoostingRegressor(max_iter=100, learning_rate=0.15, max_leaf_nodes=31,
                                             min_samples_leaf=20, early_stopping=False, random_state=seed,
                                             monotonic_cst=monotone)
    if kind == "random_forest":
        return QuietForest(n_estimators=40, max_depth=12, min_samples_leaf=3, max_features=0.5,
                                     max_samples=0.5, random_state=seed)
    if kind == "ridge":
        return _scaled(features, Ridge(alpha=1.0))
    if kind == "knn":
        return _scaled(features, KNeighborsRegressor(n_neighbors=KNN_NEIGHBORS, weights="distance"))
    raise ValueError(f"unknown model kind {kind!r}; one of {', '.join(MODEL_KINDS)}")


def direction(name: str) -> int:
    """The physics kind's constraint on a column of its inputs: MONOTONE's, +1 for an estimate, else 0."""
    return MONOTONE.get(name, 1 if name in ESTIMATES else 0)


def fit_model(kind: str, features: tuple[str, ...], X: np.ndarray, log_seconds: np.ndarray,
              sets: np.ndarray, seed: int,
              identity: bool = True) -> JobPlusCandidate | LinearPlusTrees | PlainTrees:
    """A fitted JobPlusCandidate, or LinearPlusTrees for PHYSICS, PlainTrees for PLAIN; `sets` names
    each row's candidate set (one per job); `identity`: with the GPU identity flags."""
    X = _no_empty_columns(X)
    gpus = GpuIdentity.fit(features, X, sets) if identity else None
    if kind == PHYSICS:
        return fit_linear_plus_trees(features, X, log_seconds, sets, seed, identity=gpus)
    wide = (*features, *identity_columns(gpus))
    if kind == PLAIN:
        return PlainTrees(make_model(PLAIN, wide, seed).fit(appended(gpus, X), log_seconds), gpus)
    job_columns = [i for i, name in enumerate(features) if name in JOB_FEATURES]
    _, inverse, counts = np.unique(sets, return_inverse=True, return_counts=True)
    set_mean = (np.bincount(inverse, weights=log_seconds) / counts)[inverse]
    job = HistGradientBoostingRegressor(max_iter=30, learning_rate=0.2, max_leaf_nodes=15,
                                        min_samples_leaf=20, early_stopping=False, random_state=seed)
    job.fit(X[:, job_columns], set_mean)
    offset = log_seconds - set_mean
    alone = counts[inverse] == 1 if kind not in WHOLE else np.ones(len(X), dtype=bool)
    if alone.any():
        offset[alone] = log_seconds[alone] - job.predict(X[alone][:, job_columns])
    if kind == "knn" and len(X) > KNN_MAX_ROWS:
        keep = np.random.default_rng(seed).choice(len(X), KNN_MAX_ROWS, replace=False)
        X, offset = X[keep], offset[keep]
    candidate = make_model(kind, wide, seed)
    if kind == "knn":
        candidate.set_params(kneighborsregressor__n_neighbors=min(KNN_NEIGHBORS, len(X)))
    return JobPlusCandidate(job_columns, job, candidate.fit(appended(gpus, X), offset), gpus)


def fit_linear_plus_trees(features: tuple[str, ...], X: np.ndarray, log_seconds: np.ndarray,
                          sets: np.ndarray, seed: int, products: bool = True,
                          identity: GpuIdentity | None = None) -> LinearPlusTrees:
    """Ridge with the MONOTONE signs on the features (peers restated by reach) and their physics
    estimates; its residual, each row's less its candidate set's mean residual (a set of one keeps its
    own), gives the offset per GPU product and workload kind the rows have enough jobs of (`products`),
    and monotone trees learn what is left."""
    Z = _no_empty_columns(peers_by_reach(with_estimates(X, features), features))
    if identity is not None:
        Z = np.column_stack([Z, identity.flags(X)])
    names = (*features, *estimate_names(features), *identity_columns(identity))
    linear = _signed_linear(names, Z, log_seconds)
    residual = log_seconds - linear.predict(Z)
    _, inverse, counts = np.unique(sets, return_inverse=True, return_counts=True)
    set_mean = (np.bincount(inverse, weights=residual) / counts)[inverse]
    residual = np.where(counts[inverse] > 1, residual - set_mean, residual)
    offsets = ProductOffsets.fit(features, X, residual, sets) if products else None
    if offsets is not None:
        residual = residual - offsets.predict(X)
    trees = make_model(PHYSICS, names, seed).fit(Z, residual)
    return LinearPlusTrees(features, linear, trees, offsets, by_reach=True, identity=identity)


def _signed_linear(names: tuple[str, ...], Z: np.ndarray, log_seconds: np.ndarray) -> Pipeline:
    """The ridge pipeline over `names` with each column's coefficient of the sign `direction` gives it
    and the missing-value indicators of NO_FASTER_UNKNOWN at 0 or above."""
    model = _scaled(names, SignedRidge(alpha=1.0))
    prepared = model[:-1].fit_transform(Z)
    imputer = model.named_steps["simpleimputer"]
    flagged = [] if imputer.indicator_ is None else list(imputer.indicator_.features_)
    signs = [direction(n) for n in names] + [1 if names[j] in NO_FASTER_UNKNOWN else 0 for j in flagged]
    model[-1].set_params(signs=signs).fit(prepared, log_seconds)
    return model


class SignedRidge(RegressorMixin, BaseEstimator):
    """Ridge regression (an intercept, L2 penalty `alpha` on the coefficients) with a sign per
    coefficient: +1 kept at 0 or above, -1 at 0 or below, 0 free (`signs` None: all free, Ridge's
    answer). Solved as bounded least squares on the penalised normal equations' Cholesky factor."""

    def __init__(self, alpha: float = 1.0, signs: list[int] | None = None):
        self.alpha = alpha
        self.signs = signs

    def fit(self, X, y):
        X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
        n = X.shape[1]
        signs = np.zeros(n) if self.signs is None else np.asarray(self.signs, dtype=np.float64)
        if len(signs) != n:
            raise ValueError(f"{len(signs)} signs for {n} columns")
        x_mean, y_mean = X.mean(axis=0), y.mean()
        Xc = X - x_mean
        R = cholesky(Xc.T @ Xc + self.alpha * np.eye(n))  # R.T @ R: the penalised Gram matrix
        target = solve_triangular(R, Xc.T @ (y - y_mean), trans="T")
        bounds = (np.where(signs > 0, 0.0, -np.inf), np.where(signs < 0, 0.0, np.inf))
        self.coef_ = lsq_linear(R, target, bounds=bounds, method="bvls").x
        self.intercept_ = float(y_mean - x_mean @ self.coef_)
        self.n_features_in_ = n
        return self

    def predict(self, X):
        prediction: np.ndarray = np.asarray(X, dtype=np.float64) @ self.coef_ + self.intercept_
        return prediction


def _no_empty_columns(X: np.ndarray) -> np.ndarray:
    """X with every column that holds no value at all (operator records without telemetry) set to 0:
    gradient boosting cannot bin an all-NaN column, and a constant one is never split on, so what
    such a feature holds when predicting makes no difference."""
    empty = np.isnan(X).all(axis=0)
    if not empty.any():
        return X
    out = X.copy()
    out[:, empty] = 0.0
    return out


def fit_screen(features: tuple[str, ...], X: np.ndarray, log_seconds: np.ndarray) -> Pipeline:
    """The linear screen (predictor.LinearScreen): ridge on log seconds directly, so its estimates
    share the model's scale and can stand in for the rows it screens out."""
    return make_model("ridge", features, 0).fit(X, log_seconds)


class QuietForest(RandomForestRegressor):
    """The random forest without scikit-learn's warning that half of a small fold's rows make few
    bootstrap samples: true, and cross-validation on a young cluster's records says so for every fold."""

    def fit(self, X, y, sample_weight=None):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Using the fractional value max_samples", UserWarning)
            return super().fit(X, y, sample_weight)


def _scaled(features: tuple[str, ...], model) -> Pipeline:
    heavy = [i for i, name in enumerate(features) if any(f.name == name and f.heavy_tailed for f in FEATURES)]
    return make_pipeline(FunctionTransformer(log1p_columns, kw_args={"columns": heavy}),
                         SimpleImputer(strategy="median", add_indicator=True, keep_empty_features=True),
                         StandardScaler(), model)
