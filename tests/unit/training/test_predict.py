import csv
import json

import numpy as np
import pytest

from netsched.cli import main
from netsched.models.features import FEATURE_NAMES
from netsched.models.gpus import GPU_FEATURES
from netsched.models.predictor import Predictor
from netsched.testing.models import sim_rows, trained
from netsched.training.dataset import read_dataset, write_dataset
from netsched.training.predict import feature_values


@pytest.fixture(scope="module")
def candidates(tmp_path_factory):
    path = tmp_path_factory.mktemp("predict") / "later.csv"
    write_dataset(path, sim_rows(jobs=3, seed=11))  # a dataset file is a candidates file as it is
    return path


def test_predicts_each_candidate_set_as_the_extender_does_and_ranks_it(candidates, tmp_path, capsys):
    model = trained()[0]
    assert main(["predict", "--model", str(model), "--candidates", str(candidates)]) == 0
    out = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    ds = read_dataset(candidates)
    predictor = Predictor.load(model)
    assert [r["node"] for r in out] == list(ds.node) and len(out) == 24
    for rows in ds.sets():
        values = {name: ds.X[rows, j] for j, name in enumerate(FEATURE_NAMES)}
        expected = predictor.predict_candidates(values, len(rows))
        got = np.array([float(out[i]["predicted_seconds"]) for i in rows])
        np.testing.assert_allclose(got, expected, atol=0.001)
        ranks = [int(out[i]["rank"]) for i in rows]
        assert sorted(ranks) == list(range(1, 9)) and ranks[int(np.argmin(expected))] == 1
    assert main(["predict", "--model", str(model), "--candidates", str(candidates),
                 "--out", str(tmp_path / "p.json")]) == 0
    as_json = json.loads((tmp_path / "p.json").read_text())
    assert [r["rank"] for r in as_json] == [int(r["rank"]) for r in out]


def test_a_row_may_name_its_gpu_product_instead_of_the_capability_columns(tmp_path):
    row = {name: 1.0 for name in FEATURE_NAMES if name not in GPU_FEATURES}
    given = [{**row, "gpu_product": "NVIDIA-L40S"}, {**row, "gpu_product": None, "gpu_tflops16": 5.0}]
    X = feature_values(tmp_path / "c.json", given)
    at = FEATURE_NAMES.index("gpu_tflops16")
    assert X[0, at] == 362.0 and X[1, at] == 5.0 and np.isnan(X[1, FEATURE_NAMES.index("gpu_memory_gib")])


def test_bad_candidates_are_one_line_naming_the_fix(tmp_path, capsys):
    model = str(trained()[0])
    path = tmp_path / "c.json"
    path.write_text(json.dumps([{"job_gpus": 1}]))
    assert main(["predict", "--model", model, "--candidates", str(path)]) == 2
    err = capsys.readouterr().err
    assert "no column for feature(s) replicas," in err and "leave a cell empty for unknown" in err
    row = dict.fromkeys(FEATURE_NAMES, 1.0)
    path.write_text(json.dumps({"candidates": [row, {**row, "replicas": 2.0}]}))
    assert main(["predict", "--model", model, "--candidates", str(path)]) == 2
    assert "differ in the job feature replicas" in capsys.readouterr().err
