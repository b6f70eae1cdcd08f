"""Boosted trees as ONNX graphs, for serving under ONNX Runtime (netsched.models.compiled).

`netsched train` writes the graphs beside the artifact (`onnx_graph`), so serving needs ONNX
Runtime only: no conversion and no scikit-learn when a model loads. An artifact written without
them (an older netsched, or a converter gap) is served from its pickle; the training commands
that load one (`evaluate`, `predict`, `retrain`) convert its trees first (`compiled`), as the
extender served them before the graphs were written, so they rank as it did.
"""

from __future__ import annotations

import logging
import warnings

from netsched.models.compiled import OnnxTrees
from netsched.models.estimators import JobPlusCandidate, LinearPlusTrees, PlainTrees, Regressor
from netsched.models.gpu_identity import identity_columns
from netsched.models.physics import estimate_names

log = logging.getLogger(__name__)


def onnx_graph(model: object, n_features: int) -> bytes:
    """A fitted HistGradientBoostingRegressor as a serialized ONNX graph."""
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType

    with warnings.catch_warnings():  # skl2onnx writes booleans where onnx wants ints; harmless so far
        warnings.simplefilter("ignore", DeprecationWarning)
        graph = to_onnx(model, initial_types=[("X", FloatTensorType([None, n_features]))],
                        target_opset={"": 18, "ai.onnx.ml": 3})
    return bytes(graph.SerializeToString())


def is_trees(model: object) -> bool:
    try:
        from sklearn.ensemble import HistGradientBoostingRegressor
    except ModuleNotFoundError:  # without the `train` extra no scikit-learn model can have loaded
        return False

    return isinstance(model, HistGradientBoostingRegressor)


def compiled(estimator: Regressor, n_features: int) -> Regressor:
    """`estimator` with its boosted trees run by ONNX Runtime, converted now, or `estimator` itself
    where it cannot be (another kind, or skl2onnx missing)."""
    identity = getattr(estimator, "identity", None)  # a pickle from before identities has none
    flags = len(identity_columns(identity))
    if isinstance(estimator, PlainTrees):
        if not is_trees(estimator.trees):
            return estimator
        try:
            return PlainTrees(OnnxTrees(onnx_graph(estimator.trees, n_features + flags)), identity)
        except Exception as exc:  # noqa: BLE001 - a converter gap costs speed, never the model
            log.warning("serving the model's trees with scikit-learn (slower): ONNX conversion failed: %s",
                        exc)
            return estimator
    if isinstance(estimator, LinearPlusTrees):
        if not is_trees(estimator.trees):
            return estimator
        try:
            width = len(estimator.features) + len(estimate_names(estimator.features)) + flags
            trees = OnnxTrees(onnx_graph(estimator.trees, width))
            products = getattr(estimator, "products", None)
            return LinearPlusTrees(estimator.features, estimator.linear, trees, products,
                                   getattr(estimator, "by_reach", False), identity)
        except Exception as exc:  # noqa: BLE001 - a converter gap costs speed, never the model
            log.warning("serving the model's trees with scikit-learn (slower): ONNX conversion failed: %s",
                        exc)
            return estimator
    if not isinstance(estimator, JobPlusCandidate):
        return estimator
    if not (is_trees(estimator.job) and is_trees(estimator.candidate)):
        return estimator
    try:
        return JobPlusCandidate(estimator.job_columns,
                                OnnxTrees(onnx_graph(estimator.job, len(estimator.job_columns))),
                                OnnxTrees(onnx_graph(estimator.candidate, n_features + flags)), identity)
    except Exception as exc:  # noqa: BLE001 - a converter gap costs speed, never the model
        log.warning("serving the model's trees with scikit-learn (slower): ONNX conversion failed: %s", exc)
        return estimator
