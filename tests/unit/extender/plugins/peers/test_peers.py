import numpy as np
import pytest

from netsched.extender.plugins.peers import PeerCloseness
from netsched.telemetry.store import TelemetryStore
from netsched.testing.extender import plugin_request, pod


def fast_to_a2() -> TelemetryStore:
    store = TelemetryStore()
    store.record("a2-0", "a1-0", rtt_ms=0.1, bandwidth_mbps=10000)
    store.record("a1-1", "a1-0", rtt_ms=5.0, bandwidth_mbps=100)
    return store


# a store ages what it records by the monotonic clock: cases hold how to build one, built when the
# case runs, since the suite may reach a case minutes after collecting it (older than max age)
@pytest.mark.parametrize("pods, telemetry, expected", [
    pytest.param([], None, None, id="no-peers-nothing-to-say"),
    pytest.param([pod("r0", "a1-0", job="train")], None, [1.0, 0.4, 0.15, 0.0], id="node-rack-zone-far"),
    pytest.param([pod("r0", "a1-0", job="train"), pod("r1", "b1-0", job="train")], None,
                 [0.5, 0.2, 0.075, 0.5], id="averaged-over-the-pods"),
    pytest.param([pod("r0", "a1-0", job="train")], fast_to_a2, [1.0, 0.2 + 0.5 * 0.5 * (0.01 + 0.6 / 5.5),
                                                                   0.075 + 0.5, 0.0],
                 id="half-from-measured-links"),
])
def test_peer_closeness(pods, telemetry, expected):
    req, idx, _ = plugin_request(pods=pods, telemetry=telemetry and telemetry())
    got = PeerCloseness().score(req, idx)
    assert got is None if expected is None else np.allclose(got, expected)
