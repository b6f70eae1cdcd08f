"""A node's GPU product as an identity beside its capability numbers: one 0/1 column per product seen.

The four capability numbers (netsched.models.gpus) place a GPU nobody has seen, but what a cluster's
history knows of a GPU it ran many jobs on is not a function of them: a product's real speed per
workload differs from what its datasheet figures say. GpuIdentity gives every model kind both: the
capability columns as always, and one flag per product the training rows ran MIN_JOBS jobs or more
on. A product with fewer jobs, one training never saw, or a node whose GPU is unknown gets no flag
set, so its capability numbers alone place it.

A product is told apart by its four capability numbers, as netsched.models.products does (the only
thing a row says of its GPU; two products with identical numbers count as one). Its name, for the
artifact's record only, is the first built-in product with those numbers. Pure numpy: the extender
serves it from the artifact's serving spec (`params`, `of_params`), which a loader refuses if it
was written over other GPU columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from netsched.models.gpus import BUILTIN, GPU_FEATURES

MIN_JOBS = 30  # jobs on one product before it gets a flag of its own
PREFIX = "gpu_is:"  # the flag columns' names: PREFIX + product name


class GpuIdentity:
    """One 0/1 flag per known product (a row of capability numbers), appended to a feature matrix."""

    def __init__(self, features: Sequence[str], products: np.ndarray, names: Sequence[str]):
        self.gpu_columns = [list(features).index(f) for f in GPU_FEATURES]
        self.products = np.asarray(products, dtype=np.float64).reshape(-1, len(GPU_FEATURES))
        self.names = list(names)
        if len(self.names) != len(self.products):
            raise ValueError(f"{len(self.names)} product names for {len(self.products)} products")

    @property
    def columns(self) -> tuple[str, ...]:
        """The names of the flag columns `append` adds, in order."""
        return tuple(PREFIX + name for name in self.names)

    @classmethod
    def fit(cls, features: Sequence[str], X: np.ndarray, jobs: np.ndarray,
            min_jobs: int = MIN_JOBS) -> GpuIdentity | None:
        """The products of X's rows with `min_jobs` jobs or more (`jobs` names each row's job), or None
        where `features` lack the GPU columns or no product has enough."""
        if not set(GPU_FEATURES) <= set(features):
            return None
        columns = [list(features).index(f) for f in GPU_FEATURES]
        gpu = X[:, columns]
        known = np.isfinite(gpu).all(axis=1)
        if not known.any():
            return None
        products, product = np.unique(gpu[known], axis=0, return_inverse=True)
        product = product.ravel()
        enough = [p for p in range(len(products)) if len(np.unique(jobs[known][product == p])) >= min_jobs]
        if not enough:
            return None
        return cls(features, products[enough], [product_name(products[p]) for p in enough])

    def flags(self, X: np.ndarray) -> np.ndarray:
        """(rows, products) 0/1: which known product each row's GPU is."""
        gpu = X[:, self.gpu_columns]
        flags: np.ndarray = (gpu[:, None, :] == self.products[None]).all(axis=2).astype(np.float64)
        return flags

    def append(self, X: np.ndarray) -> np.ndarray:
        """X with the flag columns after its own."""
        return np.column_stack([X, self.flags(X)])

    def params(self) -> dict[str, Any]:
        return {"gpu_features": list(GPU_FEATURES), "products": self.products.tolist(), "names": self.names}

    @classmethod
    def of_params(cls, params: Mapping[str, Any], features: Sequence[str]) -> GpuIdentity:
        if list(params["gpu_features"]) != list(GPU_FEATURES):
            raise ValueError(f"GPU identity over {list(params['gpu_features'])}, this netsched uses "
                             f"{list(GPU_FEATURES)}")
        return cls(features, np.array(params["products"]), list(params["names"]))


def product_name(numbers: np.ndarray) -> str:
    """The first built-in product with these capability numbers, else the numbers themselves."""
    for name, capability in BUILTIN.items():
        if np.array_equal(numbers, [getattr(capability, field) for field, _ in GPU_FEATURES.values()]):
            return name
    return "/".join(f"{v:g}" for v in numbers)


def appended(identity: GpuIdentity | None, X: np.ndarray) -> np.ndarray:
    """X with `identity`'s flags, or X itself without one (a model fitted before identities, or on
    rows with no product of enough jobs)."""
    return X if identity is None else identity.append(X)


def identity_columns(identity: GpuIdentity | None) -> tuple[str, ...]:
    return () if identity is None else identity.columns
