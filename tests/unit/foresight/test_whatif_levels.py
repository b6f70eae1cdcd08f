"""whatif and why speak the cluster's topology levels: --topology (or $NETSCHED_TOPOLOGY), the room
table per level and each placement row's domains."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from netsched.api.events import rfc3339
from netsched.api.topology import Topology
from netsched.foresight.whatif import Cluster, WhatIfError, render, what_if
from netsched.testing.builders import NOW, make_gpujob, make_node

LEVELS = Topology.parse("block=example.com/block,subblock=example.com/subblock,host=example.com/host")
NODES = [make_node(f"n{i}", labels={"example.com/block": "b1", "example.com/subblock": f"s{i // 2}",
                                     "example.com/host": f"h{i}"}) for i in range(4)]


def manifest(**spec) -> dict:
    body = make_gpujob("next", replicas=2, gpus=8, manifest=True, **spec)
    body["metadata"] |= {"namespace": "ml", "uid": "whatif", "creationTimestamp": rfc3339(NOW)}
    return body


def test_the_room_table_is_per_narrowest_level_and_placement_rows_name_each_levels_domain():
    answer = what_if(Cluster(NODES, [], [], [], [], topology=LEVELS), manifest(), [], now=NOW)
    assert {d["level"] for d in answer["domains"]} == {"host"}
    [row, *_] = answer["placement"]
    assert row["domains"] == {"block": "b1", "subblock": f"s{int(row['node'][1]) // 2}",
                              "host": f"h{row['node'][1]}"}
    assert f"{row['node']} ×1 (h{row['node'][1]}, s{int(row['node'][1]) // 2}, b1)" in render(answer, NOW)


def test_a_gang_within_a_subblock_is_placed_in_one_and_a_rack_is_refused_naming_the_levels():
    answer = what_if(Cluster(NODES, [], [], [], [], topology=LEVELS),
                     manifest(network={"maxPeerDistance": "subblock"}), [], now=NOW)
    assert len({p["domains"]["subblock"] for p in answer["placement"]}) == 1
    assert {d["level"] for d in answer["domains"]} == {"subblock"}
    with pytest.raises(WhatIfError) as refused:
        what_if(Cluster(NODES, [], [], [], [], topology=LEVELS),
                manifest(network={"maxPeerDistance": "rack"}), [], now=NOW)
    assert str(refused.value) == ("spec.network.maxPeerDistance: 'rack' is not a topology level of this "
                                  "cluster: write one of node, host, subblock, block")


@pytest.mark.parametrize("command", ["whatif", "why"])
@pytest.mark.parametrize("how", ["flag", "env"])
def test_a_topology_that_is_none_is_one_line_and_exit_2(command, how, tmp_path):
    args = [sys.executable, "-m", "netsched", command, *(["-f", "-"] if command == "whatif" else ["j"])]
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "none")}
    if how == "flag":
        args.append("--topology=rack")
    else:
        env["NETSCHED_TOPOLOGY"] = "rack=,zone"
    done = subprocess.run(args, capture_output=True, text=True, env=env, input="", timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert lines[-1].startswith(f"netsched {command}: error: argument --topology: topology 'rack': name a "
                                "preset" if how == "flag" else
                                f"netsched: error: {command}: $NETSCHED_TOPOLOGY: topology level 'rack=': "
                                "write NAME=LABEL"), lines
    assert how == "flag" or len(lines) == 1
