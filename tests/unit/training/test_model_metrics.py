import math

import numpy as np
import pytest

from netsched.models.features import INDEX
from netsched.testing.models import sim_rows
from netsched.training.dataset import dataset_from_rows
from netsched.training.metrics import (
    BY_PAIRS,
    BY_RANKING,
    PAIR_TIE,
    TOP1_TIE,
    Scores,
    better,
    job_sizes,
    judged_by,
    model_scores,
    pair_accuracy,
    regrets,
    score,
)


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
    assert regrets(y, cost, sets).tolist() == pytest.approx([1.0, 0.0, 4.0])  # what the regret CDF draws


def test_errors_of_predicted_seconds_and_ties_go_to_the_first_row():
    y = np.array([100.0, 200.0])
    predicted = np.array([110.0, 110.0])  # a tie: the first row is picked
    s = score(y, predicted, [np.array([0, 1])], predicted)
    assert s.top1 == 1.0 and s.regret_mean == 0.0
    assert s.mae == pytest.approx((10 + 90) / 2) and s.mape == pytest.approx((0.1 + 0.45) / 2)


def test_sets_of_one_still_have_errors():
    s = score(np.array([100.0]), np.array([80.0]), [np.array([0])], np.array([80.0]))
    assert s.sets == 0 and math.isnan(s.top1) and s.mape == pytest.approx(0.2)


def test_better_needs_a_top1_or_mean_regret_lead_beyond_noise_and_never_reads_p95_or_mape():
    base = Scores(sets=100, top1=0.60, regret_p95=0.10, regret_mean=0.02, regret_std=0.05, mape=0.30)
    assert judged_by(base, base) == BY_RANKING
    # on 100 sets each the standard error of the top-1 difference is ~6.9 points
    assert better(Scores(sets=100, top1=0.68, regret_p95=0.5, regret_mean=0.1, regret_std=0.05, mape=0.9),
                  base)
    assert not better(Scores(sets=100, top1=0.65, regret_p95=0, regret_mean=0.02, regret_std=0.05), base)
    many = {"sets": 1_000_000, "regret_p95": 0.10, "regret_mean": 0.02, "regret_std": 0.05}  # little noise
    assert better(Scores(top1=0.60 + 2 * TOP1_TIE, **many), Scores(top1=0.60, **many))
    assert not better(Scores(top1=0.60 + TOP1_TIE / 2, **many), Scores(top1=0.60, **many))
    # the same top-1 with smaller mistakes: mean regret lower by more than its standard error (~0.7 point)
    assert better(Scores(sets=100, top1=0.60, regret_mean=0.01, regret_std=0.02, regret_p95=0.5), base)
    assert not better(Scores(sets=100, top1=0.60, regret_mean=0.015, regret_std=0.05, regret_p95=0), base)
    no_spread = Scores(sets=100, top1=0.60, regret_mean=0.5)  # scores written before regret_std
    assert not better(Scores(sets=100, top1=0.60, regret_mean=0.0), no_spread)
    assert not better(Scores(sets=100, top1=0.60, regret_p95=0.0, mape=0.01), base)  # p95, MAPE: no part
    assert not better(base, base)


def test_without_sets_to_rank_pairwise_accuracy_decides_and_mape_never_does():
    base = Scores(sets=0, pair_accuracy=0.70, pairs=50, mape=0.30)
    assert judged_by(base, base) == BY_PAIRS
    assert better(Scores(sets=0, pair_accuracy=0.70 + 2 * PAIR_TIE, pairs=50, mape=0.90), base)
    assert not better(Scores(sets=0, pair_accuracy=0.70 + PAIR_TIE / 2, pairs=50, mape=0.01), base)
    nothing = Scores(sets=0, mape=0.01)  # no two comparable jobs: nothing to rank by
    assert judged_by(nothing, base) is None and not better(nothing, base) and not better(base, nothing)


def test_pairwise_accuracy_on_a_hand_made_example():
    # class 0: true 10 < 20 < 30, predicted 1 < 3 > 2: pairs (10,20) right, (10,30) right, (20,30) wrong
    # class 1: true 5 = 5, no pair with different times; 7 vs 5 (x2): a tie in prediction counts half
    # -1: not a job's own row, never compared
    y = np.array([10.0, 20.0, 30.0, 5.0, 5.0, 7.0, 1.0])
    predicted = np.array([1.0, 3.0, 2.0, 4.0, 4.0, 4.0, 99.0])
    size = np.array([0, 0, 0, 1, 1, 1, -1])
    accuracy, pairs = pair_accuracy(y, predicted, size)
    assert pairs == 5 and accuracy == pytest.approx((2 + 0.5 + 0.5) / 5)
    assert pair_accuracy(y, predicted, np.full(7, -1)) == (pytest.approx(math.nan, nan_ok=True), 0)


def test_jobs_are_compared_by_their_own_row_within_a_size_class():
    ds = dataset_from_rows(sim_rows(jobs=30))
    sizes = job_sizes(ds)
    assert ((sizes >= 0) == ds.chosen).all()  # one row per job: the node it really ran on
    for a in np.flatnonzero(sizes >= 0):
        same = np.flatnonzero(sizes == sizes[a])
        assert (ds.X[same, INDEX["job_gpus"]] == ds.X[a, INDEX["job_gpus"]]).all()
        hint = ds.X[same, INDEX["expected_seconds"]]  # the job's own duration hint, NaN if it gave none
        if np.isnan(hint).any():
            assert np.isnan(hint).all()
        else:
            assert hint.max() / hint.min() < 2
    alone = ds.take(ds.chosen)
    s = model_scores(alone, alone.y * 1.1)  # a model whose predictions order every job right
    assert s.sets == 0 and math.isnan(s.top1) and s.pairs > 0 and s.pair_accuracy == 1.0


def test_json_round_trip_turns_nan_into_null():
    s = Scores(sets=0, mape=0.25, rows=3)
    data = s.to_json()
    assert data["top1"] is None and data["mape"] == 0.25
    back = Scores.from_json(data)
    assert back.mape == 0.25 and math.isnan(back.top1) and back.rows == 3
