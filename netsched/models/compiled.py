"""A two-part boosted-tree model compiled for serving by ONNX Runtime (skl2onnx converts it).

sklearn's HistGradientBoostingRegressor.predict makes one Python-level call per tree, about
5 us each whatever the rows: the 130 trees of a default artifact cost ~1 ms before a single
row is scored. ONNX Runtime walks the whole ensemble in one native call: one row in ~6 us,
128 rows in ~0.3 ms (bench/model_profile.py). Its tree operator reads float32, which moves
a prediction by about 1e-7 in log seconds; the test checks the ranking is sklearn's.

Compiled at load from the artifact's own estimator, so artifacts stay what `netsched train`
wrote. A model of another kind (or a conversion that fails) is served by sklearn as before.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor

from netsched.models.estimators import JobPlusCandidate

log = logging.getLogger(__name__)


class OnnxTrees:
    """`predict` of a fitted HistGradientBoostingRegressor, in one ONNX Runtime call, on one thread."""

    def __init__(self, model: HistGradientBoostingRegressor, n_features: int):
        import onnxruntime
        from skl2onnx import to_onnx
        from skl2onnx.common.data_types import FloatTensorType

        with warnings.catch_warnings():  # skl2onnx writes booleans where onnx wants ints; harmless so far
            warnings.simplefilter("ignore", DeprecationWarning)
            graph = to_onnx(model, initial_types=[("X", FloatTensorType([None, n_features]))],
                            target_opset={"": 18, "ai.onnx.ml": 3})
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1  # a request is a few hundred rows
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(graph.SerializeToString(), options,
                                                    providers=["CPUExecutionProvider"])

    def predict(self, X: np.ndarray) -> np.ndarray:
        out = self.session.run(None, {"X": np.asarray(X, dtype=np.float32)})[0]
        return out.ravel().astype(np.float64)


def compiled(estimator: object, n_features: int) -> object:
    """`estimator` with its boosted trees run by ONNX Runtime, or `estimator` itself where it cannot be."""
    if not isinstance(estimator, JobPlusCandidate) or not all(
            isinstance(part, HistGradientBoostingRegressor) for part in (estimator.job, estimator.candidate)):
        return estimator
    try:
        return JobPlusCandidate(estimator.job_columns,
                                OnnxTrees(estimator.job, len(estimator.job_columns)),
                                OnnxTrees(estimator.candidate, n_features))
    except Exception as exc:  # noqa: BLE001 - a converter gap costs speed, never the model
        log.warning("serving the model's trees with scikit-learn (slower): ONNX conversion failed: %s", exc)
        return estimator
