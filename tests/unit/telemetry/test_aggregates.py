"""Domain aggregates: medians per node -> domain and domain -> domain, narrowest level first."""

from __future__ import annotations

import numpy as np
import pytest

from netsched.api.topology import Topology
from netsched.telemetry.aggregates import (
    DOMAIN_TO_DOMAIN,
    MIN_SAMPLES,
    NODE_TO_DOMAIN,
    NONE,
    PAIR,
    REVERSE,
    Aggregates,
    node_domains,
)
from netsched.telemetry.store import TelemetryStore

TOPOLOGY = Topology.parse("block=example.com/block,rack=example.com/rack")
# 2 blocks x 2 racks x 3 nodes: b0 (r0: n0 n1 n2, r1: n3 n4 n5), b1 (r2: n6 n7 n8, r3: n9 n10 n11)
NODES = [f"n{i}" for i in range(12)]
LABELS = {n: {"example.com/block": f"b{i // 6}", "example.com/rack": f"r{i // 3}"}
          for i, n in enumerate(NODES)}


def _store(now: list[float]) -> tuple[TelemetryStore, dict[str, int], np.ndarray]:
    store = TelemetryStore(max_age=100, clock=lambda: now[0])
    index, domains = node_domains(LABELS, TOPOLOGY)
    return store, index, domains


def _answer(store: TelemetryStore, index, domains, target: str):
    return store.snapshot().answer(target, index, domains)


def test_node_domains_follow_the_labels_and_an_unlabelled_node_is_alone():
    index, domains = node_domains({**LABELS, "lone": {"example.com/block": "b0"}}, TOPOLOGY)
    assert domains.shape == (2, 13)
    rack = domains[1]
    assert rack[index["n0"]] == rack[index["n2"]] != rack[index["n3"]]
    assert rack[index["lone"]] not in {rack[index[n]] for n in NODES}
    assert domains[0][index["lone"]] == domains[0][index["n0"]]


def test_a_fresh_pair_wins_and_the_reverse_pair_stands_in_for_an_unmeasured_one():
    now = [0.0]
    store, index, domains = _store(now)
    store.record("n0", "n6", 1.0, 100.0)
    store.record("n6", "n1", 2.0, 200.0)
    got = _answer(store, index, domains, "n6")
    assert got.origin[index["n0"]] == PAIR and got.bw[index["n0"]] == 100.0
    got = _answer(store, index, domains, "n6")  # n1 -> n6 was never measured; n6 -> n1 was
    assert got.origin[index["n1"]] == REVERSE and got.bw[index["n1"]] == 200.0 and got.rtt[index["n1"]] == 2.0
    assert got.origin[index["n2"]] == NONE and np.isnan(got.bw[index["n2"]])


def test_medians_come_from_the_narrowest_level_with_enough_samples():
    now = [0.0]
    store, index, domains = _store(now)
    # rack r0 -> rack r2: three probes from n0 and n1 (bandwidths 100, 300, 200: median 200)
    for src, dst, rtt, bw in (("n0", "n6", 1.0, 100.0), ("n0", "n7", 3.0, 300.0), ("n1", "n8", 2.0, 200.0)):
        store.record(src, dst, rtt, bw)
    got = _answer(store, index, domains, "n8")
    n2 = index["n2"]  # never probed anything: rack r0 -> rack r2
    assert got.origin[n2] == DOMAIN_TO_DOMAIN + 1 and got.samples[n2] == 3
    assert got.bw[n2] == 200.0 and got.rtt[n2] == 2.0
    # n0 -> rack r2 has 2 samples only (< MIN_SAMPLES): n0's answer for n8 is also the rack median
    assert got.origin[index["n0"]] == DOMAIN_TO_DOMAIN + 1
    # one more from n0 makes node -> domain at the rack level: more specific, so it wins
    store.record("n0", "n6", 5.0, 50.0)  # replaces n0 -> n6's 100
    store.record("n0", "n8", 4.0, 400.0)
    got = _answer(store, index, domains, "n7")
    assert got.origin[index["n0"]] == PAIR
    got = _answer(store, index, domains, "n9")  # rack r3: nothing measured; block b1 is
    assert got.origin[index["n0"]] == NODE_TO_DOMAIN + 0 and got.samples[index["n0"]] == 3
    assert got.bw[index["n0"]] == 300.0  # median of 50, 300, 400
    assert got.origin[index["n3"]] == DOMAIN_TO_DOMAIN + 0  # block b0 -> block b1: 4 samples
    assert got.bw[index["n3"]] == pytest.approx((200.0 + 300.0) / 2)  # 50, 200, 300, 400
    # within the target's own rack nothing was measured, and n10 is far from every sample's source
    assert got.origin[index["n10"]] == NONE


