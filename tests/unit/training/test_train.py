import json
import math

import numpy as np
import pytest

from netsched.models.artifact import file_sha256
from netsched.models.features import FEATURE_NAMES, INDEX, SCHEMA_VERSION, SchemaError
from netsched.testing.models import sim_rows, trained
from netsched.training.dataset import data_sha256, dataset_from_rows
from netsched.training.fitting import MODEL_KINDS, fit_model
from netsched.training.metrics import REGRET_TIE, Scores
from netsched.training.train import (
    SELECTION_RULE,
    SERVABLE,
    KindResult,
    select,
    site_folds,
    split_holdout,
    time_folds,
)


def test_the_artifact_says_what_trained_it():
    directory, data = trained()
    meta = json.loads((directory / "meta.json").read_text())
    assert meta["schema_version"] == SCHEMA_VERSION and meta["features"] == list(FEATURE_NAMES)
    assert meta["artifact_sha256"] == file_sha256(directory / "model.joblib")
    used = meta["training_data"]
    assert used["sha256"] == data_sha256([data]) and used["files"] == ["sim.csv"]
    assert used["candidate_sets"] == 120 and used["rows"] == 960  # 150 jobs less the latest 20%
    assert set(meta["cv"]) == set(MODEL_KINDS) and meta["model_kind"] in SERVABLE
    for kind, cv in meta["cv"].items():
        assert cv["servable"] == (kind in SERVABLE)
        for split in ("by_time", "by_site", "overall"):
            assert 0 < cv[split]["top1"] <= 1 and cv[split]["regret_mean"] >= 0 and cv[split]["mape"] > 0
    assert meta["selection_rule"] == SELECTION_RULE and meta["serving_ms_5000"] > 0


def result(kind: str, regret: float, mape: float = 0.3) -> KindResult:
    s = Scores(sets=100, regret_mean=regret, mape=mape)
    return KindResult(kind, s, s, s)


def test_selection_never_picks_a_kind_that_cannot_serve():
    assert select([result("hist_gradient_boosting", 0.05), result("random_forest", 0.01),
                   result("ridge", 0.06), result("knn", 0.0)]).kind == "hist_gradient_boosting"


def test_selection_needs_a_real_win_to_leave_the_first_kind():
    hgb = result("hist_gradient_boosting", 0.05)
    assert select([hgb, result("ridge", 0.05 - 2 * REGRET_TIE)]).kind == "ridge"
    assert select([hgb, result("ridge", 0.05 - REGRET_TIE / 2)]).kind == "hist_gradient_boosting"
    assert select([hgb, result("ridge", 0.05, mape=0.2)]).kind == "ridge"  # a regret tie, MAPE decides


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


def test_the_candidate_part_ranks_even_from_sets_of_one():
    """Operator records are sets of one row: the candidate part learns from their residuals."""
    rng = np.random.default_rng(0)
    n = 400
    X = np.full((n, len(FEATURE_NAMES)), np.nan)
    X[:, INDEX["expected_seconds"]] = rng.uniform(100, 10_000, n)
    X[:, INDEX["node_cpu_load"]] = rng.uniform(0, 1, n)
    log_y = np.log(X[:, INDEX["expected_seconds"]]) + X[:, INDEX["node_cpu_load"]]  # a busy node is slower
    model = fit_model("hist_gradient_boosting", FEATURE_NAMES, X, log_y, np.arange(n).astype(str), 0)
    job = np.tile(X[:1], (2, 1))
    job[:, INDEX["node_cpu_load"]] = [0.9, 0.1]
    quiet, busy = model.predict(job)[::-1]
    assert busy - quiet > 0.5  # truth: 0.8
    assert math.isclose(np.mean(model.predict(X) - log_y), 0, abs_tol=0.05)
