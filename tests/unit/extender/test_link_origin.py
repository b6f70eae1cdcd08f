"""Filter reasons and placement explanations say where a link value came from."""

from __future__ import annotations

import numpy as np

from netsched.api.topology import Topology
from netsched.extender.engine import Extender, run_filters
from netsched.extender.explain import Candidate, Decision
from netsched.extender.link_origin import link_notes
from netsched.extender.plugin import Request
from netsched.extender.plugins import FILTERS
from netsched.extender.protocol import PodRef
from netsched.extender.read_model import ReadModel
from netsched.telemetry import store as store_module
from netsched.telemetry.aggregates import Aggregates
from netsched.telemetry.store import TelemetryStore
from netsched.testing.builders import make_node, make_pod
from netsched.testing.extender import args, cache_of

TOPOLOGY = Topology.parse("block=example.com/block,rack=example.com/rack")
RACKS = {"gpu-0": "r1", "gpu-1": "r1", "gpu-2": "r1", "gpu-5": "r1", "gpu-3": "r4", "gpu-4": "r4"}
NODES = [make_node(n, labels={"example.com/block": "b1" if r == "r1" else "b2", "example.com/rack": r})
         for n, r in RACKS.items()]


def _snapshot(telemetry: TelemetryStore):
    cache = cache_of(NODES, [make_pod("r0", "gpu-3", job="train")], topology=TOPOLOGY)
    return cache.snapshot("ml", "train", telemetry=telemetry)


def _telemetry() -> TelemetryStore:
    store = TelemetryStore(max_age=60)
    for src, bw in (("gpu-0", 9000), ("gpu-1", 9100), ("gpu-2", 9300)):  # rack r1 -> gpu-4 (rack r4)
        store.record(src, "gpu-4", rtt_ms=0.4, bandwidth_mbps=bw)
    store.record("gpu-3", "gpu-2", rtt_ms=0.3, bandwidth_mbps=50)  # gpu-2 -> gpu-3 only the other way
    return store


def test_a_limit_checked_on_an_aggregate_or_reverse_pair_says_so():
    snap = _snapshot(_telemetry())
    idx = np.array([snap.table.index[n] for n in RACKS])
    req = Request(PodRef("ml", "p", "", 1, "train"), snap,
                  annotations={"netsched.io/min-peer-bandwidth-mbps": "9500"})
    got = {list(RACKS)[pos]: why for pos, why in run_filters(FILTERS, req, idx).items()}
    assert got["gpu-5"] == ("netsched: gpu-5 to peer gpu-3 measures 9100 Mbit/s (median of 3 probes "
                            "rack r1 -> rack r4), min allowed 9500 (netsched.io/min-peer-bandwidth-mbps)")
    assert "measures 50 Mbit/s (measured gpu-3 -> gpu-2)" in got["gpu-2"]
    assert "no fresh measurement from gpu-4 to peer gpu-3 nor enough between their domains" in got["gpu-4"]


def test_the_explanation_names_the_aggregate_a_score_read():
    snap = _snapshot(_telemetry())
    snap.links("gpu-3")  # what the peers scorer reads for a pod of job train (its peer is on gpu-3)
    notes = link_notes(snap.table, snap.links_read(), snap.table.index["gpu-5"])
    assert notes == ["bandwidth 9.1 Gbit/s, RTT 0.40 ms to gpu-3 (median of 3 probes rack r1 -> rack r4)"]
    decision = Decision("ml", "p", "uid", "train", "topology", 6, {}, 0,
                        [Candidate("gpu-5", 8, {"peers": 0.7}, notes)], node="gpu-5")
    assert decision.summary().startswith("netsched placed the pod on gpu-5 (score 8/10: peers 0.70); "
                                         "bandwidth 9.1 Gbit/s, RTT 0.40 ms to gpu-3 (median of 3 probes")


def test_aggregates_are_built_with_each_node_table_and_requests_only_read_them(monkeypatch):
    builds = []

    class Counting(Aggregates):
        @classmethod
        def build(cls, *args):
            builds.append(args[1])  # the node index it is for
            return Aggregates.build(*args)

    monkeypatch.setattr(store_module, "Aggregates", Counting)
    store = _telemetry()
    cache = ReadModel(topology=TOPOLOGY)
    extender = Extender(cache, telemetry=store)
    cache.replace("nodes", NODES)  # publishes the node table, and with it the aggregates
    cache.replace("pods", [make_pod("r0", "gpu-3", job="train")])
    cache.replace("packingplans", [])
    table = cache.snapshot().table
    assert builds == [table.index]
    pod = make_pod("p", job="train", annotations={"netsched.io/min-peer-bandwidth-mbps": "9500"})
    extender.filter(args(pod, list(RACKS)))
    assert builds == [table.index]  # the request read them
    store.record("gpu-1", "gpu-3", rtt_ms=0.5, bandwidth_mbps=7000)
    store.refresh_aggregates()  # what the feed does after each write
    assert builds == [table.index] * 2
