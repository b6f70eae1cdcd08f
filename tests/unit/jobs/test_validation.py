"""GPUJobs the API server accepts but that cannot run as written: each problem names its field and fix."""

from __future__ import annotations

import pytest

from netsched.api.labels import (
    DATA_SOURCE,
    MAX_DATA_DISTANCE,
    MAX_PEER_DISTANCE,
    MAX_PEER_RTT_MS,
    MIN_PEER_BANDWIDTH_MBPS,
)
from netsched.api.topology import Topology
from netsched.jobs.capacity import node_room
from netsched.jobs.gpujob import GPUJob
from netsched.jobs.replica_pods import pod_annotations
from netsched.jobs.validation import invalid, problems
from netsched.testing.builders import CLUSTER, make_gpujob, make_node

ROOMS = [node_room(n) for n in CLUSTER]
MAIN = {"name": "main", "image": "trainer:1"}


def spec(container: dict | None = None, pod: dict | None = None, **fields) -> GPUJob:
    template = {"spec": {"containers": [MAIN | (container or {})], **(pod or {})}}
    return GPUJob.of(make_gpujob(template=template, **fields))


@pytest.mark.parametrize("job, field, fix", [
    pytest.param(spec({"env": 5}), "spec.template.spec.containers[0].env: 5 is not a list",
                 "write e.g. [{name: A, value: '1'}]", id="env-number"),
    pytest.param(spec({"env": "A=1"}), "containers[0].env: 'A=1' is not a list", "{name, value}",
                 id="env-string"),
    pytest.param(spec({"env": ["A=1"]}), "containers[0].env: ['A=1']", "{name, value}", id="env-strings"),
    pytest.param(spec(pod={"schedulingGates": 5}), "spec.template.spec.schedulingGates: 5 is not a list",
                 "[{name: my-gate}]", id="gates-number"),
    pytest.param(spec({"resources": {"requests": {"cpu": "lots"}}}),
                 "containers[0].resources.requests.cpu: 'lots' is not a Kubernetes quantity", "500m",
                 id="cpu-lots"),
    pytest.param(spec({"resources": {"requests": {"cpu": "1e1000"}}}),
                 "requests.cpu: '1e1000' is larger than any real machine has", "500m", id="cpu-huge"),
    pytest.param(spec({"resources": {"limits": {"memory": "1 GB"}}}), "resources.limits.memory: '1 GB'",
                 "16Gi", id="memory-with-a-space"),
    pytest.param(spec(network={"maxDataDistance": "rack"}), "spec.network.maxDataDistance 'rack' needs "
                 "spec.dataSources", "add a data source", id="data-distance-without-data"),
    pytest.param(spec(network={"maxDataDistance": "rack"},
                      dataSources=[{"name": "d", "kind": "zone", "location": "zone-a"}]),
                 "maxDataDistance 'rack' is finer than spec.dataSources[0], known only to its zone",
                 "set maxDataDistance to zone", id="finer-than-the-data"),
    pytest.param(spec(network={"maxDataDistance": "zone"},
                      dataSources=[{"name": "d", "kind": "zone", "location": "zone-z"}]),
                 "spec.dataSources[0].location 'zone-z': no node has topology.kubernetes.io/zone=zone-z",
                 "name one of zone-a, zone-b", id="zone-that-does-not-exist"),
    pytest.param(spec(network={"maxDataDistance": "node"},
                      dataSources=[{"name": "d", "kind": "endpoint", "endpoint": "10.0.0.1:9000"}]),
                 "at a node, rack or zone, not a endpoint", "maxDataRttMs", id="endpoint-data-distance"),
    pytest.param(spec(pod={"containers": 5}), "spec.template.spec.containers: 5 is not a list", "image",
                 id="containers-number"),
])
def test_each_problem_names_the_field_and_the_fix(job, field, fix):
    found = problems(job, {}, ROOMS)
    assert len(found) == 1 and field in found[0] and fix in found[0], found


def test_annotations_over_the_api_servers_limit_count_netscheds_own():
    assert problems(spec(), {"big": "x" * (256 * 1024 - 3)}, ROOMS) == []
    found = problems(spec(), {"big": "x" * (256 * 1024 - 3), "netsched.io/job-gpus": "8"}, ROOMS)
    assert len(found) == 1 and "spec.template.metadata.annotations: 262165 bytes" in found[0]
    assert "keep large values in a ConfigMap" in found[0]


@pytest.mark.parametrize("job", [
    pytest.param(spec({"env": [{"name": "A", "value": "1"}], "resources": {"requests": {"cpu": "500m"}}},
                      pod={"schedulingGates": [{"name": "mine"}]}), id="template"),
    pytest.param(spec(network={"maxDataDistance": "zone"},
                      dataSources=[{"name": "d", "kind": "rack", "location": "rack-a1"}]),
                 id="data-in-a-rack"),
    pytest.param(spec(network={"maxDataDistance": "node"},
                      dataSources=[{"name": "d", "kind": "node", "location": "a1-0"}]), id="data-on-a-node"),
])
def test_a_valid_job_has_no_problems(job):
    assert problems(job, {}, ROOMS) == []


