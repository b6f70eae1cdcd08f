import numpy as np
import pytest

from netsched.extender.plugins.bin_packing import BinPacking
from netsched.testing.extender import plugin_request, pod


@pytest.mark.parametrize("pods, gpus, expected", [
    pytest.param([], 8, [1.0, 1.0, 1.0, 1.0], id="a-whole-node-fits-exactly"),
    pytest.param([pod("x", "a1-0", gpus=6)], 2, [1.0, 0.25, 0.25, 0.25], id="the-fuller-node-is-tighter"),
    pytest.param([pod("x", "a1-0", gpus=7)], 2, [0.0, 0.25, 0.25, 0.25], id="too-few-free-gpus-score-0"),
])
def test_bin_packing(pods, gpus, expected):
    req, idx, _ = plugin_request(pods=pods, job=None, gpus=gpus)
    assert np.allclose(BinPacking().score(req, idx), expected)
