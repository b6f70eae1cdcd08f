import json
import math

import joblib
import numpy as np
import pytest

from netsched.models.artifact import ArtifactError, file_sha256
from netsched.models.features import FEATURE_NAMES, INDEX, SCHEMA_VERSION, SchemaError
from netsched.models.gpu_identity import appended
from netsched.models.predictor import Predictor
from netsched.testing.models import sim_rows, trained
from netsched.training.dataset import (
    data_sha256,
    dataset_from_rows,
    read_dataset,
    read_datasets,
    write_dataset,
)
from netsched.training.fitting import MODEL_KINDS, fit_model
from netsched.training.metrics import BY_NODE_PAIRS, BY_RANKING, TOP1_TIE, Scores
from netsched.training.train import (
    PREFERRED,
    SELECTION_RULE,
    SERVABLE,
    KindResult,
    select,
    site_folds,
    split_holdout,
    time_folds,
    train,
)


def test_the_artifact_says_what_trained_it():
    directory, data = trained()
    meta = json.loads((directory / "meta.json").read_text())
    assert meta["schema_version"] == SCHEMA_VERSION and meta["features"] == list(FEATURE_NAMES)
    assert meta["artifact_sha256"] == file_sha256(directory / "model.joblib")
    used = meta["training_data"]
    assert used["sha256"] == data_sha256([data]) and used["files"] == ["sim.csv"]
    assert used["candidate_sets"] == 150 and used["rows"] == 1200  # all 150 jobs, the held-out ones too
    assert used["window"]["end_unix"] == read_dataset(data).start.max()
    assert set(meta["cv"]) == set(MODEL_KINDS) and meta["model_kind"] in SERVABLE
    for kind, cv in meta["cv"].items():
        assert cv["servable"] == (kind in SERVABLE)
        for split in ("by_time", "by_site", "overall"):
            assert 0 < cv[split]["top1"] <= 1 and cv[split]["regret_p95"] >= 0 and cv[split]["mape"] > 0
    assert meta["selection_rule"] == SELECTION_RULE and meta["serving_ms_5000"] > 0
    validation = meta["validation"]
    assert validation["selected_by"] == BY_RANKING and validation["holdout_fraction"] == 0.2
    held = validation["held_out"]  # the pick, fitted on the earlier jobs, scored on the latest 20%
    assert held["jobs"] == 30 and held["rows"] == 240 and 0 < held["scores"]["top1"] <= 1


def test_one_row_per_job_is_said_and_selected_by_node_pair_accuracy_never_nan(tmp_path, monkeypatch):
    """The operator's records: no candidate set to pick from, so no top-1 or regret."""
    monkeypatch.setattr("netsched.training.train.MODEL_KINDS", ("hist_gradient_boosting", "ridge"))
    data = tmp_path / "records.csv"
    write_dataset(data, [r for r in sim_rows(jobs=60, seed=4) if r["chosen"]])
    lines: list[str] = []
    meta = json.loads((train([data], tmp_path, name="m", log=lines.append) / "meta.json").read_text())
    out = "\n".join(lines)
    assert "one row per job" in out and "node-pair accuracy" in out and "nan" not in out.lower()
    assert meta["validation"]["selected_by"] == BY_NODE_PAIRS
    for cv in meta["cv"].values():
        overall = cv["overall"]
        assert overall["top1"] is None and overall["pairs"] > 0 and overall["node_pairs"] > 0
        assert 0 <= cv["overall"]["pair_accuracy"] <= 1 and 0 <= cv["overall"]["node_pair_accuracy"] <= 1
    assert meta["training_data"]["rows"] == 60  # every record, the 12 held out too


def scores(top1: float, regret_p95: float = 0.1, mape: float = 0.3) -> Scores:
    return Scores(sets=100, top1=top1, regret_p95=regret_p95, mape=mape)


def result(kind: str, s: Scores) -> KindResult:
    return KindResult(kind, s, s, s)


def test_selection_never_picks_a_kind_that_cannot_serve():
    assert select([result("hist_gradient_boosting", scores(0.7)), result("random_forest", scores(0.9)),
                   result("ridge", scores(0.6)), result("knn", scores(1.0))]).kind == "hist_gradient_boosting"


