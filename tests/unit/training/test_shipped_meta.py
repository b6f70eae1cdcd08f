"""models/default's meta.json says what picked it in the words `netsched train` now writes: a change to
the selection rule or its label without retraining the shipped model (its card's commands) fails here."""

import json
from pathlib import Path

from netsched.training.metrics import Scores, judged_by
from netsched.training.train import SELECTION_RULE

META = Path(__file__).resolve().parents[3] / "models" / "default" / "meta.json"


def test_the_shipped_model_names_the_rule_that_picked_it():
    meta = json.loads(META.read_text())
    assert meta["selection_rule"] == SELECTION_RULE
    picked = Scores.from_json(meta["cv"][meta["model_kind"]]["overall"])
    assert meta["validation"]["selected_by"] == judged_by(picked)
