"""A boosted-tree ensemble served by ONNX Runtime, from a graph written with the artifact.

sklearn's HistGradientBoostingRegressor.predict makes one Python-level call per tree, about
5 us each whatever the rows: the 130 trees of a default artifact cost ~1 ms before a single
row is scored. ONNX Runtime walks the whole ensemble in one native call: one row in ~6 us,
128 rows in ~0.3 ms (bench/model_profile.py). Its tree operator reads float32, which moves
a prediction by about 1e-7 in log seconds; a test checks the ranking is sklearn's.

`netsched train` writes the graphs (netsched.training.onnx_export), so serving needs ONNX
Runtime only: no conversion and no scikit-learn when a model loads.
"""

from __future__ import annotations

import numpy as np


class OnnxTrees:
    """`predict` of a tree ensemble converted to ONNX, in one ONNX Runtime call, on one thread."""

    def __init__(self, graph: bytes):
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1  # a request is a few hundred rows
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(graph, options, providers=["CPUExecutionProvider"])

    def predict(self, X: np.ndarray) -> np.ndarray:
        out = self.session.run(None, {"X": np.asarray(X, dtype=np.float32)})[0]
        return np.asarray(out).ravel().astype(np.float64)