def test_an_unknown_place_is_not_a_problem_before_any_node_is_known():
    job = spec(network={"maxDataDistance": "zone"},
               dataSources=[{"name": "d", "kind": "zone", "location": "x"}])
    assert problems(job, {}, []) == []


def test_the_same_problems_are_said_once_and_new_ones_again():
    status, warning = invalid({}, ["a: bad; fix it"], 3)
    assert (status["phase"], status["reason"], warning) == ("Blocked", "InvalidSpec", "a: bad; fix it")
    ready = status["conditions"][0]
    assert (ready["type"], ready["status"], ready["reason"]) == ("PodsReady", "False", "InvalidSpec")
    again, warning = invalid(status, ["a: bad; fix it"], 3)
    assert warning is None and again == status
    assert invalid(status, ["b: worse"], 4)[1] == "b: worse"


def annotated(annotations: dict, **fields) -> GPUJob:
    return GPUJob.of(make_gpujob(annotations=annotations, **fields))


@pytest.mark.parametrize("job, said", [
    pytest.param(annotated({MAX_PEER_DISTANCE: "galaxy"}),
                 "spec.template.metadata.annotations[netsched.io/max-peer-distance]: 'galaxy' is not a "
                 "topology level of this cluster: write one of node, rack, zone, or set "
                 "spec.network.maxPeerDistance instead",
                 id="galaxy"),
    pytest.param(annotated({MAX_DATA_DISTANCE: "Rack", DATA_SOURCE: "zone:zone-a"}),
                 "[netsched.io/max-data-distance]: 'Rack' is not a topology level of this cluster: "
                 "write one of node, rack, zone",
                 id="data-distance-capitalised"),
    pytest.param(annotated({DATA_SOURCE: "s3:bucket"}),
                 "[netsched.io/data-source]: 's3:bucket' is not allowed; write <kind>:<name>",
                 id="data-kind"),
    pytest.param(annotated({MAX_PEER_RTT_MS: "0"}), "[netsched.io/max-peer-rtt-ms]: '0' is not allowed; "
                 "write a positive number", id="rtt-zero"),
    pytest.param(annotated({MIN_PEER_BANDWIDTH_MBPS: "1_000"}), "'1_000' is not allowed", id="underscore"),
])
def test_a_netsched_annotation_value_the_extender_refuses_is_named_with_the_values_it_takes(job, said):
    found = problems(job, pod_annotations(job), ROOMS)
    assert len(found) == 1 and said in found[0], found


def test_a_good_annotation_or_one_the_spec_overrides_is_no_problem():
    for job in (annotated({MAX_PEER_DISTANCE: "zone", MAX_PEER_RTT_MS: "2.5", DATA_SOURCE: "endpoint:h:9"}),
                annotated({MAX_PEER_DISTANCE: "galaxy"}, network={"maxPeerDistance": "rack"}),
                # as validation has always read a limit: one too large for a float passes (the extender
                # refuses it as not finite)
                annotated({MAX_PEER_RTT_MS: "9" * 400})):
        assert problems(job, pod_annotations(job), ROOMS) == []


LEVELS = Topology.parse("block=example.com/block,subblock=example.com/subblock,host=example.com/host")


@pytest.mark.parametrize("job, said", [
    pytest.param(spec(network={"maxPeerDistance": "rack"}), "spec.network.maxPeerDistance: 'rack' is not a "
                 "topology level of this cluster: write one of node, host, subblock, block", id="peer"),
    pytest.param(spec(network={"maxDataDistance": "zone"}, dataSources=[{"name": "d", "kind": "block",
                                                                          "location": "b1"}]),
                 "spec.network.maxDataDistance: 'zone' is not a topology level", id="data-distance"),
    pytest.param(spec(dataSources=[{"name": "d", "kind": "rack", "location": "r1"}]),
                 "spec.dataSources[0].kind: 'rack' is not a topology level of this cluster: write one of "
                 "node, host, subblock, block", id="data-kind"),
])
def test_a_level_the_cluster_lacks_is_named_with_the_levels_it_has(job, said):
    [found] = problems(job, pod_annotations(job), ROOMS, topology=LEVELS)
    assert found == said or found.startswith(said), found


def test_the_configured_levels_are_valid_and_a_level_in_an_annotation_is_checked_against_them():
    job = spec(network={"maxPeerDistance": "subblock", "maxDataDistance": "block"},
               dataSources=[{"name": "d", "kind": "subblock", "location": "s1"}])
    nodes = [node_room(make_node("n0", labels={"example.com/block": "b1", "example.com/subblock": "s1"}))]
    assert problems(job, pod_annotations(job), nodes, topology=LEVELS) == []
    hand = annotated({MAX_PEER_DISTANCE: "zone"})
    [found] = problems(hand, pod_annotations(hand), ROOMS, topology=LEVELS)
    assert found == ("spec.template.metadata.annotations[netsched.io/max-peer-distance]: 'zone' is not a "
                     "topology level of this cluster: write one of node, host, subblock, block, or set "
                     "spec.network.maxPeerDistance instead")
