"""A data limit as required node affinity: the labels from the widest level down to the allowed one,
AND-ed into every term the pod's author wrote, nothing where it cannot be said exactly."""

import pytest

from netsched.api.topology import DEFAULT, Topology
from netsched.jobs.hard_limits import (
    NodeRequirement,
    Unwritable,
    data_requirement,
    requirement_patch,
    with_requirement,
)
from netsched.jobs.replica_pods import replica_pod
from netsched.jobs.workload import NetworkNeeds
from netsched.testing.builders import job

ZONE, RACK = "topology.kubernetes.io/zone", "netsched.io/rack"
NODES = [("a1-0", {ZONE: "zone-a", RACK: "rack-a1"}), ("a2-0", {ZONE: "zone-a", RACK: "rack-a2"}),
         ("b1-0", {ZONE: "zone-b", RACK: "rack-b1"}), ("b9-0", {ZONE: "zone-b", RACK: "r9"}),
         ("c9-0", {ZONE: "zone-c", RACK: "r9"})]  # rack r9 in two zones: each of them


def within(values_by_label):
    return NodeRequirement(tuple({"key": k, "operator": "In", "values": v} for k, v in values_by_label))


@pytest.mark.parametrize("distance, data, expected", [
    pytest.param("zone", ("zone", "zone-a"), within([(ZONE, ["zone-a"])]), id="zone-of-a-zone"),
    pytest.param("zone", ("rack", "rack-b1"), within([(ZONE, ["zone-b"])]), id="zone-of-a-rack"),
    pytest.param("rack", ("rack", "rack-a2"), within([(ZONE, ["zone-a"]), (RACK, ["rack-a2"])]),
                 id="rack-of-a-rack"),
    pytest.param("rack", ("node", "a1-0"), within([(ZONE, ["zone-a"]), (RACK, ["rack-a1"])]),
                 id="rack-of-a-node"),
    pytest.param("node", ("node", "b1-0"),
                 NodeRequirement(fields=({"key": "metadata.name", "operator": "In", "values": ["b1-0"]},)),
                 id="the-node-itself"),
    pytest.param("rack", ("rack", "r9"), within([(ZONE, ["zone-b", "zone-c"]), (RACK, ["r9"])]),
                 id="a-rack-name-two-zones-share"),
    pytest.param(None, ("zone", "zone-a"), None, id="no-limit"),
    pytest.param("zone", None, None, id="no-data"),
    pytest.param("zone", ("endpoint", "10.0.0.5:9000"), None, id="an-endpoint-is-the-extenders"),
    pytest.param("rack", ("zone", "zone-a"), None, id="finer-than-the-data-is-known"),
    pytest.param("galaxy", ("zone", "zone-a"), None, id="a-level-the-topology-lacks"),
])
def test_the_requirement_names_each_level_down_to_the_allowed_one(distance, data, expected):
    assert data_requirement(NetworkNeeds(None, distance, data), NODES, DEFAULT) == expected


def test_a_three_level_topology_names_all_three():
    topology = Topology.parse("block=b,sub=s,host=h")
    nodes = [("n1", {"b": "b1", "s": "s1", "h": "h1"}), ("n2", {"b": "b1", "s": "s2", "h": "h2"})]
    found = data_requirement(NetworkNeeds(None, "sub", ("host", "h2")), nodes, topology)
    assert found == within([("b", ["b1"]), ("s", ["s2"])])
    assert str(found) == "b in (b1), s in (s2)"


@pytest.mark.parametrize("data, nodes, why", [
    pytest.param(("rack", "rack-q"), NODES, f"no node with {RACK}=rack-q exists",
                 id="a-domain-no-node-has"),
    pytest.param(("node", "gone"), NODES, "no node gone exists", id="a-node-that-is-not-there"),
    pytest.param(("rack", "loose"), [("x", {RACK: "loose"})],
                 f"node x holds the data but has no {ZONE} label: label it",
                 id="a-holder-without-the-wider-label"),
])
def test_what_cannot_be_said_exactly_is_unwritable_with_the_reason(data, nodes, why):
    with pytest.raises(Unwritable, match=why):
        data_requirement(NetworkNeeds(None, "rack", data), nodes, DEFAULT)


IN_A = within([(ZONE, ["zone-a"])])
GPU_TERM = {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}
OLD_TERM = {"matchExpressions": [{"key": "old", "operator": "DoesNotExist"}]}
PREFERRED = {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": GPU_TERM}]}


@pytest.mark.parametrize("affinity, terms", [
    pytest.param(None, [{"matchExpressions": list(IN_A.expressions)}], id="none-yet"),
    pytest.param({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [GPU_TERM, OLD_TERM]}}},
        [{"matchExpressions": [*GPU_TERM["matchExpressions"], *IN_A.expressions]},
         {"matchExpressions": [*OLD_TERM["matchExpressions"], *IN_A.expressions]}], id="each-term-narrowed"),
    pytest.param({"nodeAffinity": PREFERRED, "podAntiAffinity": {"x": 1}},
                 [{"matchExpressions": list(IN_A.expressions)}], id="other-affinity-kept"),
])
def test_the_requirement_is_anded_into_every_term(affinity, terms):
    spec = {"affinity": affinity} if affinity else {}
    new = with_requirement(spec, IN_A)
    assert new["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == terms
    if affinity:
        assert {k: v for k, v in new.items() if k != "nodeAffinity"} == {
            k: v for k, v in affinity.items() if k != "nodeAffinity"}
        assert new["nodeAffinity"].get("preferredDuringSchedulingIgnoredDuringExecution") == \
            affinity["nodeAffinity"].get("preferredDuringSchedulingIgnoredDuringExecution")
    assert with_requirement({"affinity": new}, IN_A) is None  # held already: no change
    assert spec == ({"affinity": affinity} if affinity else {})  # the pod given is left as it was


def test_a_gated_pod_gets_one_patch_op_and_none_once_it_holds_it():
    [op] = requirement_patch({}, IN_A)
    assert (op["op"], op["path"]) == ("add", "/spec/affinity")
    assert requirement_patch({"affinity": op["value"]}, IN_A) == []
    assert requirement_patch({}, None) == []


def test_a_gpujob_pod_carries_its_data_limit_and_its_templates_affinity():
    template = {"spec": {"containers": [{"name": "main", "image": "t:1"}],
                         "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                             "nodeSelectorTerms": [GPU_TERM]}}}}}
    gpujob = job(template=template, dataSources=[{"name": "d", "kind": "zone", "location": "zone-a"}],
                 network={"maxDataDistance": "zone"})
    pod = replica_pod(gpujob, 0, 0, gated=True, near_data=data_requirement(gpujob.needs, NODES, DEFAULT))
    [term] = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    assert term["matchExpressions"] == [*GPU_TERM["matchExpressions"], *IN_A.expressions]
    as_written = gpujob.template["spec"]["affinity"]["nodeAffinity"]
    assert as_written["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [GPU_TERM]
    assert "affinity" not in replica_pod(job(), 0, 0, gated=True)["spec"]
