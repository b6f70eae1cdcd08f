"""Domain aggregates on a real shaped network: agents in network namespaces, a real Prometheus and the
extender with two topology levels read from labels netsched does not own. A pair nobody probed is
answered by the median of its racks' measurements, and the filter reason and the placement
explanation say so; an aggregate is bounded by the NIC link speed each agent reads and exports; a gang
limited to a level stays in its peers' domain of it. The same placement by the real kube-scheduler:
test_topology_levels.py (KWOK nodes have no network to probe). Needs root (ip netns, tc)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from netsched.api.labels import GPU_RESOURCE, JOB_LABEL, MAX_PEER_DISTANCE
from netsched.api.topology import Topology
from netsched.datagen.testbed import Testbed, start_prometheus, stop
from netsched.devcluster.processes import free_port
from netsched.devcluster.wait import poll
from netsched.extender.engine import Extender
from netsched.extender.protocol import parse_args
from netsched.extender.read_model import ReadModel
from netsched.telemetry.aggregates import DOMAIN_TO_DOMAIN, MIN_SAMPLES, NONE
from netsched.telemetry.prometheus import PrometheusFeed
from netsched.telemetry.store import TelemetryStore

TOPOLOGY = Topology.parse("block=example.com/block,rack=example.com/rack")
RACK = TOPOLOGY.names.index("rack")
# Rack r1 (block b1): a1, a2, a3 probe p, a4 and a5 probe only a1. Rack r2 (block b1): p. Block b2: z1
# probes p; z2 runs no agent. So a4 -> p and a5 -> p are never measured in either direction, rack r1 ->
# rack r2 has three samples and block b2 -> block b1 one. a5's agent is told its NIC runs at
# SLOW_NIC_MBPS (as where a driver reports none); the others read theirs from /sys (a veth's).
PLACES = {"a1": ("b1", "r1"), "a2": ("b1", "r1"), "a3": ("b1", "r1"), "a4": ("b1", "r1"),
          "a5": ("b1", "r1"), "p": ("b1", "r2"), "z1": ("b2", "r3"), "z2": ("b2", "r3")}
PEERS = {"a1": ["p"], "a2": ["p"], "a3": ["p"], "a4": ["a1"], "a5": ["a1"], "p": ["z1"], "z1": ["p"]}
SITES = tuple(PEERS)
RATES = {("a1", "p"): 40, ("a2", "p"): 40, ("a3", "p"): 40, ("a4", "a1"): 80, ("a5", "a1"): 80,
         ("p", "z1"): 20}  # Mbit/s
SLOW_NIC_MBPS = 10


@pytest.fixture(scope="module")
def testbed():
    net = Testbed(SITES, RATES, prefix="nsd35", subnet="10.77.35").up()
    try:
        yield net
    finally:
        net.down()


@pytest.fixture(scope="module")
def prometheus(testbed, tmp_path_factory):
    """The agents in their namespaces and a Prometheus scraping them: its URL."""
    tmp, net, server = tmp_path_factory.mktemp("telemetry-domains"), testbed, None
    try:
        for site in SITES:
            peers = [f"--peer={p}={net.ip(p)}:9102" for p in PEERS[site]]
            told = [f"--nic-speed-mbps={SLOW_NIC_MBPS}"] if site == "a5" else []
            argv = [sys.executable, "-m", "netsched", "agent", f"--node-name={site}", "--port=9101",
                    "--probe-port=9102", "--interval=2", "--budget-bytes-per-minute=536870912", *peers, *told]
            net.start(site, argv, tmp / f"agent-{site}.log")
        port = free_port()
        server = start_prometheus([f"{net.ip(s)}:9101" for s in SITES], tmp / "prometheus", port)
        yield f"http://127.0.0.1:{port}"
    finally:
        if server:
            stop(server)


@pytest.fixture(scope="module")
def store(prometheus):
    """The store fed from Prometheus until the three probes of rack r1 -> p are in."""
    s = TelemetryStore()
    feed = PrometheusFeed(prometheus, s)
    poll(lambda: feed.refresh() >= 0 and all(s.link(a, "p") for a in ("a1", "a2", "a3"))
         and "a5" in s.snapshot().speeds, 90, "a1, a2 and a3 -> p and a5's NIC speed in Prometheus")
    feed.refresh()
    for node in ("a4", "a5"):
        assert s.link(node, "p") is None and s.link("p", node) is None  # never probed, either way
    return s


def _extender(store: TelemetryStore) -> Extender:
    cache = ReadModel(topology=TOPOLOGY)
    cache.replace("nodes", [_node(n) for n in PLACES])
    cache.replace("pods", [_pod("peer", "p")])
    cache.replace("packingplans", [])
    return Extender(cache, telemetry=store)


def test_a_pair_never_probed_is_answered_by_its_racks_median(store):
    extender = _extender(store)
    snap = extender.cluster.snapshot("default", "train", telemetry=store)
    links = snap.links("p")
    a4, z2 = snap.table.index["a4"], snap.table.index["z2"]
    assert links.origin[a4] == DOMAIN_TO_DOMAIN + RACK and links.samples[a4] == MIN_SAMPLES
    measured = sorted(store.link(a, "p").bandwidth_mbps for a in ("a1", "a2", "a3"))
    assert links.bw[a4] == measured[1]  # the median of rack r1's three probes
    assert 0.5 * 40 <= links.bw[a4] <= 1.25 * 40  # what the shaper lets through between the racks
    assert links.origin[z2] == NONE  # block b2 -> block b1: one sample, too few


def test_the_filter_and_the_explanation_say_the_value_is_an_aggregate(store):
    extender = _extender(store)
    pod = _pod("next", None, {"netsched.io/min-peer-bandwidth-mbps": "5"})
    out = extender.filter(parse_args({"Pod": pod, "NodeNames": ["a4", "z2"]}))
    assert out.passed == ["a4"]  # its aggregate, some 40 Mbit/s, is over 5
    reasons = {**out.failed, **out.unresolvable}
    assert "no fresh measurement from z2 to peer p nor enough between their domains" in reasons["z2"]
    decision = extender.decisions.bound("uid-next", "a4")
    assert decision is not None
    summary = decision.summary()
    assert "to p (median of 3 probes rack r1 -> rack r2)" in summary, summary
    chosen = decision.as_dict()["top"][0]  # what /debug/decisions shows
    assert chosen["node"] == "a4" and "median of 3 probes rack r1 -> rack r2" in chosen["links"][0]


def test_each_agent_exports_its_nics_link_speed_and_an_aggregate_is_bounded_by_it(testbed, store):
    speeds = {node: mbps for node, (mbps, _) in store.snapshot().speeds.items()}
    # a1's agent read the speed of the interface its probes to p leave by: the namespace's eth0
    read = subprocess.run(["ip", "netns", "exec", testbed.namespace("a1"), "cat",
                           "/sys/class/net/eth0/speed"], capture_output=True, text=True)
    real = float(read.stdout) if read.returncode == 0 and float(read.stdout or -1) > 0 else None
    assert speeds.get("a1") == real and speeds["a5"] == SLOW_NIC_MBPS
    snap = _extender(store).cluster.snapshot("default", "train", telemetry=store)
    links = snap.links("p")
    a4, a5 = snap.table.index["a4"], snap.table.index["a5"]
    # both are answered by rack r1's median towards p (some 40 Mbit/s); a5's NIC passes no more than
    # its link speed, slower than any NIC behind that median
    assert links.origin[a5] == links.origin[a4] == DOMAIN_TO_DOMAIN + RACK
    assert links.bw[a4] > 2 * SLOW_NIC_MBPS and np.isnan(links.cap[a4])
    assert links.bw[a5] == links.cap[a5] == SLOW_NIC_MBPS
    pod = _pod("next", None, {"netsched.io/min-peer-bandwidth-mbps": str(2 * SLOW_NIC_MBPS)})
    out = _extender(store).filter(parse_args({"Pod": pod, "NodeNames": ["a4", "a5"]}))
    assert out.passed == ["a4"]
    assert ("a5 to peer p measures 10 Mbit/s (median of 3 probes rack r1 -> rack r2, lowered to what the "
            "slower NIC's link speed allows), min allowed 20") in {**out.failed, **out.unresolvable}["a5"]


@pytest.mark.parametrize("level, inside", [("rack", ["p"]), ("block", ["a1", "a2", "a3", "a4", "a5", "p"])])
def test_a_gang_limited_to_a_configured_level_stays_in_its_peers_domain(store, level, inside):
    extender = _extender(store)
    pod = _pod("next", None, {MAX_PEER_DISTANCE: level})
    out = extender.filter(parse_args({"Pod": pod, "NodeNames": sorted(PLACES)}))
    # its peer runs on p, rack r2 of block b1: every node outside that domain is refused, saying why; the
    # filter passes a shortlist of the best of the others
    refused = {**out.failed, **out.unresolvable}
    assert sorted(refused) == sorted(set(PLACES) - set(inside))
    assert out.passed and set(out.passed) <= set(inside)
    assert all(f"not in the same {level} as job train's pods" in r for r in refused.values()), refused


def test_a_level_the_cluster_lacks_is_refused_naming_the_ones_it_has(store):
    out = _extender(store).filter(parse_args({"Pod": _pod("next", None, {MAX_PEER_DISTANCE: "zone"}),
                                              "NodeNames": sorted(PLACES)}))
    reasons = {**out.failed, **out.unresolvable}
    assert not out.passed and sorted(reasons) == sorted(PLACES)
    assert all("'zone' is not a topology level of this cluster: write one of node, rack, block" in r
               for r in reasons.values()), reasons


def _node(name: str) -> dict:
    block, rack = PLACES[name]
    labels = {"example.com/block": block, "example.com/rack": rack}
    alloc = {GPU_RESOURCE: "8", "cpu": "96", "memory": "1024Gi", "pods": "110"}
    return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": alloc}}


def _pod(name: str, node: str | None, annotations: dict | None = None) -> dict:
    spec = {"containers": [{"name": "m", "resources": {"requests": {GPU_RESOURCE: "2"}}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                         "labels": {JOB_LABEL: "train"}, "annotations": annotations or {}},
            "spec": spec, "status": {"phase": "Running" if node else "Pending"}}
