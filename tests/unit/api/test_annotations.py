import math

import pytest

from netsched.api import annotations as a
from netsched.api.labels import (
    COMMUNICATION,
    DATA_SOURCE,
    EXPECTED_SECONDS,
    JOB_GPUS,
    MAX_DATA_DISTANCE,
    MAX_DATA_RTT_MS,
    MAX_PEER_DISTANCE,
    MAX_PEER_RTT_MS,
    MIN_DATA_BANDWIDTH_MBPS,
    MIN_PEER_BANDWIDTH_MBPS,
    PROTECTED,
    REPLICAS,
    WORKLOAD_KIND,
)
from netsched.api.topology import PRESETS, Topology

GKE = Topology(PRESETS["gke"])
LIMITS = (MAX_PEER_RTT_MS, MIN_PEER_BANDWIDTH_MBPS, MAX_DATA_RTT_MS, MIN_DATA_BANDWIDTH_MBPS)
HINTS = a.HINT_NUMBERS

GOOD = [  # (annotation, value, what it reads as)
    (MAX_PEER_DISTANCE, "node", "node"),
    (MAX_PEER_DISTANCE, "rack", "rack"),
    (MAX_PEER_DISTANCE, "zone", "zone"),
    (MAX_DATA_DISTANCE, "rack", "rack"),
    (DATA_SOURCE, "node:gpu-a1-0", a.DataSource("node", "gpu-a1-0")),
    (DATA_SOURCE, "rack:r1", a.DataSource("rack", "r1")),
    (DATA_SOURCE, "zone:a", a.DataSource("zone", "a")),
    (DATA_SOURCE, "endpoint:10.0.0.5:9000", a.DataSource("endpoint", "10.0.0.5:9000")),
    (JOB_GPUS, "1", 1),
    (JOB_GPUS, "16", 16),
    *((key, "0.5", 0.5) for key in LIMITS),
    *((key, "12", 12.0) for key in LIMITS),
    *((key, ".5", 0.5) for key in LIMITS),
    (REPLICAS, "4", 4),
    *((key, "0", 0.0) for key in HINTS),
    *((key, "2.5", 2.5) for key in HINTS),
    *((key, "1e3", 1000.0) for key in HINTS),  # float() reads it so
    (WORKLOAD_KIND, "inference", "inference"),
    (WORKLOAD_KIND, "anything", "anything"),  # never refused: the model reads it as none of its kinds
    (WORKLOAD_KIND, "", None),
    (COMMUNICATION, "low", a.Communication.LOW),
    (COMMUNICATION, "high", a.Communication.HIGH),
    (PROTECTED, "true", True),
    (PROTECTED, "false", False),
]

NODE_RACK_ZONE = "write one of node, rack, zone"
KINDS = "must be <kind>:<name> with kind one of node, rack, zone, endpoint"
EXAMPLE = "e.g. zone:zone-a or endpoint:10.0.0.5:9000"
BAD = [  # (annotation, value, the one-line message)
    (MAX_PEER_DISTANCE, "galaxy",
     f"{MAX_PEER_DISTANCE}=galaxy: 'galaxy' is not a topology level of this cluster: {NODE_RACK_ZONE}"),
    (MAX_PEER_DISTANCE, "Rack",
     f"{MAX_PEER_DISTANCE}=Rack: 'Rack' is not a topology level of this cluster: {NODE_RACK_ZONE}"),
    (MAX_PEER_DISTANCE, "far",
     f"{MAX_PEER_DISTANCE}=far: 'far' is not a topology level of this cluster: {NODE_RACK_ZONE}"),
    (MAX_DATA_DISTANCE, "",
     f"{MAX_DATA_DISTANCE}=: '' is not a topology level of this cluster: {NODE_RACK_ZONE}"),
    (DATA_SOURCE, "s3://bucket",
     f"annotation {DATA_SOURCE}='s3://bucket' {KINDS} ('s3' is not a topology level of this cluster), "
     f"{EXAMPLE}"),
    (DATA_SOURCE, "rack:", f"annotation {DATA_SOURCE}='rack:' {KINDS}, {EXAMPLE}"),
    (DATA_SOURCE, "", f"annotation {DATA_SOURCE}='' {KINDS}, {EXAMPLE}"),
    (JOB_GPUS, "0", f"annotation {JOB_GPUS}='0' must be a whole number of GPUs, at least 1"),
    (JOB_GPUS, "2.5", f"annotation {JOB_GPUS}='2.5' must be a whole number of GPUs, at least 1"),
    (JOB_GPUS, "\u00b2", f"annotation {JOB_GPUS}='\u00b2' must be a whole number of GPUs, at least 1"),
    (JOB_GPUS, " 4", f"annotation {JOB_GPUS}=' 4' must be a whole number of GPUs, at least 1"),
    *((key, v, f"annotation {key}={v!r} must be a positive number") for key in LIMITS
      for v in ("fast", "0", "-5", "nan", "1_0", " 5", "\u0663", "9" * 400)),
    (REPLICAS, "0", f"annotation {REPLICAS}='0' must be a whole number of replicas, at least 1"),
    (REPLICAS, "1e3", f"annotation {REPLICAS}='1e3' must be a whole number of replicas, at least 1"),
    *((key, v, f"annotation {key}={v!r} must be a number, 0 or more") for key in HINTS
      for v in ("soon", "-1", "inf", "nan", "")),
    (COMMUNICATION, "High", f"annotation {COMMUNICATION}='High' must be one of low, medium, high"),
    (COMMUNICATION, "lots", f"annotation {COMMUNICATION}='lots' must be one of low, medium, high"),
    (PROTECTED, "yes", f"annotation {PROTECTED}='yes' must be true or false"),
]


