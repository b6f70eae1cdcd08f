import json
import subprocess
import sys
from pathlib import Path

import joblib
import numpy as np
import pytest

from netsched.models.artifact import ArtifactError
from netsched.models.estimators import LinearPlusTrees
from netsched.models.features import FEATURE_NAMES, NETWORK_BLIND
from netsched.models.predictor import LinearScreen, Predictor
from netsched.testing.models import copy_of, sim_rows, trained
from netsched.training.dataset import dataset_from_rows
from netsched.training.onnx_export import compiled


@pytest.fixture(scope="module")
def predictor() -> Predictor:
    return Predictor.load(trained()[0])


@pytest.fixture(scope="module")
def rows() -> np.ndarray:
    return dataset_from_rows(sim_rows(jobs=50, seed=9)).X  # 400 candidate rows of other jobs


def edit_meta(directory, **changes):
    path = directory / "meta.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def test_predicts_seconds_and_the_network_blind_twin_loads(predictor, rows):
    seconds = predictor.predict(rows)
    assert seconds.shape == (400,) and (seconds > 30).all() and (seconds < 1e6).all()  # 30 s of startup alone
    blind = Predictor.load(trained()[0], "network_blind")
    assert blind.features == NETWORK_BLIND
    with pytest.raises(ValueError, match=r"wants a \(rows, 30\) matrix in schema order, got shape \(400, 23"):
        predictor.predict(rows[:, :23])


def test_the_screen_is_the_ridge_pipeline_fused(predictor, rows):
    bundle_screen = joblib.load(predictor.path / "model.joblib")["screen"]
    np.testing.assert_allclose(predictor.screen.predict(rows), bundle_screen.predict(rows), rtol=1e-9)


def test_fastest_finds_the_full_predicts_best_when_the_screen_keeps_it(predictor, rows):
    full = predictor.predict(rows)
    best = int(np.argmin(full))
    assert best in np.argsort(predictor.screen.predict(rows))[:32]  # the case under test
    picked, seconds = predictor.fastest(rows, k=3, screen_rows=32)
    assert picked[0] == best and seconds[0] == pytest.approx(full[best])
    assert (np.diff(seconds) >= 0).all() and len(set(picked)) == 3
    small, _ = predictor.fastest(rows[:20], k=20)  # no more rows than the screen keeps: the exact order
    assert small.tolist() == np.argsort(full[:20], kind="stable").tolist()


def test_refuses_another_schema_version(tmp_path):
    directory = copy_of(trained()[0], tmp_path)
    edit_meta(directory, schema_version=99)
    with pytest.raises(ArtifactError, match="tiny: model schema version 99, this netsched uses 2; retrain"):
        Predictor.load(directory)


def test_refuses_another_feature_list(tmp_path):
    directory = copy_of(trained()[0], tmp_path)
    edit_meta(directory, features=list(reversed(FEATURE_NAMES)))
    with pytest.raises(ArtifactError, match=r"feature list does not match schema v2 \(same names, another"):
        Predictor.load(directory)
    edit_meta(directory, features=[*FEATURE_NAMES[:-1], "gpu_temperature"])
    with pytest.raises(ArtifactError, match=r"missing \['nic_util'\], unexpected \['gpu_temperature'\]"):
        Predictor.load(directory)


def test_refuses_a_corrupt_model_file_where_it_reads_the_pickle(tmp_path):
    directory = copy_of(trained()[0], tmp_path)
    model = directory / "model.joblib"
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0xFF
    model.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="model.joblib: sha256 differs from meta.json's artifact_sha256"):
        Predictor.load(directory, "network_blind")  # the serving path reads only the serving files


def test_a_manifest_names_the_artifact_and_a_bad_one_is_refused(tmp_path):
    directory = copy_of(trained()[0], tmp_path)
    (tmp_path / "current.json").write_text(json.dumps({"artifact": directory.name}))
    assert Predictor.load(tmp_path / "current.json").path == directory
    (tmp_path / "current.json").write_text("{}")
    with pytest.raises(ArtifactError, match="current.json: not a model manifest"):
        Predictor.load(tmp_path / "current.json")
    with pytest.raises(ArtifactError, match="absent: no such model artifact or manifest"):
        Predictor.load(tmp_path / "absent")


