import json

import numpy as np
import pytest

from netsched.models.features import TARGET, SchemaError
from netsched.testing.models import sim_rows
from netsched.training.dataset import write_dataset
from netsched.training.metrics import BY_NODE_PAIRS, BY_RANKING, Scores, better
from netsched.training.retrain import retrain
from netsched.training.train import PREFERRED, KindResult, select, train


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


ROWS = sim_rows(jobs=40, seed=9)
EARLIER = ROWS[:32 * 8]  # the first 32 jobs: all but the 8 that retrain on ROWS holds out


@pytest.fixture
def data(tmp_path):
    write_dataset(tmp_path / "sim.csv", ROWS)
    return [tmp_path / "sim.csv"]


def test_promotes_the_first_model_then_keeps_one_that_is_not_better(tmp_path, data, monkeypatch):
    # one kind: both retrains pick it, so the challenger as validated is the model in service
    monkeypatch.setattr("netsched.training.train.MODEL_KINDS", ("hist_gradient_boosting",))
    models = tmp_path / "models"
    write_dataset(tmp_path / "earlier.csv", EARLIER)
    first = retrain([tmp_path / "earlier.csv"], models, log=quiet)
    assert first.promoted and first.reason.startswith("no current model")
    assert manifest(models) == first.challenger.name and first.current is None
    assert json.loads((first.challenger / "meta.json").read_text())["training_data"]["rows"] == 32 * 8
    second = retrain(data, models, log=quiet)  # judged as validated: fitted on those 32 jobs, the same model
    assert not second.promoted and second.current == first.challenger
    mine, theirs = second.challenger_scores, second.current_scores
    assert (mine.sets, mine.top1, mine.regret_p95) == (theirs.sets, theirs.top1, theirs.regret_p95)
    assert mine.mape == pytest.approx(theirs.mape) and "does not beat" in second.reason
    assert f"by {BY_RANKING}" in second.reason and "MAPE" in second.reason  # MAPE shown, not compared
    assert manifest(models) == first.challenger.name and not second.challenger.exists()
    promoted, kept = log_lines(models)
    assert (promoted["decision"], kept["decision"]) == ("promoted", "kept")
    assert promoted["challenger"] == first.challenger.name and promoted["current"] is None
    assert kept["current"] == first.challenger.name and kept["challenger_deleted"]
    assert kept["held_out"]["jobs"] == 8 and kept["challenger_scores"]["sets"] == 8
    assert kept["challenger_scores"]["top1"] == kept["current_scores"]["top1"] > 0


def test_a_current_model_that_saw_every_job_cannot_be_judged_so_it_is_kept(tmp_path, data):
    models = tmp_path / "models"
    first = retrain(data, models, log=quiet)  # promoted, refit on all 40 jobs
    again = retrain(data, models, log=quiet)
    assert not again.promoted and "cannot be compared fairly" in again.reason
    assert manifest(models) == first.challenger.name and not again.challenger.exists()


def test_a_better_challenger_replaces_the_current_model(tmp_path, data):
    models = tmp_path / "models"
    shuffled = np.random.default_rng(0).permutation([r[TARGET] for r in EARLIER])
    write_dataset(tmp_path / "noise.csv", [{**r, TARGET: t} for r, t in zip(EARLIER, shuffled, strict=True)])
    worse = train([tmp_path / "noise.csv"], models, name="learned-noise", log=quiet)  # its times are shuffled
    (models / "current.json").write_text(json.dumps({"artifact": worse.name}))
    decision = retrain(data, models, log=quiet)
    assert decision.promoted and decision.current == worse and "beats the current model" in decision.reason
    assert decision.challenger_scores.top1 > decision.current_scores.top1
    assert manifest(models) == decision.challenger.name
    assert json.loads((decision.challenger / "meta.json").read_text())["training_data"]["rows"] == len(ROWS)


def test_a_current_model_that_cannot_load_is_replaced(tmp_path, data):
    models = tmp_path / "models"
    (models / "old").mkdir(parents=True)
    (models / "old" / "meta.json").write_text('{"schema_version": 0}')
    (models / "current.json").write_text('{"artifact": "old"}')
    decision = retrain(data, models, log=quiet)
    assert decision.promoted and decision.current is None and decision.current_scores is None
    assert "cannot be loaded, so it is replaced: " in decision.reason
    assert "old: model schema version 0, this netsched uses 2" in decision.reason
    assert manifest(models) == decision.challenger.name
    [logged] = log_lines(models)
    assert logged["decision"] == "promoted" and logged["reason"] == decision.reason


def test_sets_of_one_are_judged_by_node_pairs(tmp_path, monkeypatch):
    """Operator records have no counterfactual candidates: no top-1 or regret; node pairs decide."""
    monkeypatch.setattr("netsched.training.train.MODEL_KINDS", ("hist_gradient_boosting",))  # one model twice
    alone = [r for r in sim_rows(jobs=60, seed=4) if r["chosen"]]
    write_dataset(tmp_path / "earlier.csv", alone[:48])
    write_dataset(tmp_path / "records.csv", alone)
    models = tmp_path / "models"
    assert retrain([tmp_path / "earlier.csv"], models, log=quiet).promoted
    again = retrain([tmp_path / "records.csv"], models, log=quiet)
    assert not again.promoted and f"by {BY_NODE_PAIRS}" in again.reason
    mine, theirs = again.challenger_scores, again.current_scores
    assert mine.sets == 0 and mine.pairs == theirs.pairs > 0 and 0 <= mine.pair_accuracy <= 1
    assert mine.node_pairs == theirs.node_pairs > 0 and 0 <= mine.node_pair_accuracy <= 1


def test_bad_data_changes_nothing(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("schema_version,x\n3,1\n")
    models = tmp_path / "models"
    with pytest.raises(SchemaError, match="bad.csv: line 2: schema_version '3'"):
        retrain([bad], models, log=quiet)
    assert not models.exists()


def ranked(top1: float) -> Scores:
    return Scores(sets=100, top1=top1, regret_p95=0.1, regret_mean=0.02, mape=0.3)


@pytest.mark.parametrize(("challenger", "promoted"), [
    pytest.param(ranked(0.65), False, id="a lead within the noise of 100 jobs is kept out"),
    pytest.param(ranked(0.75), True, id="a lead beyond it is promoted"),
])
def test_promotes_by_the_rule_train_selects_by(tmp_path, data, monkeypatch, challenger, promoted):
    """The model in service stands where train's pick so far stands: a challenger replaces it on the
    same terms a kind replaces the pick (a top-1 lead of 0.5 point, the rule before, is not enough)."""
    models = tmp_path / "models"
    write_dataset(tmp_path / "earlier.csv", EARLIER)
    retrain([tmp_path / "earlier.csv"], models, log=quiet)
    current = ranked(0.60)
    scored = iter([challenger, current])  # _decide scores the challenger, then the current model
    monkeypatch.setattr("netsched.training.retrain.model_scores", lambda *_: next(scored))
    decision = retrain(data, models, log=quiet)
    assert decision.promoted == promoted == better(challenger, current)
    picked = select([KindResult(PREFERRED, current, current, current),
                     KindResult("ridge", challenger, challenger, challenger)]).kind
    assert picked == ("ridge" if promoted else PREFERRED)
    assert f"by {BY_RANKING} (" in decision.reason
    [_, logged] = log_lines(models)
    assert logged["decision"] == ("promoted" if promoted else "kept")