def test_too_few_samples_answer_nothing_and_aggregates_age_out():
    now = [0.0]
    store, index, domains = _store(now)
    store.record_many([("n0", f"n{6 + i}", 1.0, 100.0, None) for i in range(MIN_SAMPLES - 1)])
    got = _answer(store, index, domains, "n8")
    assert got.origin[index["n1"]] == NONE
    store.record("n1", "n7", 1.0, 100.0)
    assert _answer(store, index, domains, "n8").origin[index["n2"]] == DOMAIN_TO_DOMAIN + 1
    now[0] = 101.0  # every sample older than max_age: the cells go with them
    got = _answer(store, index, domains, "n8")
    assert (got.origin == NONE).all() and np.isnan(got.bw).all()


def test_an_endpoint_aggregates_over_the_sources_of_a_domain():
    now = [0.0]
    store, index, domains = _store(now)
    store.record_many([(f"n{i}", "s3.example:443", 1.0, 100.0 * (i + 1), None) for i in range(3)])
    got = _answer(store, index, domains, "s3.example:443")
    assert got.origin[index["n0"]] == PAIR
    assert got.origin[index["n3"]] == DOMAIN_TO_DOMAIN + 0 and got.bw[index["n3"]] == 200.0
    assert got.origin[index["n6"]] == NONE  # block b1 measured nothing towards it


def test_an_aggregate_passes_no_more_of_a_pairs_slower_nic_than_its_cell_measured():
    now = [0.0]
    store, index, domains = _store(now)
    speeds = {n: 100_000.0 for n in NODES} | {"n4": 25_000.0, "n5": 10_000.0}
    for node, mbps in speeds.items():
        store.record_nic_speed(node, mbps)
    # rack r1 -> rack r2: two pairs of 100 Gbit/s NICs pass 90% of them, n4's 25 Gbit/s NIC 80%
    store.record_many([("n3", "n6", 1.0, 90_000.0, None), ("n3", "n7", 1.0, 90_000.0, None),
                       ("n4", "n8", 1.0, 20_000.0, None)])
    n3, n4, n5 = index["n3"], index["n4"], index["n5"]
    got = _answer(store, index, domains, "n8")  # n3 never probed n8: the cell's median, 90 Gbit/s
    assert got.origin[n3] == DOMAIN_TO_DOMAIN + 1 and got.bw[n3] == 90_000.0 and np.isnan(got.cap[n3])
    got = _answer(store, index, domains, "n6")
    assert (got.origin[[n4, n5]] == DOMAIN_TO_DOMAIN + 1).all()
    assert got.bw[n4] == got.cap[n4] == pytest.approx(0.9 * 25_000)  # the cell's 90th percentile share
    assert got.bw[n5] == got.cap[n5] == 10_000.0  # slower than any NIC the cell saw: its link speed
    now[0] = 101.0  # speeds age out like links: a fresh median, nothing to bound it by
    store.record_many([("n3", "n6", 1.0, 90_000.0, None), ("n3", "n7", 1.0, 90_000.0, None),
                       ("n4", "n8", 1.0, 20_000.0, None)])
    got = _answer(store, index, domains, "n6")
    assert got.bw[n5] == 90_000.0 and np.isnan(got.cap[n5])


