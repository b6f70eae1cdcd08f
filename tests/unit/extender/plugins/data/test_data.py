from functools import partial

import numpy as np
import pytest

from netsched.extender.plugin import InvalidNeeds
from netsched.extender.plugins.data import DataCloseness
from netsched.extender.plugins.data.annotation import DataSource, data_source
from netsched.telemetry.store import TelemetryStore
from netsched.testing.extender import plugin_request


def source(value: str) -> dict:
    return {"netsched.io/data-source": value}


def measured_from(target: str) -> TelemetryStore:
    store = TelemetryStore()
    store.record("a1-1", target, rtt_ms=0.5, bandwidth_mbps=8000)
    store.record("b1-0", target, rtt_ms=4.5, bandwidth_mbps=2000)
    return store


# a store ages what it records by the monotonic clock: cases hold how to build one, built when the
# case runs, since the suite may reach a case minutes after collecting it (older than max age)
@pytest.mark.parametrize("annotations, telemetry, expected", [
    pytest.param({}, None, None, id="no-source"),
    pytest.param(source("zone:zone-b"), None, [0.0, 0.0, 0.0, 1.0], id="every-node-of-the-zone-is-ideal"),
    pytest.param(source("rack:rack-a1"), None, [1.0, 1.0, 0.375, 0.0], id="rack"),
    pytest.param(source("zone:zone-z"), None, None, id="a-place-the-cluster-lacks"),
    pytest.param(source("endpoint:10.0.0.5:9000"), None, None, id="an-unmeasured-endpoint"),
    pytest.param(source("endpoint:10.0.0.5:9000"), partial(measured_from, "10.0.0.5:9000"),
                 [0.0, 1.0, 0.0, 0.5 * 0.25 + 0.5 * 0.2], id="an-endpoint-by-measurement"),
])
def test_data_closeness(annotations, telemetry, expected):
    req, idx, _ = plugin_request(annotations, telemetry=telemetry and telemetry())
    got = DataCloseness().score(req, idx)
    assert got is None if expected is None else np.allclose(got, expected)


@pytest.mark.parametrize("annotations, parsed", [
    pytest.param({}, None, id="unset"),
    pytest.param(source("zone:zone-a"), DataSource("zone", "zone-a"), id="zone"),
    pytest.param(source("endpoint:10.0.0.5:9000"), DataSource("endpoint", "10.0.0.5:9000"), id="endpoint"),
    pytest.param(source("s3://bucket"), InvalidNeeds, id="no-kind"),
    pytest.param(source("zone:"), InvalidNeeds, id="no-name"),
])
def test_data_source_annotation(annotations, parsed):
    if parsed is InvalidNeeds:
        with pytest.raises(InvalidNeeds, match="must be <kind>:<name>"):
            data_source(annotations)
    else:
        assert data_source(annotations) == parsed
