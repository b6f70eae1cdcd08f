from netsched.api.topology import Topology
from netsched.extender.snapshot import NodeTable

LEVELS = Topology.parse("block=example.com/block,rack=example.com/rack")


def facts(**labels):
    labels = {f"example.com/{k}": v for k, v in labels.items()}
    return {"gpus": 8, "gpu_product": None, "cpu": 1.0, "memory": 1.0,
            "levels": LEVELS.path(labels)}


def test_domains_follow_the_configured_levels():
    nodes = {"a": facts(block="b1", rack="r1"), "b": facts(block="b1", rack="r1"),
             "c": facts(block="b2", rack="r1"), "d": facts(block="b1"), "e": facts(block="b1")}
    table = NodeTable.build(nodes, LEVELS)
    block, rack = table.domains
    assert len(set(block[:2])) == 1 and block[0] != block[2] and block[3] == block[0]
    assert rack[0] == rack[1] and rack[2] != rack[0]  # rack r1 of another block is another rack
    assert rack[3] != rack[4] and len(set(rack)) == 4  # unlabelled: each alone
    assert table.domain_names[1][rack[0]] == "r1" and table.domain_names[1][rack[3]] is None

