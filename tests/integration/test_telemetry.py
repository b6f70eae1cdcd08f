"""Telemetry on a real shaped network: agents in network namespaces, a real Prometheus, the store,
and the extender ranking nodes by what was measured. Needs root (ip netns, tc)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sys
import time
import urllib.parse
import urllib.request

import pytest

from netsched.api.labels import DATA_SOURCE, GPU_RESOURCE, JOB_LABEL, RACK_LABEL, ZONE_LABEL
from netsched.datagen.testbed import Testbed, start_prometheus, stop
from netsched.devcluster.wait import poll
from netsched.extender.engine import Extender
from netsched.extender.protocol import parse_args
from netsched.extender.read_model import ReadModel
from netsched.telemetry.prometheus import PrometheusFeed
from netsched.telemetry.store import TelemetryStore

SITES = ("a", "b", "c", "data")
RATES = {("a", "b"): 5, ("a", "c"): 20, ("b", "c"): 80,  # Mbit/s, both directions
         ("a", "data"): 80, ("b", "data"): 20, ("c", "data"): 5}
NODES = ("a", "b", "c")
LINK_SERIES = ("netsched_link_rtt_seconds", "netsched_link_bandwidth_bytes_per_second",
               "netsched_link_measured_timestamp_seconds")


class Bed:
    def __init__(self, tmp):
        self.tmp = tmp
        self.net = Testbed(SITES, RATES, prefix="nstt", subnet="10.77.9").up()
        self.data = f"{self.net.ip('data')}:9102"
        self.prometheus = None
        try:
            self.agents = {site: self.start_agent(site) for site in SITES}
            self.prom_port = _free_port()
            self.prometheus = self.start_prometheus()
        except BaseException:
            self.close()
            raise
        self.url = f"http://127.0.0.1:{self.prom_port}"

    def start_agent(self, site: str, *flags: str):
        """The site's agent with its usual targets, or with `flags` (--peer, --data, ...) instead."""
        peers = [f"--peer={p}={self.net.ip(p)}:9102" for p in NODES if p != site] if site in NODES else []
        extra = [f"--data={self.data}"] if site in NODES else []
        if site == "a":
            extra.append("--peer=ghost=10.77.9.99:9102")  # nobody there: an unreachable peer
        argv = [sys.executable, "-m", "netsched", "agent", f"--node-name={site}", "--port=9101",
                "--probe-port=9102", "--interval=2", "--budget-bytes-per-minute=536870912",
                *(flags or (*peers, *extra))]
        proc = self.net.start(site, argv, self.tmp / f"agent-{site}.log")
        poll(lambda: self.matrix(site) is not None, 20, f"agent {site} to serve")
        return proc

    def start_prometheus(self):
        targets = [f"{self.net.ip(s)}:9101" for s in SITES]
        return start_prometheus(targets, self.tmp / "prometheus", self.prom_port)

    def matrix(self, site: str) -> dict | None:
        try:
            with urllib.request.urlopen(f"http://{self.net.ip(site)}:9101/matrix", timeout=2) as resp:
                return json.loads(resp.read())
        except OSError:
            return None

    def metrics(self, site: str) -> str:
        with urllib.request.urlopen(f"http://{self.net.ip(site)}:9101/metrics", timeout=2) as resp:
            return resp.read().decode()

    def targets(self, site: str) -> list[str]:
        return [self.data] if site == "data" else [*(p for p in NODES if p != site), self.data]

    def close(self):
        if self.prometheus:
            stop(self.prometheus)
        self.net.down()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    b = Bed(tmp_path_factory.mktemp("telemetry"))
    # every link measured three times: the first probe only finds the rate to size the next
    poll(lambda: all((b.matrix(s) or {}).get("links", {}).get(t, {}).get("probes", 0) >= 3
                     for s in NODES for t in b.targets(s)), 90, "three probes of every link")
    yield b
    b.close()


def _expected(src: str, dst: str, bed: Bed) -> float:
    site = "data" if dst == bed.data else dst
    return RATES.get((src, site)) or RATES[(site, src)]


def test_agents_measure_each_shaped_link_as_its_own_through_prometheus(bed):
    """Every link's measured rate is within [0.5, 1.25] of its shaped rate: the shaped rates are 4x apart,
    so no link can be taken for another. Shaping is a ceiling; how far below it a probe lands depends
    on how busy the machine is (a third below when CI shares 2 busy cores), so closer accuracy is
    not a test's to promise."""
    store = TelemetryStore()
    poll(lambda: PrometheusFeed(bed.url, store).refresh() >= 9, 30, "Prometheus to hold all 9 links")
    for src in NODES:
        for dst in bed.targets(src):
            link = store.link(src, dst)
            expected = _expected(src, dst, bed)
            assert link is not None, (src, dst)
            assert 0.5 * expected <= link.bandwidth_mbps <= 1.25 * expected, (src, dst, link, expected)
            assert 0 < link.rtt_ms < 50
    # each node's NIC utilisation comes through too, labelled with the agent's node name
    assert all(store.nic(site) is not None and 0 <= store.nic(site) <= 1 for site in SITES), \
        {site: store.nic(site) for site in SITES}


