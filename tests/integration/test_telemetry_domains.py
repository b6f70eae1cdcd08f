"""Domain aggregates on a real shaped network: agents in network namespaces, a real Prometheus and the
extender with two topology levels read from labels netsched does not own. A pair nobody probed is
answered by the median of its racks' measurements, and the filter reason and the placement
explanation say so. Needs root (ip netns, tc)."""

from __future__ import annotations

import sys

import pytest

from netsched.api.labels import GPU_RESOURCE, JOB_LABEL
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
# Rack r1 (block b1): a1, a2, a3 probe p, a4 probes only a1. Rack r2 (block b1): p. Block b2: z1 probes
# p; z2 runs no agent. So a4 -> p is never measured in either direction, rack r1 -> rack r2 has three
# samples and block b2 -> block b1 one.
PLACES = {"a1": ("b1", "r1"), "a2": ("b1", "r1"), "a3": ("b1", "r1"), "a4": ("b1", "r1"),
          "p": ("b1", "r2"), "z1": ("b2", "r3"), "z2": ("b2", "r3")}
PEERS = {"a1": ["p"], "a2": ["p"], "a3": ["p"], "a4": ["a1"], "p": ["z1"], "z1": ["p"]}
SITES = tuple(PEERS)
RATES = {("a1", "p"): 40, ("a2", "p"): 40, ("a3", "p"): 40, ("a4", "a1"): 80, ("p", "z1"): 20}  # Mbit/s


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    """The agents in their namespaces and a Prometheus scraping them: its URL."""
    tmp = tmp_path_factory.mktemp("telemetry-domains")
    net, server = Testbed(SITES, RATES, prefix="nsd35", subnet="10.77.35").up(), None
    try:
        for site in SITES:
            peers = [f"--peer={p}={net.ip(p)}:9102" for p in PEERS[site]]
            argv = [sys.executable, "-m", "netsched", "agent", f"--node-name={site}", "--port=9101",
                    "--probe-port=9102", "--interval=2", "--budget-bytes-per-minute=536870912", *peers]
            net.start(site, argv, tmp / f"agent-{site}.log")
        port = free_port()
        server = start_prometheus([f"{net.ip(s)}:9101" for s in SITES], tmp / "prometheus", port)
        yield f"http://127.0.0.1:{port}"
    finally:
        if server:
            stop(server)
        net.down()


@pytest.fixture(scope="module")
def store(prometheus):
    """The store fed from Prometheus until the three probes of rack r1 -> p are in."""
    s = TelemetryStore()
    feed = PrometheusFeed(prometheus, s)
    poll(lambda: feed.refresh() >= 0 and all(s.link(a, "p") for a in ("a1", "a2", "a3")), 90,
         "a1, a2 and a3 -> p in Prometheus")
    feed.refresh()
    assert s.link("a4", "p") is None and s.link("p", "a4") is None  # never probed, either way
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