def test_serves_from_the_files_written_with_the_artifact_as_the_pickled_model_ranks(predictor, rows):
    # the job part's trees in ONNX, the candidate part too when it is trees, else linear in serving.json;
    # a linear-plus-trees model's trees in ONNX, its linear part in serving.json
    files = {"hist_gradient_boosting": {"job.onnx", "candidate.onnx"},
             "hist_gradient_boosting_whole": {"job.onnx", "candidate.onnx"}, "ridge": {"job.onnx"},
             "hist_gradient_boosting_physics": {"trees.onnx"}}
    assert predictor.meta["serving"].keys() == {"serving.json", *files[predictor.meta["model_kind"]]}
    pickled = joblib.load(predictor.path / "model.joblib")["estimator"]
    np.testing.assert_allclose(np.log(predictor.predict(rows)), pickled.predict(rows), atol=1e-5)  # float32
    bundle_screen = joblib.load(predictor.path / "model.joblib")["screen"]
    np.testing.assert_allclose(predictor.screen.predict(rows), bundle_screen.predict(rows), rtol=1e-9)


def test_loading_the_serving_files_needs_neither_scikit_learn_nor_the_pickle():
    code = ("import sys; from netsched.models.predictor import Predictor; "
            f"p = Predictor.load({str(trained()[0])!r}); "
            "assert not [m for m in sys.modules if m.split('.')[0] in ('sklearn', 'skl2onnx', 'scipy')], "
            "sorted(m for m in sys.modules if m.startswith(('sklearn', 'skl2onnx', 'scipy')))[:5]")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_an_artifact_without_serving_files_is_served_from_its_pickle(tmp_path, rows, predictor):
    directory = copy_of(trained()[0], tmp_path)
    meta = json.loads((directory / "meta.json").read_text())
    del meta["serving"]
    (directory / "meta.json").write_text(json.dumps(meta))
    pickled = Predictor.load(directory)
    np.testing.assert_allclose(pickled.predict(rows), predictor.predict(rows), rtol=1e-4)
    job = rows[:8]
    np.testing.assert_allclose(pickled.predict_one_job(job), predictor.predict_one_job(job), rtol=1e-4)
    if isinstance(pickled.served, LinearPlusTrees):  # its linear part served as numpy, not the pipeline
        assert isinstance(pickled.served.linear, LinearScreen)


def test_a_corrupt_serving_file_is_refused_naming_it(tmp_path):
    directory = copy_of(trained()[0], tmp_path)
    graph = next(name for name in json.loads((directory / "meta.json").read_text())["serving"]
                 if name.endswith(".onnx"))
    (directory / graph).write_bytes(b"not a graph")
    with pytest.raises(ArtifactError, match=rf"{graph}: sha256 differs from meta.json's serving"):
        Predictor.load(directory)


def test_the_shipped_model_serves_from_its_files_as_it_did_from_its_pickle(tmp_path, rows):
    shipped = Path(__file__).resolve().parents[3] / "models" / "current.json"
    lean = Predictor.load(shipped)
    assert "serving.json" in lean.meta["serving"] and any(f.endswith(".onnx") for f in lean.meta["serving"])
    directory = copy_of(lean.path, tmp_path)
    meta = json.loads((directory / "meta.json").read_text())
    del meta["serving"]
    (directory / "meta.json").write_text(json.dumps(meta))
    pickled = Predictor.load(directory, convert=compiled)  # converted at load, as before the serving files
    np.testing.assert_allclose(lean.predict_one_job(rows[:8]), pickled.predict_one_job(rows[:8]), rtol=1e-12)
    np.testing.assert_allclose(lean.screen.predict(rows), pickled.screen.predict(rows), rtol=1e-12)