def test_selection_starts_at_the_physics_kind_and_leaves_it_only_for_a_win_beyond_noise():
    physics = result(PREFERRED, scores(0.7))  # 100 sets each: a difference of ~6 points is noise
    assert select([result("hist_gradient_boosting", scores(0.75)), physics]).kind == PREFERRED
    assert select([result("hist_gradient_boosting", scores(0.80)), physics]).kind == "hist_gradient_boosting"
    assert select([result("ridge", scores(0.7, regret_p95=0.01)), physics]).kind == PREFERRED  # p95: no
    assert select([result("ridge", scores(0.7, mape=0.1)), physics]).kind == PREFERRED  # MAPE: no
    many = {"sets": 100_000, "regret_p95": 0.1, "mape": 0.3}  # little noise: the floor TOP1_TIE decides
    assert select([result("ridge", Scores(top1=0.7 + 2 * TOP1_TIE, **many)),
                   result(PREFERRED, Scores(top1=0.7, **many))]).kind == "ridge"
    assert select([result("ridge", Scores(top1=0.7 + TOP1_TIE / 2, **many)),
                   result(PREFERRED, Scores(top1=0.7, **many))]).kind == PREFERRED
    # as often right with smaller mistakes: a mean regret lower beyond its noise replaces the pick
    mistakes = {"sets": 300, "top1": 0.7, "regret_std": 0.1}  # the difference's standard error 0.8 point
    assert select([result("hist_gradient_boosting", Scores(regret_mean=0.02, **mistakes)),
                   result(PREFERRED, Scores(regret_mean=0.05, **mistakes))]).kind == "hist_gradient_boosting"
    assert select([result("hist_gradient_boosting", Scores(regret_mean=0.045, **mistakes)),
                   result(PREFERRED, Scores(regret_mean=0.05, **mistakes))]).kind == PREFERRED


def test_the_holdout_is_the_most_recent_jobs():
    ds = dataset_from_rows(sim_rows(jobs=10))
    early, late = split_holdout(ds, 0.3)
    assert (len(early.sets()), len(late.sets())) == (7, 3)
    assert early.start.max() < late.start.min()
    assert split_holdout(ds, 0.0)[1].y.size == 0
    with pytest.raises(ValueError, match=r"holdout fraction 1.0 must be in \[0, 1\)"):
        split_holdout(ds, 1.0)
    with pytest.raises(SchemaError, match="only 10 candidate sets: too few to train on after holding out 90"):
        split_holdout(ds, 0.9)


def test_folds_are_split_by_job_and_never_train_on_a_later_job_nor_on_the_tested_site():
    rows = sim_rows(jobs=40)
    for i, row in enumerate(rows):  # two candidate sets a job: a job's placements stay on one side
        row["job_id"] = f"job-{i // 16}"
    ds = dataset_from_rows(rows)
    jobs = ds.jobs()
    assert len(jobs) == 20 and len(ds.sets()) == 40
    time, site = time_folds(jobs), site_folds(ds, jobs)
    assert len(time) == len(site) == 4
    for fit, test in time + site:
        assert not set(ds.job_id[test]) & set(ds.job_id[fit])
        assert ds.start[fit].max() < ds.start[test].min()  # validated only on jobs after those it saw
    for fit, test in site:
        assert len(set(ds.site[test])) == 1 and not set(ds.site[test]) & set(ds.site[fit])
    assert len({ds.site[test][0] for _, test in site}) == 2  # every zone is tested in turn


def test_where_the_records_name_several_clusters_each_fold_tests_a_cluster_it_never_trained_on(tmp_path):
    """Zone names repeat from cluster to cluster: one cluster is held out at a time, not one zone."""
    paths = []
    for k, name in enumerate(("east", "west")):
        paths.append(tmp_path / f"{name}.csv")
        write_dataset(paths[-1], sim_rows(jobs=20, seed=20 + k))
    assert set(read_datasets(paths).cluster) == {""}  # unnamed unless the caller says so
    ds = read_datasets(paths, clusters_by_file=True)
    site = site_folds(ds, ds.jobs())
    assert {ds.cluster[test][0] for _, test in site} == {"east.csv", "west.csv"}
    for fit, test in site:
        assert len(set(ds.cluster[test])) == 1 and not set(ds.cluster[test]) & set(ds.cluster[fit])
        assert set(ds.site[test]) & set(ds.site[fit])  # the same zone names on both sides
        assert ds.start[fit].max() < ds.start[test].min()