def test_the_extender_ranks_nodes_by_the_measured_network(bed):
    store = TelemetryStore()
    poll(lambda: PrometheusFeed(bed.url, store).refresh() >= 9, 30, "Prometheus to hold all 9 links")
    cache = ReadModel()
    cache.replace("nodes", [_node(n) for n in NODES])  # one rack: topology cannot tell them apart
    cache.replace("pods", [_pod("peer", "c", {JOB_LABEL: "train"})])
    cache.replace("packingplans", [])
    shortlist, every = Extender(cache, telemetry=store), Extender(cache, telemetry=store, shortlist=0)

    peer = parse_args({"Pod": _pod("next", None, {JOB_LABEL: "train"}), "NodeNames": ["a", "b"]})
    seen = {src: store.link(src, "c") for src in ("a", "b")}
    assert shortlist.filter(peer).passed == ["b"], seen  # b->c measured 80 Mbit/s, a->c 20
    ranked = every.prioritize(peer).as_dict()
    assert ranked["b"] > ranked["a"]

    reader = _pod("reader", None, {}, {DATA_SOURCE: f"endpoint:{bed.data}"})
    data = parse_args({"Pod": reader, "NodeNames": list(NODES)})
    assert shortlist.filter(data).passed == ["a"]  # to the data: a 80, b 20, c 5 Mbit/s
    ranked = every.prioritize(data).as_dict()  # 0..10 integers: close rates may share a score
    assert ranked["a"] > ranked["c"] and ranked["a"] >= ranked["b"] >= ranked["c"]


def test_an_unreachable_peer_is_counted_and_never_enters_the_store(bed):
    text = bed.metrics("a")
    errors = [line for line in text.splitlines()
              if line.startswith('netsched_probe_errors_total{kind="rtt"}')]
    assert errors and float(errors[0].split()[-1]) >= 1
    assert "error" in bed.matrix("a")["links"]["ghost"]
    store = TelemetryStore()
    PrometheusFeed(bed.url, store).refresh()
    assert store.link("a", "ghost") is None and store.link("a", "b") is not None


def test_a_killed_agents_links_go_stale_and_come_back_when_it_restarts(bed):
    # longer than one of a's rounds under load (its unreachable ghost peer alone costs a 2 s timeout)
    store = TelemetryStore(max_age=12)
    feed = PrometheusFeed(bed.url, store)
    poll(lambda: _read(feed, "b", "c"), 20, "a fresh b->c link")
    os.killpg(bed.agents["b"].pid, signal.SIGKILL)
    bed.agents["b"].wait()
    poll(lambda: _read(feed, "b", "c") is None, 30, "b->c to go stale")
    assert store.link("a", "c") is not None  # the others keep measuring

    bed.agents["b"] = bed.start_agent("b")
    link = poll(lambda: _read(feed, "b", "c"), 30, "b->c to be fresh again")
    assert abs(link.bandwidth_mbps - 80) <= 0.25 * 80  # its first report is already sized to be right


def test_a_restarted_agent_exports_none_of_its_old_links_and_prometheus_forgets_them(bed):
    poll(lambda: {"b", "c", bed.data} <= _destinations(bed, "a").keys(), 30, "a's three links in Prometheus")
    try:
        _restart(bed, "a", f"--peer=b={bed.net.ip('b')}:9102")
        restarted = time.time()  # the old agent is gone: a later measurement is the new one's
        poll(lambda: _destinations(bed, "a").get("b", 0) > restarted, 30, "Prometheus to scrape a's new b")
        # c and the data endpoint stale within a few scrapes, not after Prometheus' 5-minute lookback
        poll(lambda: _destinations(bed, "a").keys() == {"b"}, 15, "a's old links to go stale in Prometheus")
        assert _series(bed, "a") == {"b"}  # nothing of its old links on the agent either
    finally:
        _restart(bed, "a")


