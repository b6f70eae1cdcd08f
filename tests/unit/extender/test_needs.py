import numpy as np
import pytest

from netsched.extender.engine import check_needs, run_filters
from netsched.extender.plugin import InvalidNeeds, Request
from netsched.extender.plugins import FILTERS, SCORERS
from netsched.extender.plugins.job_room.annotation import job_gpus
from netsched.extender.plugins.network_limits.annotation import limits
from netsched.extender.protocol import PodRef
from netsched.telemetry.store import TelemetryStore
from netsched.testing.extender import CLUSTER, cache_of, node, pod


@pytest.mark.parametrize("annotations, message", [
    ({"netsched.io/max-peer-distance": "galaxy"},
     "max-peer-distance=galaxy: 'galaxy' is not a topology level of this cluster: write one of node, rack"),
    ({"netsched.io/data-source": "s3://bucket"}, "must be <kind>:<name>"),
    ({"netsched.io/max-data-distance": "rack"},
     "needs netsched.io/data-source to name a node or a domain of rack, zone"),
    ({"netsched.io/max-peer-rtt-ms": "fast"}, "max-peer-rtt-ms='fast' must be a positive number"),
    ({"netsched.io/min-peer-bandwidth-mbps": "-5"}, "must be a positive number"),
    ({"netsched.io/max-data-rtt-ms": "2"}, "need annotation netsched.io/data-source"),
    ({"netsched.io/job-gpus": "2.5"}, "job-gpus='2.5' must be a whole number of GPUs"),
    ({"netsched.io/job-gpus": "\u00b2"}, "job-gpus='\u00b2' must be a whole number of GPUs"),  # "2".isdigit()
    ({"netsched.io/job-gpus": "\u0663"}, "must be a whole number of GPUs"),  # an Arabic-Indic 3
    ({"netsched.io/max-peer-rtt-ms": "\u0663"}, "must be a positive number"),  # float() would take it
    ({"netsched.io/max-peer-rtt-ms": "1_0"}, "must be a positive number"),
    ({"netsched.io/max-peer-rtt-ms": "nan"}, "must be a positive number"),
])
def test_bad_annotations_name_the_annotation_and_the_fix(annotations, message):
    req = Request(PodRef("ml", "p", "", 1, "train"), cache_of(CLUSTER).snapshot(), annotations=annotations)
    with pytest.raises(InvalidNeeds, match=None) as err:
        check_needs(req, (*FILTERS, *SCORERS))
    assert message in str(err.value)


@pytest.mark.parametrize("annotations, parsed", [
    ({"netsched.io/job-gpus": "16"}, (job_gpus, 16)),
    ({"netsched.io/max-peer-rtt-ms": "0.5"}, (limits, 0.5)),
    ({"netsched.io/max-peer-rtt-ms": "12"}, (limits, 12.0)),
])
def test_plain_ascii_numbers_parse(annotations, parsed):
    value = parsed[0](annotations)
    assert (value[0].value if parsed[0] is limits else value) == parsed[1]


def reasons(annotations, pods=(), telemetry=None, nodes=CLUSTER):
    cache = cache_of(nodes, list(pods))
    snap = cache.snapshot("ml", "train", telemetry=telemetry or TelemetryStore())
    idx = np.array([snap.table.index[n["metadata"]["name"]] for n in nodes])
    req = Request(PodRef("ml", "p", "", 1, "train"), snap, annotations=annotations)
    found = run_filters(FILTERS, req, idx)
    return {nodes[pos]["metadata"]["name"]: why for pos, why in found.items()}


def test_max_peer_distance_rejects_nodes_outside_the_peers_rack_with_a_reason():
    got = reasons({"netsched.io/max-peer-distance": "rack"}, [pod("r0", "a1-0", job="train")])
    assert set(got) == {"a2-0", "b1-0"}
    assert got["b1-0"] == ("netsched: b1-0 is not in the same rack as job train's pods "
                           "(rack-a1; netsched.io/max-peer-distance=rack)")
    assert reasons({"netsched.io/max-peer-distance": "rack"}) == {}  # no peers yet: anywhere


def test_max_data_distance_keeps_nodes_near_the_data():
    got = reasons({"netsched.io/data-source": "zone:zone-b", "netsched.io/max-data-distance": "zone"})
    assert set(got) == {"a1-0", "a1-1", "a2-0"}
    assert "not within the zone of the input data (zone zone-b" in got["a1-0"]
    missing = reasons({"netsched.io/data-source": "rack:rack-z9", "netsched.io/max-data-distance": "rack"})
    assert set(missing) == {"a1-0", "a1-1", "a2-0", "b1-0"}
    assert "is not in this cluster's topology" in missing["a1-0"]


def test_measured_limits_need_fresh_measurements_and_enforce_them():
    nodes = [node("peer"), node("near"), node("far"), node("unmeasured")]
    telemetry = TelemetryStore(max_age=60)
    telemetry.record("near", "peer", rtt_ms=0.2, bandwidth_mbps=900)
    telemetry.record("far", "peer", rtt_ms=0.2, bandwidth_mbps=40)
    got = reasons({"netsched.io/min-peer-bandwidth-mbps": "100"}, [pod("r0", "peer", job="train")],
                  telemetry, nodes)
    assert set(got) == {"far", "unmeasured"}
    assert got["far"] == ("netsched: far to peer peer measures 40 Mbit/s, min allowed 100 "
                          "(netsched.io/min-peer-bandwidth-mbps)")
    assert "no fresh measurement from unmeasured to peer peer" in got["unmeasured"]


def test_a_measurement_older_than_the_bound_is_not_used():
    clock = [0.0]
    telemetry = TelemetryStore(max_age=60, clock=lambda: clock[0])
    telemetry.record("a1-1", "endpoint-x", rtt_ms=1, bandwidth_mbps=100)
    clock[0] = 61
    assert telemetry.link("a1-1", "endpoint-x") is None
    got = reasons({"netsched.io/data-source": "endpoint:endpoint-x", "netsched.io/max-data-rtt-ms": "5"},
                  telemetry=telemetry)
    assert "no fresh measurement from a1-1 to data endpoint-x" in got["a1-1"]
