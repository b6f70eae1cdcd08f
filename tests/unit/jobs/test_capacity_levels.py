"""Fit, placement and room per domain with a topology of three levels that are not netsched's own."""

from __future__ import annotations

from netsched.api.topology import Topology
from netsched.jobs.capacity import domain_room, gang_fit, never_fits, node_room, placement
from netsched.jobs.workload import NetworkNeeds
from netsched.testing.builders import Gang, make_node

GPU = "nvidia.com/gpu"
LEVELS = Topology.parse("block=example.com/block,subblock=example.com/subblock,host=example.com/host")


def node(name: str, block: str, subblock: str, host: str | None = None, gpus: int = 8):
    labels = {"example.com/block": block, "example.com/subblock": subblock}
    if host:
        labels["example.com/host"] = host
    return node_room(make_node(name, gpus=gpus, labels=labels))


# block b1: subblocks s1 (two nodes, one host) and s2 (one node); block b2: s3 (three nodes) and s4 (one)
NODES = [node("n0", "b1", "s1", "h1"), node("n1", "b1", "s1", "h1"), node("n2", "b1", "s2"),
         node("n3", "b2", "s3"), node("n4", "b2", "s3"), node("n5", "b2", "s3"), node("n6", "b2", "s4")]


def gang(needed: int, peer: str | None = None) -> Gang:
    return Gang({GPU: 8}, needed, needs=NetworkNeeds(peer))


def test_a_gang_within_a_subblock_is_released_into_the_roomiest_subblock_by_its_label():
    result = gang_fit(NODES, {}, [], gang(3, "subblock"), LEVELS)
    assert result.fits and result.domain == ("example.com/subblock", "s3")
    assert placement(NODES, {}, gang(3, "subblock"), LEVELS) == {"n3": 1, "n4": 1, "n5": 1}


def test_a_node_without_the_levels_label_is_alone_there():
    # n2 has no host label: the host with the most room is h1 (two nodes), n2 holds one alone
    rooms = domain_room(NODES, {}, gang(1, "host"), "host", LEVELS)
    assert rooms[0] == ("h1", 16.0, 2)
    assert ("n2", 8.0, 1) in rooms


def test_a_gang_too_large_for_any_subblock_is_told_the_next_wider_level_that_holds_it():
    said = never_fits(NODES, gang(4, "subblock"), LEVELS)
    assert said is not None and "the largest subblock holds 3" in said and "maxPeerDistance: block" in said
    waits = gang_fit(NODES, {"n3": {GPU: 8}}, [], gang(3, "subblock"), LEVELS)
    assert not waits.fits and waits.why == "NoDomainLargeEnough"
    assert "would fit now with maxPeerDistance: block" in waits.message


def test_data_within_a_block_of_a_subblock():
    within = Gang({GPU: 8}, 4, needs=NetworkNeeds(None, "block", ("subblock", "s3")))
    assert placement(NODES, {}, within, LEVELS) == {"n3": 1, "n4": 1, "n5": 1, "n6": 1}
    busy = gang_fit(NODES, {"n6": {GPU: 8}}, [], within, LEVELS)
    assert not busy.fits and "3 fit now" in busy.message and "on 4 eligible of 7 nodes" in busy.message
