"""SignedRidge: Ridge's answer when no sign binds, and each coefficient on the side its sign asks."""

import numpy as np
import pytest
from sklearn.linear_model import Ridge

from netsched.training.fitting import SignedRidge

RNG = np.random.default_rng(0)
X = RNG.normal(size=(400, 4))
Y = X @ np.array([1.0, -2.0, 0.5, 3.0]) + 0.7 + RNG.normal(0, 0.1, 400)


def test_without_signs_it_is_ridge():
    ours, theirs = SignedRidge(alpha=2.0).fit(X, Y), Ridge(alpha=2.0).fit(X, Y)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, atol=1e-10)
    assert ours.intercept_ == pytest.approx(theirs.intercept_)
    np.testing.assert_allclose(ours.predict(X), theirs.predict(X), atol=1e-9)


def test_a_coefficient_of_the_wrong_sign_is_held_at_zero_and_the_others_refit():
    model = SignedRidge(signs=[-1, 1, 0, 1]).fit(X, Y)
    assert model.coef_[0] == 0 and model.coef_[1] == 0  # the data say +1 and -2
    assert model.coef_[3] > 2.5 and model.coef_[2] > 0  # the free and the rightly signed ones still fit


def test_signs_for_other_columns_are_refused():
    with pytest.raises(ValueError, match="3 signs for 4 columns"):
        SignedRidge(signs=[1, 1, 1]).fit(X, Y)
