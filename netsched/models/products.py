"""What the history knows about each GPU product it has seen: a learned offset per (product, workload kind).

The four capability numbers (netsched.models.gpus) carry a GPU nobody has seen, but real speed per
job kind is not a function of TFLOPS and bandwidth alone: where a cluster's history has run
enough jobs of one kind on one product, the mean of what the physics-based linear part missed
there is a better guide for that product than any formula over its numbers. ProductOffsets holds
that mean, shrunk towards 0 for few jobs, for every (product, kind) with MIN_JOBS jobs or more in
training; any other pair, and a node whose GPU is unknown, gets 0, so the capability numbers alone
place it, as before.

A product is told apart by its four capability numbers, the only thing a row says about its GPU:
the GPU table gives each product its own numbers (two products with identical numbers, such as
A100 SXM4 40GB and A100 PCIe 40GB, or a product the table does not know and maps to its nearest
known one, count as one product; give it its own numbers in the table to tell it apart).
Pure numpy, so the extender serves it from the artifact's serving spec (`params`, `of_params`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from netsched.models.features import WORKLOAD_KINDS
from netsched.models.gpus import GPU_FEATURES

MIN_JOBS = 30  # jobs of one kind on one product before the history's offset is used for it
SHRINK_JOBS = 20  # an offset is the residual sum over (jobs + SHRINK_JOBS): few jobs, small offset
KIND_COLUMNS = tuple(f"kind_{k}" for k in WORKLOAD_KINDS)


class ProductOffsets:
    """log-seconds offset per (GPU capability numbers, workload kind), 0 for any pair not learned."""

    def __init__(self, features: Sequence[str], products: np.ndarray, offsets: np.ndarray):
        self.gpu_columns = [list(features).index(f) for f in GPU_FEATURES]
        self.kind_columns = [list(features).index(k) for k in KIND_COLUMNS]
        self.products = np.asarray(products, dtype=np.float64).reshape(-1, len(GPU_FEATURES))
        self.offsets = np.asarray(offsets, dtype=np.float64).reshape(len(self.products), len(KIND_COLUMNS))

    @classmethod
    def fit(cls, features: Sequence[str], X: np.ndarray, residual: np.ndarray,
            jobs: np.ndarray) -> ProductOffsets | None:
        """The offsets learned from `residual` (log seconds the linear part missed, per row of X;
        `jobs` names each row's job), or None where `features` lack the GPU or kind columns or no
        (product, kind) has MIN_JOBS jobs."""
        if not set(GPU_FEATURES) | set(KIND_COLUMNS) <= set(features):
            return None
        empty = cls(features, np.empty((0, len(GPU_FEATURES))), np.empty((0, len(KIND_COLUMNS))))
        gpu = X[:, empty.gpu_columns]
        kind = empty._kind(X)
        known = np.isfinite(gpu).all(axis=1) & (kind >= 0)
        if not known.any():
            return None
        products, product = np.unique(gpu[known], axis=0, return_inverse=True)
        product = product.ravel()
        kinds = kind[known]
        offsets = np.zeros((len(products), len(KIND_COLUMNS)))
        for p in range(len(products)):
            for k in range(len(KIND_COLUMNS)):
                rows = (product == p) & (kinds == k)
                n = len(np.unique(jobs[known][rows]))
                if n >= MIN_JOBS:
                    offsets[p, k] = residual[known][rows].sum() / (rows.sum() / n * (n + SHRINK_JOBS))
        learned = (offsets != 0).any(axis=1)
        if not learned.any():
            return None
        return cls(features, products[learned], offsets[learned])

    def _kind(self, X: np.ndarray) -> np.ndarray:
        """Each row's workload kind index, -1 where no kind column is 1."""
        flags = X[:, self.kind_columns] == 1
        return np.where(flags.any(axis=1), flags.argmax(axis=1), -1)

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Each row's offset (log seconds): its product's for its kind, 0 where none was learned."""
        out = np.zeros(len(X))
        if not len(self.products):
            return out
        match = (X[:, None, self.gpu_columns] == self.products[None]).all(axis=2)  # rows x products
        kind = self._kind(X)
        rows = match.any(axis=1) & (kind >= 0)
        out[rows] = self.offsets[match[rows].argmax(axis=1), kind[rows]]
        return out

    def params(self) -> dict[str, Any]:
        return {"gpu_features": list(GPU_FEATURES), "kinds": list(KIND_COLUMNS),
                "products": self.products.tolist(), "offsets": self.offsets.tolist()}

    @classmethod
    def of_params(cls, params: Mapping[str, Any], features: Sequence[str]) -> ProductOffsets:
        got = (list(params["gpu_features"]), list(params["kinds"]))
        if got != (list(GPU_FEATURES), list(KIND_COLUMNS)):
            raise ValueError(f"product offsets over {got[0]} x {got[1]}, this netsched uses "
                             f"{list(GPU_FEATURES)} x {list(KIND_COLUMNS)}")
        return cls(features, np.array(params["products"]), np.array(params["offsets"]))
