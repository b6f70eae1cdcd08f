import pytest

from netsched.extender.plugin import InvalidNeeds
from netsched.extender.plugins.network_limits import NetworkLimits
from netsched.extender.plugins.network_limits.annotation import limits
from netsched.telemetry.store import TelemetryStore
from netsched.testing.extender import plugin_request, pod

PEER = [pod("r0", "a1-0", job="train")]


def measured() -> TelemetryStore:
    store = TelemetryStore()
    for src, rtt, bw in (("a1-1", 0.2, 9000), ("a2-0", 3.0, 2000), ("b1-0", 9.0, 500)):
        store.record(src, "a1-0", rtt_ms=rtt, bandwidth_mbps=bw)
    return store


# a store ages what it records by the monotonic clock: cases hold how to build one, built when the
# case runs, since the suite may reach a case minutes after collecting it (older than max age)
@pytest.mark.parametrize("annotations, pods, telemetry, rejected", [
    pytest.param({}, PEER, measured, set(), id="no-annotation"),
    pytest.param({"netsched.io/max-peer-rtt-ms": "1"}, PEER, measured, {"a2-0", "b1-0"}, id="peer-rtt"),
    pytest.param({"netsched.io/min-peer-bandwidth-mbps": "1000"}, PEER, measured, {"b1-0"},
                 id="peer-bandwidth"),
    pytest.param({"netsched.io/max-peer-rtt-ms": "1"}, PEER, None, {"a1-1", "a2-0", "b1-0"},
                 id="unmeasured-links-fail-the-peers-own-node-passes"),
    pytest.param({"netsched.io/max-data-rtt-ms": "1", "netsched.io/data-source": "node:a1-0"}, [], measured,
                 {"a2-0", "b1-0"}, id="data-rtt"),
])
def test_network_limits(annotations, pods, telemetry, rejected):
    req, idx, names = plugin_request(annotations, pods, telemetry=telemetry and telemetry())
    assert {names[pos] for pos in NetworkLimits().reject(req, idx)} == rejected


@pytest.mark.parametrize("annotations, message", [
    pytest.param({"netsched.io/max-peer-rtt-ms": "fast"}, "must be a positive number", id="not-a-number"),
    pytest.param({"netsched.io/min-peer-bandwidth-mbps": "-5"}, "must be a positive number", id="negative"),
    pytest.param({"netsched.io/max-peer-rtt-ms": "1_0"}, "must be a positive number", id="float-takes-it"),
    pytest.param({"netsched.io/max-data-rtt-ms": "2"}, "need annotation netsched.io/data-source",
                 id="data-limit-without-a-source"),
])
def test_limit_annotation_errors(annotations, message):
    with pytest.raises(InvalidNeeds, match=message):
        limits(annotations)
