import pytest

from netsched.extender.plugin import InvalidNeeds
from netsched.extender.plugins.peer_distance import PeerDistance
from netsched.extender.plugins.peer_distance.annotation import max_peer_distance
from netsched.testing.extender import plugin_request, pod

RACK = {"netsched.io/max-peer-distance": "rack"}
ZONE = {"netsched.io/max-peer-distance": "zone"}
PEER_A1 = [pod("r0", "a1-0", job="train")]


@pytest.mark.parametrize("annotations, pods, rejected", [
    pytest.param({}, PEER_A1, set(), id="no-annotation"),
    pytest.param(RACK, [], set(), id="no-peers-yet-anywhere-goes"),
    pytest.param(RACK, PEER_A1, {"a2-0", "b1-0"}, id="rack"),
    pytest.param(ZONE, PEER_A1, {"b1-0"}, id="zone"),
    pytest.param({"netsched.io/max-peer-distance": "node"}, PEER_A1, {"a1-1", "a2-0", "b1-0"}, id="node"),
    pytest.param(RACK, [pod("x", "b1-0", job="train", ns="other")], set(), id="other-namespace-is-no-peer"),
])
def test_peer_distance(annotations, pods, rejected):
    req, idx, names = plugin_request(annotations, pods)
    got = PeerDistance().reject(req, idx)
    assert {names[pos] for pos in got} == rejected
    assert PeerDistance().binds(req) == bool(annotations)


@pytest.mark.parametrize("annotations, parsed", [
    pytest.param({}, None, id="unset"),
    pytest.param(RACK, "rack", id="rack"),
    pytest.param(ZONE, "zone", id="zone"),
])
def test_max_peer_distance_annotation(annotations, parsed):
    assert max_peer_distance(annotations) == parsed


def test_a_max_peer_distance_that_is_no_distance_names_the_choices():
    with pytest.raises(InvalidNeeds, match="'galaxy' is not a topology level of this cluster: "
                                           "write one of node, rack, zone"):
        max_peer_distance({"netsched.io/max-peer-distance": "galaxy"})
