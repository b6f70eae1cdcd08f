"""NIC counters, the store's staleness rules, and the Prometheus feed (a canned HTTP API)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest

from netsched.telemetry.nic import NicMonitor, read_counters, route_interface
from netsched.telemetry.prometheus import NIC_QUERY, SPEED_QUERY, PrometheusFeed
from netsched.telemetry.store import TelemetryStore

PROC_NET_DEV = """\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0
  eth0: 5000000    4000    0    0    0     0          0         0  2000000    3000    0    0    0     0       0          0
"""  # noqa: E501 - the kernel's own layout


PROC_NET_ROUTE = """\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0
eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
ib0\t0000000A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0
"""  # the kernel's layout: 192.0.2.1 default gateway on eth0, 192.0.2.0/24 on eth0, 10.0.0.0/16 on ib0


@pytest.mark.parametrize("host, interface", [
    ("10.0.7.9", "ib0"), ("192.0.2.77", "eth0"), ("8.8.8.8", "eth0"), ("gpu-1", None), ("fd00::1", None)])
def test_the_interface_towards_a_peer_is_the_longest_matching_route(host, interface):
    assert route_interface(host, PROC_NET_ROUTE) == interface


def test_proc_net_dev_is_parsed_into_rx_and_tx_bytes():
    assert read_counters(PROC_NET_DEV) == {"lo": (1000, 1000), "eth0": (5_000_000, 2_000_000)}


def test_rates_and_utilisation_come_from_two_samples_and_the_link_speed():
    samples = iter([{"eth0": (0, 0), "lo": (0, 0)}, {"eth0": (12_500_000, 1_250_000), "lo": (9, 9)}])
    clock = iter([10.0, 11.0])
    monitor = NicMonitor(read=lambda: next(samples), speed=lambda _: 1000.0, clock=lambda: next(clock))
    assert monitor.sample() == []  # the first sample is the baseline
    [eth0] = monitor.sample()  # lo is skipped
    assert eth0.rx_bytes_per_second == 12_500_000 and eth0.utilisation("rx") == pytest.approx(0.1)
    assert eth0.utilisation("tx") == pytest.approx(0.01)


def test_a_counter_reset_gives_no_rate_rather_than_a_negative_one():
    samples = iter([{"eth0": (500, 500)}, {"eth0": (10, 10)}])
    monitor = NicMonitor(read=lambda: next(samples), speed=lambda _: None, clock=iter([1.0, 2.0]).__next__)
    monitor.sample()
    assert monitor.sample() == []


def test_the_store_never_returns_an_entry_older_than_its_bound():
    now = [0.0]
    store = TelemetryStore(max_age=10, clock=lambda: now[0])
    store.record("a", "b", 1.0, 100.0)
    assert store.link("a", "b").bandwidth_mbps == 100.0 and store.fresh_count() == 1
    now[0] = 10.5
    assert store.link("a", "b") is None and store.fresh_links_to("b") == {} and store.fresh_count() == 0
    assert store.link("a", "never-measured") is None


def test_the_store_keeps_one_freshness_window_of_entries_not_every_destination_ever_probed():
    now = [0.0]
    store = TelemetryStore(max_age=60, clock=lambda: now[0])
    store.record_many([("a", f"n{i}", 1.0, 100.0, None) for i in range(100)])
    now[0] = 61.0
    store.record_many([("a", "n1", 1.0, 100.0, None), ("b", "n2", 1.0, 100.0, None)])
    assert sorted(store.snapshot().links) == ["n1", "n2"]  # the 98 other rows went with their entries
    kept = store.snapshot().links["n2"]
    now[0] = 62.0
    store.record_many([("c", "n9", 1.0, 100.0, None)])
    assert store.snapshot().links["n2"] is kept  # nothing stale in it: its aligned arrays stay valid
    assert store.link("a", "n1") is not None


class _Prometheus(BaseHTTPRequestHandler):
    answers: dict = {}

    def do_GET(self):  # noqa: N802
        query = parse_qs(urlparse(self.path).query)["query"][0]
        body = json.dumps(self.answers.get(query) or self.answers[query.split()[0]]).encode()  # by metric
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _vector(value: float, **links) -> dict:
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"src": s, "dst": d}, "value": [0, str(value)]} for s, d in links.values()]}}


@pytest.fixture
def prometheus():
    _Prometheus.answers = {
        "netsched_link_bandwidth_bytes_per_second": _vector(10e6, ab=("a", "b"), ac=("a", "c")),
        "netsched_link_rtt_seconds": _vector(0.002, ab=("a", "b"), ac=("a", "c")),
        "netsched_link_measured_timestamp_seconds": _vector(1000.0, ab=("a", "b")),  # a->c: no time
        NIC_QUERY: {"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {"node": "a"}, "value": [0, "0.25"]},
            {"metric": {"node": "b"}, "value": [0, "0.5"]}]}},
        SPEED_QUERY: {"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {"node": "a"}, "value": [0, str(25e9 / 8)]}]}},
    }
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Prometheus)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_the_feed_records_complete_links_aged_by_when_the_agent_measured_them(prometheus):
    now = [500.0]
    store = TelemetryStore(max_age=30, clock=lambda: now[0])
    feed = PrometheusFeed(prometheus, store, wall=lambda: 1020.0)  # measured 20 s ago
    assert feed.refresh() == 1 and feed.last_error is None
    link = store.link("a", "b")
    assert link.bandwidth_mbps == pytest.approx(80.0) and link.rtt_ms == pytest.approx(2.0)
    assert link.observed_at == pytest.approx(480.0)
    assert (store.nic("a"), store.nic("b"), store.nic("c")) == (0.25, 0.5, None)
    assert store.snapshot().speeds == {"a": (pytest.approx(25_000.0), 500.0)}  # Mbit/s, read at 500
    now[0] = 511.0  # 31 s after the measurement
    assert store.link("a", "b") is None
    assert store.nic("a") == 0.25  # read at 500: still fresh


def test_an_unreachable_prometheus_is_reported_not_raised():
    feed = PrometheusFeed("http://127.0.0.1:9", TelemetryStore(), timeout=0.5)
    assert feed.refresh() == 0 and "Prometheus at http://127.0.0.1:9 could not be read" in feed.last_error


def test_aligned_arrays_follow_new_measurements_and_age_out():
    now = [0.0]
    store = TelemetryStore(max_age=10, clock=lambda: now[0])
    index = {"a": 0, "b": 1, "c": 2}
    store.record("a", "t", 1.0, 100.0)
    bw, rtt = store.aligned("t", index, 3)
    assert bw[0] == 100.0 and rtt[0] == 1.0 and np.isnan(bw[1:]).all()
    now[0] = 5.0
    store.record("b", "t", 2.0, 50.0)  # a new measurement is seen, not a stale cached array
    bw, _ = store.aligned("t", index, 3)
    assert list(bw[:2]) == [100.0, 50.0]
    now[0] = 10.5  # a's entry is now older than 10 s, b's is not
    bw, rtt = store.aligned("t", index, 3)
    assert np.isnan(bw[0]) and np.isnan(rtt[0]) and bw[1] == 50.0


def test_nic_readings_align_with_the_node_table_and_age_out():
    now = [0.0]
    store = TelemetryStore(max_age=10, clock=lambda: now[0])
    index = {"a": 0, "b": 1, "c": 2}
    store.record_nic("a", 0.3)
    now[0] = 6.0
    store.record_nic("b", 0.7)
    assert store.nic_aligned(index, 3)[:2].tolist() == [0.3, 0.7] and np.isnan(store.nic_aligned(index, 3)[2])
    now[0] = 10.5  # a's reading is now older than 10 s
    util = store.nic_aligned(index, 3)
    assert np.isnan(util[0]) and util[1] == 0.7 and store.nic("a") is None
