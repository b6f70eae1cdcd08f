"""The extender placing by levels that are not netsched's: block, subblock and host from labels of the
cluster's own (as on GKE), with nodes missing some of them."""

import numpy as np
import pytest

from netsched.api.topology import Topology
from netsched.extender.engine import Extender
from netsched.extender.model_features import feature_values
from netsched.extender.plugins.data import DataCloseness
from netsched.extender.plugins.data_distance import DataDistance
from netsched.extender.plugins.job_room import JobRoom
from netsched.extender.plugins.peer_distance import PeerDistance
from netsched.extender.plugins.peers import PeerCloseness
from netsched.models.heuristic import CLOSENESS
from netsched.testing.extender import args, cache_of, node, plugin_request, pod

LEVELS = Topology.parse("block=example.com/block,subblock=example.com/subblock,host=example.com/host")


def gke_node(name: str, block: str | None, subblock: str | None = None, host: str | None = None) -> dict:
    """A node labelled only by the three levels (no zone or rack label), each given one set."""
    labelled = node(name)
    labels = labelled["metadata"]["labels"]
    for key in ("topology.kubernetes.io/zone", "netsched.io/rack"):
        labels.pop(key, None)
    labels.update({f"example.com/{k}": v for k, v in (("block", block), ("subblock", subblock),
                                                      ("host", host)) if v})
    return labelled


NODES = [
    gke_node("h1a", "b1", "s1", "h1"),  # two nodes of one host
    gke_node("h1b", "b1", "s1", "h1"),
    gke_node("h2", "b1", "s1", "h2"),  # same subblock, another host
    gke_node("s2", "b1", "s2", "h3"),  # same block, another subblock
    gke_node("far", "b2", "s1", "h1"),  # subblock s1 and host h1 of another block: other domains
    gke_node("nohost", "b1", "s1"),  # no host label: alone at that level, still in subblock s1
    gke_node("nolabels", None),  # no label at all: near nothing
]
PEER = [pod("r0", "h1a", job="train")]


def request(annotations, pods=(), gpus=2):
    return plugin_request(annotations, pods, nodes=NODES, gpus=gpus, topology=LEVELS)


@pytest.mark.parametrize("level, allowed", [
    ("node", {"h1a"}),
    ("host", {"h1a", "h1b"}),
    ("subblock", {"h1a", "h1b", "h2", "nohost"}),
    ("block", {"h1a", "h1b", "h2", "s2", "nohost"}),
])
def test_peer_distance_keeps_a_job_inside_its_first_pods_domain_at_the_named_level(level, allowed):
    req, idx, names = request({"netsched.io/max-peer-distance": level}, PEER)
    rejected = PeerDistance().reject(req, idx)
    assert {n for pos, n in enumerate(names) if pos not in rejected} == allowed
    why = rejected[names.index("far")]
    expected = "h1a" if level == "node" else {"host": "h1", "subblock": "s1", "block": "b1"}[level]
    assert f"is not in the same {level} as job train's pods ({expected};" in why


def test_peers_are_closer_the_narrower_the_level_they_share():
    req, idx, names = request({}, PEER)
    value = dict(zip(names, PeerCloseness().score(req, idx), strict=True))
    assert value["h1a"] == CLOSENESS[0] and value["h1b"] == CLOSENESS[1]  # the narrowest level: a rack's
    assert value["s2"] == CLOSENESS[2]  # the widest level: a zone's
    assert CLOSENESS[2] < value["h2"] < CLOSENESS[1]  # a level between: between them
    assert value["far"] == value["nolabels"] == 0.0


