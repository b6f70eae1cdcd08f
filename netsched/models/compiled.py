"""A two-part boosted-tree model served by ONNX Runtime, from graphs written with the artifact.

sklearn's HistGradientBoostingRegressor.predict makes one Python-level call per tree, about
5 us each whatever the rows: the 130 trees of a default artifact cost ~1 ms before a single
row is scored. ONNX Runtime walks the whole ensemble in one native call: one row in ~6 us,
128 rows in ~0.3 ms (bench/model_profile.py). Its tree operator reads float32, which moves
a prediction by about 1e-7 in log seconds; the test checks the ranking is sklearn's.

`netsched train` converts the trees when it writes the artifact (`onnx_graph`, skl2onnx) and
stores the graphs beside it, so serving needs ONNX Runtime only: no conversion and no
scikit-learn when a model loads. An artifact written without the graphs (an older netsched,
or a model of another kind) is served from its pickled estimator, converted at load when
skl2onnx is installed (`compiled`), else by scikit-learn as it is.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np

from netsched.models.estimators import JobPlusCandidate, LinearPlusTrees
from netsched.models.physics import estimate_names

log = logging.getLogger(__name__)


class OnnxTrees:
    """`predict` of a tree ensemble converted to ONNX (`onnx_graph`), in one ONNX Runtime call, on one
    thread."""

    def __init__(self, graph: bytes):
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1  # a request is a few hundred rows
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(graph, options, providers=["CPUExecutionProvider"])

    def predict(self, X: np.ndarray) -> np.ndarray:
        out = self.session.run(None, {"X": np.asarray(X, dtype=np.float32)})[0]
        return np.asarray(out).ravel().astype(np.float64)


def onnx_graph(model: object, n_features: int) -> bytes:
    """A fitted HistGradientBoostingRegressor as a serialized ONNX graph (needs skl2onnx)."""
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
    except ModuleNotFoundError:  # serving without the `train` extra: no sklearn model can have loaded
        return False

    return isinstance(model, HistGradientBoostingRegressor)


def compiled(estimator: object, n_features: int) -> object:
    """`estimator` with its boosted trees run by ONNX Runtime, converted now, or `estimator` itself
    where it cannot be (another kind, or skl2onnx missing)."""
    if isinstance(estimator, LinearPlusTrees):
        if not is_trees(estimator.trees):
            return estimator
        try:
            width = len(estimator.features) + len(estimate_names(estimator.features))
            trees = OnnxTrees(onnx_graph(estimator.trees, width))
            return LinearPlusTrees(estimator.features, estimator.linear, trees)
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
                                OnnxTrees(onnx_graph(estimator.candidate, n_features)))
    except Exception as exc:  # noqa: BLE001 - a converter gap costs speed, never the model
        log.warning("serving the model's trees with scikit-learn (slower): ONNX conversion failed: %s", exc)
        return estimator
