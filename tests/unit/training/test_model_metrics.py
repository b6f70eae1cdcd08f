import math

import numpy as np
import pytest

from netsched.training.metrics import MAPE_TIE, REGRET_TIE, Scores, better, score


def test_scores_on_a_hand_made_example():
    # set A: 4 candidates, the policy picks the 2nd fastest (20 s, best 10 s): regret 1.0, top-3 only
    # set B: 2 candidates, the policy picks the fastest (5 s): regret 0, top-1
    # set C: 1 candidate: nothing to choose, not judged
    # set D: 4 candidates, the policy picks the slowest (40 s, best 8 s): regret 4.0, not even top-3
    y = np.array([10.0, 20.0, 30.0, 40.0, 5.0, 6.0, 7.0, 8.0, 16.0, 24.0, 40.0])
    cost = np.array([3.0, 1.0, 2.0, 4.0, 0.0, 1.0, 9.0, 4.0, 3.0, 2.0, 1.0])
    sets = [np.arange(0, 4), np.array([4, 5]), np.array([6]), np.arange(7, 11)]
    s = score(y, cost, sets)
    assert (s.sets, s.rows) == (3, 11)
    assert s.top1 == pytest.approx(1 / 3) and s.top3 == pytest.approx(2 / 3)
    assert s.regret_mean == pytest.approx((1.0 + 0.0 + 4.0) / 3) and s.regret_median == pytest.approx(1.0)
    assert s.regret_p95 == pytest.approx(1.0 + 0.9 * 3.0)  # linear between 1.0 and 4.0
    assert s.mean_jct == pytest.approx((20 + 5 + 40) / 3)
    assert math.isnan(s.mae) and math.isnan(s.mape)  # the policy predicts no seconds


def test_errors_of_predicted_seconds_and_ties_go_to_the_first_row():
    y = np.array([100.0, 200.0])
    predicted = np.array([110.0, 110.0])  # a tie: the first row is picked
    s = score(y, predicted, [np.array([0, 1])], predicted)
    assert s.top1 == 1.0 and s.regret_mean == 0.0
    assert s.mae == pytest.approx((10 + 90) / 2) and s.mape == pytest.approx((0.1 + 0.45) / 2)


def test_sets_of_one_still_have_errors():
    s = score(np.array([100.0]), np.array([80.0]), [np.array([0])], np.array([80.0]))
    assert s.sets == 0 and math.isnan(s.top1) and s.mape == pytest.approx(0.2)


def test_better_compares_regret_then_mape():
    base = Scores(sets=10, regret_mean=0.05, mape=0.30)
    assert better(Scores(sets=10, regret_mean=0.05 - 2 * REGRET_TIE, mape=0.90), base)
    assert not better(Scores(sets=10, regret_mean=0.05 + 2 * REGRET_TIE, mape=0.01), base)
    within = 0.05 - REGRET_TIE / 2
    assert better(Scores(sets=10, regret_mean=within, mape=0.30 - 2 * MAPE_TIE), base)
    assert not better(Scores(sets=10, regret_mean=within, mape=0.30 - MAPE_TIE / 2), base)
    assert not better(base, base)


def test_better_without_sets_to_rank_is_mape_alone():
    assert better(Scores(sets=0, mape=0.20), Scores(sets=0, mape=0.30))
    assert not better(Scores(sets=0, mape=0.30), Scores(sets=0, mape=0.20))


def test_json_round_trip_turns_nan_into_null():
    s = Scores(sets=0, mape=0.25, rows=3)
    data = s.to_json()
    assert data["top1"] is None and data["mape"] == 0.25
    back = Scores.from_json(data)
    assert back.mape == 0.25 and math.isnan(back.top1) and back.rows == 3
