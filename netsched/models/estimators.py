"""The estimator classes a model artifact pickles, servable without training code.

`netsched train` (netsched.training.fitting) fits these; the extender unpickles them. They
stay at this import path because saved artifacts name it.

Every kind learns log(completion seconds) in two parts (JobPlusCandidate): a job part, the
mean over the job's candidate set, from the job features alone; and a candidate part, each
row's offset from that mean, from all features. Only the candidate part ranks a job's nodes.
LinearPlusTrees is one model over (job, candidate) rows: a linear model over the features and
their physics estimates (netsched.models.physics), the history's offset for each GPU product and
workload kind it has seen enough of (netsched.models.products), and trees learning the rest.
PlainTrees is one gradient-boosted model over the raw columns: no parts, no physics, no constraints.
Every kind reads, beside the four GPU capability columns, one flag per GPU product its training rows
held enough jobs of (`identity`, netsched.models.gpu_identity; None in artifacts written before it).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from netsched.models.gpu_identity import GpuIdentity, appended
from netsched.models.physics import peers_by_reach, with_estimates
from netsched.models.products import ProductOffsets


class Regressor(Protocol):
    """What serving needs of a model or a part of one: scikit-learn's regressors, these classes,
    OnnxTrees and the predictor's LinearScreen."""

    def predict(self, X: np.ndarray) -> np.ndarray: ...


class JobPlusCandidate:
    """log seconds = job part (from the job columns) + candidate part (from every column and the GPU
    identity flags)."""

    def __init__(self, job_columns: list[int], job: Regressor, candidate: Regressor,
                 identity: GpuIdentity | None = None):
        self.job_columns = job_columns
        self.job = job
        self.candidate = candidate
        self.identity = identity

    def predict(self, X: np.ndarray) -> np.ndarray:
        log_seconds: np.ndarray = self.job.predict(X[:, self.job_columns]) + self._candidate(X)
        return log_seconds

    def predict_one_job(self, X: np.ndarray) -> np.ndarray:
        """The same for rows that all describe one job (equal job columns): its part runs once."""
        log_seconds: np.ndarray = self.job.predict(X[:1, self.job_columns]) + self._candidate(X)
        return log_seconds

    def _candidate(self, X: np.ndarray) -> np.ndarray:
        return self.candidate.predict(appended(getattr(self, "identity", None), X))


class PlainTrees:
    """log seconds = one tree ensemble over every column and the GPU identity flags."""

    def __init__(self, trees: Regressor, identity: GpuIdentity | None = None):
        self.trees = trees
        self.identity = identity

    def predict(self, X: np.ndarray) -> np.ndarray:
        log_seconds: np.ndarray = self.trees.predict(appended(self.identity, X))
        return log_seconds


class LinearPlusTrees:
    """log seconds = linear(features + estimates) + products(features) + trees(features + estimates),
    where the estimates are netsched.models.physics's for `features` (the columns of X, in order). The
    linear part carries what extrapolates to GPUs and links outside the training range; the product
    offsets (None: none learned, as in artifacts written before they were) what the history knows
    about the GPUs it has seen; the trees learn the residual. With `by_reach` both parts read the
    peer columns as physics.peers_by_reach restates them (False: as written, as artifacts written
    before it did). Both parts read the GPU identity flags (`identity`) after the estimates."""

    def __init__(self, features: tuple[str, ...], linear: Regressor, trees: Regressor,
                 products: ProductOffsets | None = None, by_reach: bool = False,
                 identity: GpuIdentity | None = None):
        self.features = tuple(features)
        self.linear = linear
        self.trees = trees
        self.products = products
        self.by_reach = by_reach
        self.identity = identity

    def inputs(self, X: np.ndarray) -> np.ndarray:
        """The columns both parts read: X's, restated by reach if trained so, the physics estimates and
        the GPU identity flags."""
        Z = with_estimates(X, self.features)
        if getattr(self, "by_reach", False):  # a pickle from before peers_by_reach has none
            Z = peers_by_reach(Z, self.features)
        identity = getattr(self, "identity", None)  # a pickle from before identities has none
        return Z if identity is None else np.column_stack([Z, identity.flags(X)])

    def predict(self, X: np.ndarray) -> np.ndarray:
        Z = self.inputs(X)
        log_seconds: np.ndarray = self.linear.predict(Z) + self.trees.predict(Z)
        products = getattr(self, "products", None)  # a pickle from before product offsets has none
        if products is not None:
            log_seconds = log_seconds + products.predict(X)
        return log_seconds

    def predict_one_job(self, X: np.ndarray) -> np.ndarray:
        return self.predict(X)


def log1p_columns(X: np.ndarray, columns: list[int]) -> np.ndarray:
    out = np.array(X, dtype=np.float64, copy=True)
    out[:, columns] = np.log1p(np.maximum(out[:, columns], 0))
    return out