def test_every_parsed_annotation_has_a_reader_and_a_case():
    assert {key for key, _, _ in GOOD} == set(a.READERS)
    assert {key for key, _, _ in BAD} == set(a.READERS) - {WORKLOAD_KIND}  # no kind is refused


@pytest.mark.parametrize("key, value, parsed", GOOD, ids=[f"{k}={v}" for k, v, _ in GOOD])
def test_good_values(key, value, parsed):
    assert a.read({key: value}, key) == parsed


@pytest.mark.parametrize("key", list(a.READERS))
def test_absent_is_none(key):
    assert a.read({"other": "x"}, key) is None


@pytest.mark.parametrize("key, value, message", BAD, ids=[f"{k}={v[:12]}" for k, v, _ in BAD])
def test_bad_values_say_the_annotation_the_value_and_what_is_allowed(key, value, message):
    with pytest.raises(a.BadAnnotation) as err:
        a.read({key: value}, key)
    assert str(err.value) == message
    assert "\n" not in message
    assert (err.value.key, err.value.value) == (key, value)
    assert err.value.allowed


def test_levels_are_the_topology_s():
    assert a.max_peer_distance({MAX_PEER_DISTANCE: "block"}, GKE) == "block"
    assert a.data_source({DATA_SOURCE: "subblock:s-1"}, GKE) == a.DataSource("subblock", "s-1")
    with pytest.raises(a.BadAnnotation, match="write one of node, host, subblock, block"):
        a.max_peer_distance({MAX_PEER_DISTANCE: "rack"}, GKE)
    with pytest.raises(a.BadAnnotation, match="kind one of node, host, subblock, block, endpoint"):
        a.data_source({DATA_SOURCE: "rack:r1"}, GKE)


@pytest.mark.parametrize("value, written", [
    (None, None), ("", ("", "")), ("rack:r1", ("rack", "r1")), ("s3://b", ("s3", "//b")),
    ("endpoint:10.0.0.5:9000", ("endpoint", "10.0.0.5:9000")), ("node:", ("node", "")),
])
def test_data_source_as_written_is_split_not_checked(value, written):
    assert a.data_source_as_written({} if value is None else {DATA_SOURCE: value}) == written


@pytest.mark.parametrize("value, number", [
    (None, None), ("", None), ("soon", None), ("60", 60.0), ("-5", -5.0), ("inf", math.inf), (" 5", 5.0),
])
def test_number_as_written_takes_what_float_reads(value, number):
    assert a.number_as_written({} if value is None else {EXPECTED_SECONDS: value}, EXPECTED_SECONDS) == number


def test_validation_lets_a_limit_too_large_for_a_float_pass():
    huge = {MAX_PEER_RTT_MS: "9" * 400}
    assert a.network_limit(huge, MAX_PEER_RTT_MS, any_size=True) == math.inf
    with pytest.raises(a.BadAnnotation):
        a.network_limit(huge, MAX_PEER_RTT_MS)


def test_ignoring_bad_reads_a_bad_value_as_none():
    assert a.ignoring_bad(a.job_gpus, {JOB_GPUS: "lots"}) is None
    assert a.ignoring_bad(a.job_gpus, {JOB_GPUS: "3"}) == 3
