import joblib
import numpy as np

from netsched.models.compiled import OnnxTrees
from netsched.models.features import FEATURE_NAMES
from netsched.testing.models import sim_rows
from netsched.training.dataset import dataset_from_rows
from netsched.training.fitting import fit_model
from netsched.training.onnx_export import compiled


def fitted(kind: str, seed: int):
    ds = dataset_from_rows(sim_rows(jobs=120, seed=seed))
    return fit_model(kind, FEATURE_NAMES, ds.X, np.log(ds.y), ds.candidate_set, seed=0)


def test_onnx_runtime_serves_the_same_predictions_and_ranking_as_scikit_learn():
    model = fitted("hist_gradient_boosting", 12)
    served = compiled(model, len(FEATURE_NAMES))
    assert isinstance(served.candidate, OnnxTrees) and isinstance(served.job, OnnxTrees)
    ds = dataset_from_rows(sim_rows(jobs=60, seed=11))  # other jobs, with unknown (NaN) features
    assert np.isnan(ds.X).any()
    expected, got = model.predict(ds.X), served.predict(ds.X)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    for job in np.unique(ds.candidate_set):  # the candidate the extender would pick is sklearn's
        rows = ds.candidate_set == job
        one_job = served.predict_one_job(ds.X[rows])
        np.testing.assert_allclose(one_job, expected[rows], atol=1e-5)
        assert expected[rows][np.argmin(one_job)] <= expected[rows].min() + 1e-5


def test_a_model_with_no_boosted_trees_is_served_by_scikit_learn_itself():
    ridge = fitted("ridge", 13)
    assert compiled(ridge, len(FEATURE_NAMES)) is ridge
    assert compiled(joblib, len(FEATURE_NAMES)) is joblib  # not a model at all