def test_an_agent_exports_its_latest_max_links_destinations_however_many_it_probes(bed):
    # five targets, four of them answer; two link gauges' worth of destinations at a time
    flags = [*(f"--peer={p}={bed.net.ip(p)}:9102" for p in ("b", "c")), f"--peer=d={bed.net.ip('data')}:9102",
             f"--data={bed.data}", "--peer=ghost=10.77.9.99:9102", "--max-links=2", "--peers-per-round=1"]
    seen: set[str] = set()
    too_many = []

    def bounded_until_all_seen() -> bool:
        exported, in_prometheus = _series(bed, "a"), _destinations(bed, "a")
        if len(exported) > 2 or len(in_prometheus) > 2:
            too_many.append((exported, in_prometheus))
        seen.update(exported)  # what a exports now; what Prometheus answers is checked for its count
        return seen == {"b", "c", "d", bed.data}

    try:
        _restart(bed, "a", *flags)
        restarted = time.time()
        up = f'timestamp(up{{instance="{bed.net.ip("a")}:9101"}})'
        poll(lambda: float(_query(bed, up)[0]["value"][1]) > restarted, 10, "a scrape of the new agent")
        poll(bounded_until_all_seen, 90, "a to measure all four live targets, two at a time")
        assert not too_many  # (on the agent, in Prometheus) whenever more than two were there
        counters = [line for line in bed.metrics("a").splitlines() if line.startswith("netsched_probe_")]
        assert counters and not any("dst=" in line for line in counters)  # folded: no series per target
        assert not any("_created" in line for line in counters)  # no second series per counter
    finally:
        _restart(bed, "a")


def test_prometheus_down_is_an_error_message_and_entries_age_out_never_a_crash(bed):
    store = TelemetryStore(max_age=4)
    feed = PrometheusFeed(bed.url, store, timeout=1)
    poll(lambda: feed.refresh() >= 9, 20, "all links")
    stop(bed.prometheus)
    assert feed.refresh() == 0 and bed.url in feed.last_error
    poll(lambda: store.link("a", "b") is None and store.fresh_count() == 0, 10, "the entries to age out")
    # the extender falls back to topology: a measured limit fails the node with a reason
    cache = ReadModel()
    cache.replace("nodes", [_node(n) for n in NODES])
    cache.replace("pods", [])
    cache.replace("packingplans", [])
    pod = _pod("strict", None, {}, {DATA_SOURCE: f"endpoint:{bed.data}",
                                    "netsched.io/min-data-bandwidth-mbps": "10"})
    out = Extender(cache, telemetry=store).filter(parse_args({"Pod": pod, "NodeNames": list(NODES)}))
    assert not out.passed and "no fresh measurement" in next(iter(out.unresolvable.values()))

    bed.prometheus = bed.start_prometheus()
    poll(lambda: feed.refresh() >= 9, 30, "telemetry back after Prometheus restarts")


def _restart(bed: Bed, site: str, *flags: str) -> None:
    os.killpg(bed.agents[site].pid, signal.SIGTERM)
    bed.agents[site].wait()
    bed.agents[site] = bed.start_agent(site, *flags)


def _series(bed: Bed, site: str) -> set[str]:
    """The destinations of the site's link series on its /metrics, checking each has all three."""
    text = bed.metrics(site)
    found = [set(re.findall(rf'^{name}{{dst="([^"]+)",src="{site}"}}', text, re.M)) for name in LINK_SERIES]
    assert found[0] == found[1] == found[2], found
    return found[0]


def _destinations(bed: Bed, src: str) -> dict[str, float]:
    """What Prometheus answers now for the source's links: each destination and when it was measured."""
    found = _query(bed, f'netsched_link_measured_timestamp_seconds{{src="{src}"}}')
    return {r["metric"]["dst"]: float(r["value"][1]) for r in found}


def _query(bed: Bed, promql: str) -> list[dict]:
    """Prometheus' instant query, evaluated now."""
    query = urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(f"{bed.url}/api/v1/query?{query}", timeout=5) as resp:
        found: list[dict] = json.loads(resp.read())["data"]["result"]
        return found


def _read(feed: PrometheusFeed, src: str, dst: str):
    """Read Prometheus once more, then the link as the store now holds it."""
    feed.refresh()
    return feed.store.link(src, dst)


def _node(name: str) -> dict:
    labels = {ZONE_LABEL: "zone-a", RACK_LABEL: "rack-a1"}
    alloc = {GPU_RESOURCE: "8", "cpu": "96", "memory": "1024Gi", "pods": "110"}
    return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": alloc}}


def _pod(name: str, node: str | None, labels: dict, annotations: dict | None = None) -> dict:
    spec = {"containers": [{"name": "m", "resources": {"requests": {GPU_RESOURCE: "2"}}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels,
                         "annotations": annotations or {}},
            "spec": spec, "status": {"phase": "Running" if node else "Pending"}}