@pytest.mark.parametrize("source, level, allowed", [
    ("subblock:s2", "subblock", {"s2"}),
    ("subblock:s2", "block", {"h1a", "h1b", "h2", "s2", "nohost"}),
    ("host:h1", "host", {"h1a", "h1b", "far"}),  # host h1 of both blocks: the data is on each
    ("block:b2", "block", {"far"}),
    ("node:h2", "subblock", {"h1a", "h1b", "h2", "nohost"}),
])
def test_data_distance_by_a_levels_domain(source, level, allowed):
    req, idx, names = request({"netsched.io/data-source": source, "netsched.io/max-data-distance": level})
    rejected = DataDistance().reject(req, idx)
    assert {n for pos, n in enumerate(names) if pos not in rejected} == allowed
    assert f"is not within the {level} of the input data ({source.replace(':', ' ')};" in next(
        iter(rejected.values()))


def test_data_in_a_domain_is_ideal_on_its_nodes_and_less_the_wider_the_level_shared():
    req, idx, names = request({"netsched.io/data-source": "subblock:s2"})
    value = dict(zip(names, DataCloseness().score(req, idx), strict=True))
    assert value["s2"] == 1.0
    assert 0 < value["h1a"] == value["nohost"] < 1 and value["far"] == value["nolabels"] == 0.0


def test_a_jobs_first_pod_goes_where_its_narrowest_domain_has_room():
    nodes = [gke_node(name, "b1", "s1", host) for name, host in (("a", "h1"), ("b", "h1"), ("c", "h2"))]
    busy = [pod("x", "c", gpus=8)]  # host h2 has no room beside node c
    req, idx, names = plugin_request({"netsched.io/job-gpus": "16"}, busy, job="train", gpus=8, nodes=nodes,
                                     topology=LEVELS)
    room = dict(zip(names, JobRoom().score(req, idx), strict=True))
    assert room["a"] == room["b"] > room["c"]


@pytest.mark.parametrize("annotations, message", [
    ({"netsched.io/max-peer-distance": "rack"},
     "netsched.io/max-peer-distance=rack: 'rack' is not a topology level of this cluster: "
     "write one of node, host, subblock, block"),
    ({"netsched.io/data-source": "zone:zone-a"},
     "kind one of node, host, subblock, block, endpoint ('zone' is not a topology level of this cluster)"),
    ({"netsched.io/data-source": "block:b1", "netsched.io/max-data-distance": "zone"},
     "netsched.io/max-data-distance=zone: 'zone' is not a topology level of this cluster"),
])
def test_a_level_the_cluster_does_not_have_fails_every_node_naming_the_levels_it_has(annotations, message):
    names = [n["metadata"]["name"] for n in NODES]
    ext = Extender(cache_of(NODES, PEER, topology=LEVELS))
    out = ext.filter(args(pod("p", job="train", annotations=annotations), names))
    assert out.passed == [] and set(out.unresolvable) == set(names)
    assert message in out.unresolvable["h1a"]


def test_the_same_annotations_pass_with_levels_of_those_names():
    names = [n["metadata"]["name"] for n in NODES]
    ext = Extender(cache_of(NODES, PEER, topology=LEVELS), shortlist=0)
    host = {"netsched.io/max-peer-distance": "host"}
    out = ext.filter(args(pod("p", job="train", annotations=host), names))
    assert set(out.passed) == {"h1a", "h1b"}
    assert np.all([why.startswith("netsched: ") for why in out.unresolvable.values()])


def test_the_model_reads_distances_on_its_fixed_scale_whatever_the_depth():
    req, idx, names = request({"netsched.io/data-source": "subblock:s2"}, PEER)
    features = feature_values(req, idx)
    at = {n: i for i, n in enumerate(names)}
    data = features["data_distance"]
    # s2 is in the data's subblock: the narrowest level the data is placed at is a level between, 1.5
    assert (data[at["s2"]], data[at["h1a"]], data[at["far"]]) == (1.5, 2.0, 3.0)
    assert features["data_scope"] == 1.5
    assert features["peer_frac_node"][at["h1a"]] == 1.0 and features["peer_frac_rack"][at["h1b"]] == 1.0
    assert features["peer_frac_zone"][at["s2"]] == 1.0
    assert features["rack_free_gpus"][at["h1a"]] == 16 - 2  # host h1's GPUs, less the peer's
