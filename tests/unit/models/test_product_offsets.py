import joblib
import numpy as np

from netsched.models.features import FEATURE_NAMES, INDEX
from netsched.models.gpus import GPU_FEATURES, gpu_features
from netsched.models.predictor import Predictor
from netsched.models.products import KIND_COLUMNS, MIN_JOBS, ProductOffsets
from netsched.testing.models import sim_rows
from netsched.training.dataset import dataset_from_rows, write_dataset
from netsched.training.fitting import fit_model
from netsched.training.train import train

GPU = [INDEX[f] for f in GPU_FEATURES]


def rows_on(product: str, kind: int, jobs: int, residual: float, start: int = 0):
    """`jobs` one-row jobs of workload kind `kind` on `product`, each missing `residual` log seconds."""
    X = np.full((jobs, len(FEATURE_NAMES)), np.nan)
    X[:, [INDEX[k] for k in KIND_COLUMNS]] = np.eye(len(KIND_COLUMNS))[kind]
    X[:, GPU] = list(gpu_features(product).values())
    return X, np.full(jobs, residual), np.array([f"j{start + i}" for i in range(jobs)])


def test_a_product_and_kind_with_enough_jobs_get_the_historys_offset_any_other_none():
    parts = [rows_on("NVIDIA-L40S", 0, 80, 0.3), rows_on("NVIDIA-L40S", 1, MIN_JOBS - 1, 0.5, 100),
             rows_on("NVIDIA-A10", 0, 80, -0.2, 200)]
    X, residual, jobs = (np.concatenate(p) for p in zip(*parts, strict=True))
    offsets = ProductOffsets.fit(FEATURE_NAMES, X, residual, jobs)
    assert offsets is not None
    seen = offsets.predict(np.concatenate([rows_on("NVIDIA-L40S", 0, 1, 0)[0],
                                           rows_on("NVIDIA-A10", 0, 1, 0)[0]]))
    np.testing.assert_allclose(seen, [0.3 * 80 / (80 + 20), -0.2 * 80 / (80 + 20)])  # shrunk towards 0
    too_few = rows_on("NVIDIA-L40S", 1, 1, 0)[0]
    unseen = rows_on("NVIDIA-H200", 0, 1, 0)[0]  # the capability numbers alone place a GPU never seen
    unknown = unseen.copy()
    unknown[:, GPU] = np.nan
    assert offsets.predict(np.concatenate([too_few, unseen, unknown])).tolist() == [0, 0, 0]


def test_a_physics_model_with_product_offsets_is_served_from_its_files_as_its_pickle_predicts(
        tmp_path, monkeypatch):
    monkeypatch.setattr("netsched.training.train.MODEL_KINDS", ("hist_gradient_boosting_physics",))
    monkeypatch.setattr("netsched.models.products.MIN_JOBS", 3)  # 40 jobs: a few per product and kind
    data = tmp_path / "sim.csv"
    write_dataset(data, sim_rows(jobs=40, seed=6))
    predictor = Predictor.load(train([data], tmp_path, name="physics", log=lambda *_: None))
    pickled = joblib.load(predictor.path / "model.joblib")["estimator"]
    assert pickled.products is not None and len(pickled.products.products)
    assert predictor.served.products is not None  # read back from serving.json, not the pickle
    X = dataset_from_rows(sim_rows(jobs=5, seed=7)).X
    assert np.abs(pickled.products.predict(X)).max() > 0
    np.testing.assert_allclose(np.log(predictor.predict_one_job(X[:8])), pickled.predict(X[:8]), atol=1e-5)


def test_a_physics_model_pickled_before_product_offsets_still_predicts():
    ds = dataset_from_rows(sim_rows(jobs=40, seed=5))
    log_y = np.log(ds.y)
    model = fit_model("hist_gradient_boosting_physics", FEATURE_NAMES, ds.X, log_y, ds.candidate_set, 0)
    del model.__dict__["products"]  # as unpickled from an artifact written before they existed
    Z = model.inputs(ds.X)
    np.testing.assert_allclose(model.predict(ds.X), model.linear.predict(Z) + model.trees.predict(Z))