def test_aggregates_are_built_once_per_store_change_and_their_memory_is_bounded():
    now = [0.0]
    store, index, domains = _store(now)
    store.record_many([(a, b, 1.0, 10.0, None) for a in NODES for b in NODES if a != b])
    store.follow(index, domains)  # what the extender does with each node table it publishes
    snap = store.snapshot()
    first = store.aggregates(snap.links, index, domains)
    assert store.aggregates(snap.links, index, domains) is first  # a request reads, never builds
    samples = len(NODES) * (len(NODES) - 1)
    # one row per non-empty cell: node -> rack and rack -> rack at the rack level, and so on; towards
    # its own zone a node has two, its rack-mates and the zone's other racks (pairs kept by distance)
    cells = [len(c.keys) for c in (*first.node_to_domain, *first.domain_to_domain)]
    assert cells == [12 * 3, 12 * 4, 2 * 2 + 2, 4 * 4]
    assert first.nbytes <= 52 * sum(cells) + 32 * samples + 8 * len(NODES)
    store.record("n0", "n1", 1.0, 20.0)
    store.refresh_aggregates()  # what the feed does after a write: the new links' aggregates are built
    second = store.aggregates(store.snapshot().links, index, domains)
    assert second is not first and second.node_to_domain[1].bw.max() == 15.0  # n0 -> r0: 10, 20


def test_rack_mates_without_samples_of_their_own_are_answered_by_rack_mates_not_the_zones_spine():
    now = [0.0]
    store, index, domains = _store(now)
    racks = {n: domains[1][i] for n, i in index.items()}
    mates = [(a, b) for a in NODES for b in NODES if a != b and racks[a] == racks[b]]
    blocks = {n: domains[0][i] for n, i in index.items()}
    across = [(a, b) for a in NODES for b in NODES if racks[a] != racks[b] and blocks[a] == blocks[b]]
    target = mates[0][1]
    # the target's rack has no samples inside it; the other racks of its zone have, at 100 Mbit/s;
    # across the zone's racks the links give 10
    inside = [(a, b) for a, b in mates if racks[b] != racks[target]]
    store.record_many([(a, b, 1.0, 100.0, None) for a, b in inside] +
                      [(a, b, 1.0, 10.0, None) for a, b in across])
    snap = store.snapshot()
    got = store.aggregates(snap.links, index, domains).answer(
        target, np.full(len(index), np.nan), np.full(len(index), np.nan), now[0], 100.0)
    mate = index[mates[0][0]]
    assert got.bw[mate] == 100.0 and got.origin[mate] in (NODE_TO_DOMAIN + 0, DOMAIN_TO_DOMAIN + 0)


def test_build_handles_no_levels_and_no_samples():
    empty = Aggregates.build({}, {"a": 0}, np.zeros((0, 1), dtype=np.int32), 0.0, 10.0)
    got = empty.answer("a", np.array([np.nan]), np.array([np.nan]), 0.0, 10.0)
    assert got.origin.tolist() == [NONE]


def test_an_answer_is_reused_by_requests_within_a_second_until_the_measurements_change():
    now = [0.0]
    store, index, domains = _store(now)
    store.record_many([(a, "n0", 1.0, 10.0, None) for a in NODES[1:6]])
    store.follow(index, domains)
    first = store.snapshot().answer("n0", index, domains)
    now[0] = 0.5
    assert store.snapshot().answer("n0", index, domains) is first
    assert not first.bw.flags.writeable  # shared between requests
    now[0] = 1.5
    assert store.snapshot().answer("n0", index, domains) is not first
    store.record("n7", "n0", 1.0, 20.0)  # new measurements: new aggregates, a new answer at once
    store.refresh_aggregates()
    assert store.snapshot().answer("n0", index, domains).bw[index["n7"]] == 20.0

