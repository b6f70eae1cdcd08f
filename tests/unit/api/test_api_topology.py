import pytest

from netsched.api.labels import RACK_LABEL, ZONE_LABEL
from netsched.api.topology import DEFAULT, PRESETS, BadTopology, Topology, UnknownLevel

BLOCKS = Topology.parse("block=example.com/block,subblock=example.com/subblock,host=example.com/host")


def node(name, **labels):
    return name, {f"example.com/{k}": v for k, v in labels.items()}


def test_default_is_the_zone_rack_scale():
    assert DEFAULT.limits == ("node", "rack", "zone")
    assert DEFAULT.distances == {"node": 0, "rack": 1, "zone": 2, "far": 3}
    assert DEFAULT.labels == (ZONE_LABEL, RACK_LABEL)
    assert Topology.parse("netsched") == DEFAULT
    assert Topology.parse(str(BLOCKS)) == BLOCKS


def test_distance_is_the_narrowest_shared_level():
    a = node("a", block="b1", subblock="s1", host="h1")
    assert BLOCKS.distance(a, a) == 0
    assert BLOCKS.distance(a, node("b", block="b1", subblock="s1", host="h1")) == 1
    assert BLOCKS.distance(a, node("b", block="b1", subblock="s1", host="h2")) == 2
    assert BLOCKS.distance(a, node("b", block="b1", subblock="s2", host="h1")) == 3  # h1 of another subblock
    assert BLOCKS.distance(a, node("b", block="b2", subblock="s1", host="h1")) == BLOCKS.far == 4


def test_a_node_missing_a_label_is_alone_at_that_level():
    a, b = node("a", block="b1", subblock="s1"), node("b", block="b1", subblock="s1")
    assert BLOCKS.distance(a, b) == 2  # neither has a host: not the same host
    assert BLOCKS.path(a[1])[2] is None
    assert BLOCKS.domain(a[1], "subblock") == "s1"
    assert BLOCKS.domain(a[1], "host") is None
    # a wider label missing reads as empty: two nodes of rack r1 without zones share the rack
    assert DEFAULT.distance(("a", {RACK_LABEL: "r1"}), ("b", {RACK_LABEL: "r1"})) == 1


def test_level_names_map_to_the_models_fixed_scale():
    assert [DEFAULT.model_scale(d) for d in range(4)] == [0.0, 1.0, 2.0, 3.0]
    assert [BLOCKS.model_scale(d) for d in range(5)] == [0.0, 1.0, 1.5, 2.0, 3.0]
    one = Topology.parse("clique=nvidia.com/gpu.clique")
    assert [one.model_scale(d) for d in range(3)] == [0.0, 1.0, 3.0]


def test_unknown_level_names_the_configured_ones():
    with pytest.raises(UnknownLevel, match="'rack' is not a topology level of this cluster: write one of "
                                           "node, host, subblock, block"):
        BLOCKS.distance_of("rack")
    assert BLOCKS.label_of("host") == "example.com/host"


@pytest.mark.parametrize("text, message", [
    ("galaxy", "name a preset"),
    ("rack=", "write NAME=LABEL"),
    ("node=example.com/n", "not one of node, far, endpoint"),
    ("Rack=example.com/rack", "lowercase"),
    ("rack=example.com/rack,row=example.com/rack", "label 'example.com/rack' appears twice"),
    ("rack=not a label", "not a node label key"),
    (",".join(f"l{i}=example.com/l{i}" for i in range(7)), "give 1 to 6"),
])
def test_bad_settings_say_what_to_write(text, message):
    with pytest.raises(BadTopology, match=message):
        Topology.parse(text)


def test_presets_parse():
    for name, levels in PRESETS.items():
        assert Topology.parse(name).levels == levels