@pytest.mark.parametrize("kind", ["hist_gradient_boosting", "hist_gradient_boosting_physics"])
def test_the_candidate_part_ranks_even_from_sets_of_one(kind):
    """Operator records are sets of one row: the candidate part (the physics kind's trees) learns from
    their residuals."""
    rng = np.random.default_rng(0)
    n = 400
    X = np.full((n, len(FEATURE_NAMES)), np.nan)
    X[:, INDEX["expected_seconds"]] = rng.uniform(100, 10_000, n)
    X[:, INDEX["node_cpu_load"]] = rng.uniform(0, 1, n)
    log_y = np.log(X[:, INDEX["expected_seconds"]]) + X[:, INDEX["node_cpu_load"]]  # a busy node is slower
    model = fit_model(kind, FEATURE_NAMES, X, log_y, np.arange(n).astype(str), 0)
    job = np.tile(X[:1], (2, 1))
    job[:, INDEX["node_cpu_load"]] = [0.9, 0.1]
    quiet, busy = model.predict(job)[::-1]
    assert busy - quiet > 0.5  # truth: 0.8
    assert math.isclose(np.mean(model.predict(X) - log_y), 0, abs_tol=0.05)


def test_the_whole_kind_learns_each_rows_residual_from_the_job_part_not_its_offset_from_its_set():
    ds = dataset_from_rows(sim_rows(jobs=60, seed=5))
    log_y = np.log(ds.y)
    whole = fit_model("hist_gradient_boosting_whole", FEATURE_NAMES, ds.X, log_y, ds.candidate_set, 0)
    two_part = fit_model("hist_gradient_boosting", FEATURE_NAMES, ds.X, log_y, ds.candidate_set, 0)
    residual = log_y - whole.job.predict(ds.X[:, whole.job_columns])
    per_set = [(whole.candidate.predict(appended(whole.identity, ds.X[rows])).mean(), residual[rows].mean(),
                two_part.candidate.predict(appended(two_part.identity, ds.X[rows])).mean())
               for rows in ds.sets()]
    whole_mean, residual_mean, offset_mean = np.array(per_set).T
    assert np.corrcoef(whole_mean, residual_mean)[0, 1] > 0.8  # follows what the job part missed
    assert offset_mean.std() < whole_mean.std() / 3  # the two-part's is centred on each set's mean


def trained_kind(tmp_path, monkeypatch, kind: str) -> Predictor:
    monkeypatch.setattr("netsched.training.train.MODEL_KINDS", (kind,))
    data = tmp_path / "sim.csv"
    write_dataset(data, sim_rows(jobs=40, seed=6))
    return Predictor.load(train([data], tmp_path, name=kind, log=lambda *_: None))


def test_the_physics_kinds_trees_learn_each_rows_residual_within_its_set():
    """What the ridge missed about a job is the same on all its candidates: the trees leave it."""
    ds = dataset_from_rows(sim_rows(jobs=60, seed=5))
    log_y = np.log(ds.y)
    model = fit_model("hist_gradient_boosting_physics", FEATURE_NAMES, ds.X, log_y, ds.candidate_set, 0)
    Z = model.inputs(ds.X)
    residual = log_y - model.linear.predict(Z)
    per_set = np.array([(model.trees.predict(Z[rows]).mean(), residual[rows].mean()) for rows in ds.sets()])
    assert np.abs(per_set[:, 0]).max() < per_set[:, 1].std() / 3


@pytest.mark.parametrize("kind, files", [
    ("hist_gradient_boosting_whole", {"job.onnx", "candidate.onnx"}),
    ("hist_gradient_boosting_physics", {"trees.onnx"}),  # the linear part's parameters in serving.json
    ("hist_gradient_boosting_plain", {"trees.onnx"}),
])
def test_a_one_model_kind_is_served_from_its_files_as_its_pickle_predicts(tmp_path, monkeypatch, kind, files):
    predictor = trained_kind(tmp_path, monkeypatch, kind)
    assert predictor.meta["model_kind"] == kind
    assert set(predictor.meta["serving"]) == {"serving.json", *files}
    X = dataset_from_rows(sim_rows(jobs=5, seed=7)).X
    pickled = joblib.load(predictor.path / "model.joblib")["estimator"]
    np.testing.assert_allclose(np.log(predictor.predict_one_job(X[:8])), pickled.predict(X[:8]), atol=1e-5)


def test_a_physics_model_trained_on_other_estimates_is_refused(tmp_path, monkeypatch):
    directory = trained_kind(tmp_path, monkeypatch, "hist_gradient_boosting_physics").path
    spec = json.loads((directory / "serving.json").read_text())
    spec["linear_plus_trees"]["estimates"] = ["est_log_compute_s"]  # what another netsched might compute
    (directory / "serving.json").write_text(json.dumps(spec))
    meta = json.loads((directory / "meta.json").read_text())
    meta["serving"]["serving.json"] = file_sha256(directory / "serving.json")
    (directory / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ArtifactError, match="trained on the estimates"):
        Predictor.load(directory)
