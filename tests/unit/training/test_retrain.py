import json

import numpy as np
import pytest

from netsched.models.features import SchemaError
from netsched.testing.models import sim_rows
from netsched.training.dataset import TARGET, write_dataset
from netsched.training.retrain import retrain
from netsched.training.train import train


@pytest.fixture(autouse=True)
def two_kinds(monkeypatch):
    """The servable kinds only: the decisions under test, at half the training time."""
    monkeypatch.setattr("netsched.training.train.MODEL_KINDS", ("hist_gradient_boosting", "ridge"))


def quiet(*_):
    pass


def log_lines(models):
    return [json.loads(line) for line in (models / "promotions.jsonl").read_text().splitlines()]


def manifest(models) -> str:
    return json.loads((models / "current.json").read_text())["artifact"]


@pytest.fixture
def data(tmp_path):
    write_dataset(tmp_path / "sim.csv", sim_rows(jobs=40, seed=2))
    return [tmp_path / "sim.csv"]


def test_promotes_the_first_model_then_keeps_one_that_is_not_better(tmp_path, data):
    models = tmp_path / "models"
    first = retrain(data, models, log=quiet)
    assert first.promoted and first.reason.startswith("no current model")
    assert manifest(models) == first.challenger.name and first.current is None
    second = retrain(data, models, log=quiet)  # the same data and seed: the same model again
    assert not second.promoted and second.current == first.challenger
    assert second.challenger_scores == second.current_scores and "does not beat" in second.reason
    assert manifest(models) == first.challenger.name and not second.challenger.exists()
    promoted, kept = log_lines(models)
    assert (promoted["decision"], kept["decision"]) == ("promoted", "kept")
    assert promoted["challenger"] == first.challenger.name and promoted["current"] is None
    assert kept["current"] == first.challenger.name and kept["challenger_deleted"]
    assert kept["held_out"]["jobs"] == 8 and kept["challenger_scores"]["sets"] == 8
    assert kept["challenger_scores"]["top1"] == kept["current_scores"]["top1"] > 0


def test_a_better_challenger_replaces_the_current_model(tmp_path, data):
    models = tmp_path / "models"
    rows = sim_rows(jobs=40, seed=2)
    shuffled = np.random.default_rng(0).permutation([r[TARGET] for r in rows])
    write_dataset(tmp_path / "noise.csv", [{**r, TARGET: t} for r, t in zip(rows, shuffled, strict=True)])
    worse = train([tmp_path / "noise.csv"], models, name="learned-noise", log=quiet)  # its times are shuffled
    (models / "current.json").write_text(json.dumps({"artifact": worse.name}))
    decision = retrain(data, models, log=quiet)
    assert decision.promoted and decision.current == worse and "beats the current model" in decision.reason
    assert decision.challenger_scores.regret_mean < decision.current_scores.regret_mean
    assert manifest(models) == decision.challenger.name


def test_a_current_model_that_cannot_load_is_replaced(tmp_path, data):
    models = tmp_path / "models"
    (models / "old").mkdir(parents=True)
    (models / "old" / "meta.json").write_text('{"schema_version": 0}')
    (models / "current.json").write_text('{"artifact": "old"}')
    decision = retrain(data, models, log=quiet)
    assert decision.promoted and decision.current is None and decision.current_scores is None
    assert "cannot be loaded, so it is replaced: " in decision.reason
    assert "old: model schema version 0, this netsched uses 1" in decision.reason
    assert manifest(models) == decision.challenger.name
    [logged] = log_lines(models)
    assert logged["decision"] == "promoted" and logged["reason"] == decision.reason


def test_sets_of_one_are_judged_by_mape(tmp_path):
    """Operator records have no counterfactual candidates: no regret to compare, so MAPE decides."""
    alone = [r for r in sim_rows(jobs=60, seed=4) if r["chosen"]]
    data = [tmp_path / "records.csv"]
    write_dataset(data[0], alone)
    models = tmp_path / "models"
    assert retrain(data, models, log=quiet).promoted
    again = retrain(data, models, log=quiet)
    assert not again.promoted and "so by MAPE" in again.reason
    assert again.challenger_scores.sets == 0 and again.challenger_scores.mape == again.current_scores.mape > 0


def test_bad_data_changes_nothing(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("schema_version,x\n2,1\n")
    models = tmp_path / "models"
    with pytest.raises(SchemaError, match="bad.csv: line 2: schema_version '2'"):
        retrain([bad], models, log=quiet)
    assert not models.exists()
