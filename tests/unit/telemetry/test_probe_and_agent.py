"""Probes on loopback, the agent's sizing and budget, its endpoints, and its error handling."""

from __future__ import annotations

import json
import socket
import urllib.request

import pytest

from netsched.telemetry.agent import Agent, ProbePlan, serve_http
from netsched.telemetry.discovery import BadTarget, static_targets
from netsched.telemetry.nic import NicMonitor
from netsched.telemetry.probe import ProbeError, ProbeServer, measure_bandwidth, measure_rtt, sink

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def server():
    srv = ProbeServer("127.0.0.1", 0).start()
    yield srv
    srv.shutdown()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nobody listens once this socket closes


def quiet_nics() -> NicMonitor:
    return NicMonitor(read=lambda: {}, speed=lambda _: None)


def test_probes_on_loopback_measure_something_plausible(server):
    assert 0 < measure_rtt("127.0.0.1", server.port) < 50
    bw = measure_bandwidth("127.0.0.1", server.port, 4 * MIB)
    assert bw.bytes_sent == 4 * MIB and bw.seconds > 0 and bw.mbps > 100


def test_a_probe_to_a_closed_port_raises_a_probe_error_naming_the_peer():
    port = _closed_port()
    with pytest.raises(ProbeError, match=f"127.0.0.1:{port}"):
        measure_rtt("127.0.0.1", port, timeout=1)


@pytest.mark.parametrize("rate_mbps, spent, size", [
    pytest.param(None, 0, 256 * 1024, id="first-probe-is-small"),
    pytest.param(80, 0, 5_000_000, id="half-a-second-at-80-mbit"),
    pytest.param(1, 0, 128 * 1024, id="never-below-the-minimum"),
    pytest.param(100_000, 0, 32 * MIB, id="never-above-the-maximum"),
    pytest.param(80, 62 * MIB, 2 * MIB, id="cut-to-what-the-budget-has-left"),
    pytest.param(80, 64 * MIB - 1000, 0, id="skipped-when-the-budget-is-spent"),
])
def test_probe_size_follows_the_last_rate_within_limits_and_budget(rate_mbps, spent, size):
    now = [100.0]
    agent = Agent("a", dict, ProbePlan(), quiet_nics(), clock=lambda: now[0])
    if rate_mbps:
        agent._rates["b"] = rate_mbps
    if spent:
        agent._spent.append((now[0] - 30, spent))
    assert agent.probe_size("b") == size
    now[0] += 31  # older than a minute: no longer counts
    assert agent.spent_last_minute() == 0


def test_an_agent_round_measures_live_peers_and_counts_dead_ones(server):
    targets = {"b": ("127.0.0.1", server.port), "ghost": ("127.0.0.1", _closed_port())}
    agent = Agent("a", lambda: targets, ProbePlan(first_bytes=256 * 1024), quiet_nics())
    agent.probe_round()
    links = agent.matrix()["links"]
    assert links["b"]["bandwidth_mbps"] > 0 and links["b"]["probes"] == 1 and "error" not in links["b"]
    assert "RTT probe to 127.0.0.1" in links["ghost"]["error"]
    assert agent.metrics.errors.labels("rtt")._value.get() == 1
    # a link's first probe is too short to trust on loopback, so a sized second one follows
    assert agent.metrics.probe_bytes._value.get() > 256 * 1024


def test_the_agent_exports_the_link_speed_of_the_nic_its_probes_leave_by_as_one_series(server):
    targets = {"b": ("127.0.0.1", server.port), "c": ("127.0.0.2", server.port)}
    asked = []

    def speed(host: str) -> float | None:
        asked.append(host)
        return 25_000.0 if host == "127.0.0.2" else None  # b's route has no speed (a virtual NIC)

    agent = Agent("a", lambda: targets, ProbePlan(), quiet_nics(), nic_speed=speed)
    agent.probe_round()
    [family] = [f for f in agent.metrics.registry.collect()
                if f.name == "netsched_nic_speed_bytes_per_second"]
    assert [(s.labels, s.value) for s in family.samples] == [({"node": "a"}, 25_000 * 1e6 / 8)]
    assert "127.0.0.2" in asked


def test_the_agent_serves_metrics_matrix_and_health(server):
    agent = Agent("a", lambda: {"b": ("127.0.0.1", server.port)}, ProbePlan(), quiet_nics())
    agent.probe_round()
    http = serve_http(agent, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{http.server_address[1]}"
    try:
        with urllib.request.urlopen(f"{base}/metrics") as resp:
            text = resp.read().decode()
        assert 'netsched_link_bandwidth_bytes_per_second{dst="b",src="a"}' in text
        assert 'netsched_link_measured_timestamp_seconds{dst="b",src="a"}' in text
        with urllib.request.urlopen(f"{base}/matrix") as resp:
            assert json.loads(resp.read())["node"] == "a"
        with urllib.request.urlopen(f"{base}/healthz") as resp:
            assert resp.status == 200
    finally:
        http.shutdown()


@pytest.mark.parametrize("peers, data, message", [
    pytest.param(["b"], [], "expected NODE=HOST:PORT", id="peer-without-endpoint"),
    pytest.param(["b=10.0.0.2"], [], "--peer '10.0.0.2': expected HOST:PORT", id="peer-without-port"),
    pytest.param([], ["store:99999"], "--data 'store:99999'", id="port-out-of-range"),
    pytest.param([], ["store:9²"], "--data 'store:9²'", id="port-with-a-superscript"),
])
def test_bad_targets_are_refused_with_the_flag_and_an_example(peers, data, message):
    with pytest.raises(BadTarget, match=message):
        static_targets(peers, data)


def test_targets_name_peers_by_node_and_data_by_endpoint():
    assert static_targets(["b=10.0.0.2:9102"], ["10.0.0.9:9102"]) == {
        "b": ("10.0.0.2", 9102), "10.0.0.9:9102": ("10.0.0.9", 9102)}


def test_a_transfer_too_small_to_time_is_delivered_not_an_error(server, monkeypatch):
    from netsched.datagen import testbed_worker

    got, seconds = sink("127.0.0.1", server.port, 100)
    assert got == 100 and seconds >= 0  # one segment, often timed at exactly 0: no rate in it
    monkeypatch.setattr(testbed_worker, "PROBE_PORT", server.port)
    assert testbed_worker.push("127.0.0.1", 100) > 0  # a job's exchange only needs the bytes there
    monkeypatch.setattr(testbed_worker, "sink", lambda *_, **__: (100, 0.0))  # the case that failed a run
    assert testbed_worker.push("127.0.0.1", 100) >= 0
    monkeypatch.setattr(testbed_worker, "sink", lambda *_, **__: (60, 0.5))
    with pytest.raises(ProbeError, match="the receiver got 60 of 100 bytes"):
        testbed_worker.push("127.0.0.1", 100)


