"""`netsched agent`: one per node. Probes peers and data endpoints, reads NIC counters, serves metrics.

Schedule and budget, so probing never crowds out the jobs it measures:
- every `interval` seconds (x0.8..1.2 jitter, so agents do not probe in step) the agent probes
  the next `peers_per_round` targets in rotation, each with an RTT probe (the fastest of 5
  one-byte round trips, and of the last 3 rounds: queueing is load, not distance) and one
  bandwidth probe sized to last about `target_seconds` at the link's last measured rate
  (a link's first probe is small; when it ends too fast to trust, a second one sized by it follows);
- all bandwidth probes of the last minute together stay under `budget_bytes_per_minute`; a probe
  that would exceed it is skipped and that link's entry simply ages.
- so each link carries probe traffic for at most target_seconds per interval (0.5 s of 30 s).

HTTP (`--port`): /metrics (Prometheus), /matrix (this node's latest row, JSON), /healthz.
Probes are answered on `--probe-port` (netsched/telemetry/probe.py).
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from netsched.telemetry.nic import NicMonitor
from netsched.telemetry.probe import Bandwidth, ProbeError, ProbeServer, measure_bandwidth, measure_rtt

log = logging.getLogger(__name__)
RTT_ROUNDS = 3  # the published RTT is the fastest seen in this many rounds: queueing is load, not distance
Targets = Callable[[], dict[str, tuple[str, int]]]  # name -> (host, port)


@dataclass(frozen=True)
class ProbePlan:
    interval: float = 30.0
    peers_per_round: int = 8
    target_seconds: float = 0.5
    min_bytes: int = 128 * 1024
    max_bytes: int = 32 * 1024 * 1024
    first_bytes: int = 256 * 1024
    budget_bytes_per_minute: int = 64 * 1024 * 1024


class AgentMetrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.rtt = Gauge("netsched_link_rtt_seconds", "Fastest of 5 TCP round trips to a target",
                         ["src", "dst"], registry=r)
        self.bandwidth = Gauge("netsched_link_bandwidth_bytes_per_second",
                               "Achievable TCP rate to a peer or data endpoint, measured at the receiver",
                               ["src", "dst"], registry=r)
        self.measured = Gauge("netsched_link_measured_timestamp_seconds",
                              "Unix time of the link's last complete measurement", ["src", "dst"], registry=r)
        self.errors = Counter("netsched_probe_errors_total", "Probes that failed, by target and kind",
                              ["dst", "kind"], registry=r)
        self.probe_bytes = Counter("netsched_probe_bytes_total", "Bytes sent by bandwidth probes",
                                   ["dst"], registry=r)
        self.skipped = Counter("netsched_probe_skipped_total", "Bandwidth probes skipped by the budget",
                               ["dst"], registry=r)
        self.nic_rate = Gauge("netsched_nic_bytes_per_second", "NIC traffic rate",
                              ["node", "interface", "direction"], registry=r)
        self.nic_util = Gauge("netsched_nic_utilisation_ratio", "NIC traffic / link speed",
                              ["node", "interface", "direction"], registry=r)


class Agent:
    def __init__(self, node: str, targets: Targets, plan: ProbePlan = ProbePlan(),
                 nics: NicMonitor | None = None, clock: Callable[[], float] = time.monotonic):
        self.node, self.targets, self.plan = node, targets, plan
        self.nics = nics or NicMonitor()
        self.clock = clock
        self.metrics = AgentMetrics()
        self.row: dict[str, dict[str, Any]] = {}  # dst -> latest measurement or error
        self._rates: dict[str, float] = {}  # dst -> last measured Mbit/s
        self._rtts: dict[str, deque[float]] = {}  # dst -> fastest RTT of each of the last rounds
        self._spent: deque[tuple[float, int]] = deque()
        self._turn = 0
        self._lock = threading.Lock()
        self.stop = threading.Event()

    # ---- the loop ------------------------------------------------------------------
    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.probe_round()
            except Exception:  # discovery or a bug: log, keep the agent alive, try next round
                log.exception("probe round failed")
            self.stop.wait(self.plan.interval * random.uniform(0.8, 1.2))

    def probe_round(self) -> None:
        targets = sorted(self.targets().items())
        if targets:
            k = min(self.plan.peers_per_round, len(targets))
            start = self._turn % len(targets)
            chosen = (targets + targets)[start:start + k]
            self._turn = start + k
            random.shuffle(chosen)
            for dst, (host, port) in chosen:
                self.probe(dst, host, port)
        self._sample_nics()

    def probe(self, dst: str, host: str, port: int) -> None:
        m = self.metrics
        try:
            window = self._rtts.setdefault(dst, deque(maxlen=RTT_ROUNDS))
            window.append(measure_rtt(host, port))
            rtt = min(window)
        except ProbeError as exc:
            return self._failed(dst, "rtt", exc)
        size = self.probe_size(dst)
        if not size:
            m.skipped.labels(dst).inc()
            return
        try:
            bw = self._send(dst, host, port, size)
            if bw.seconds < self.plan.target_seconds / 4:  # too short to trust (TCP ramp-up, shaper
                self._rates[dst] = bw.mbps                  # bursts): once more, sized by this result
                size = self.probe_size(dst)
                bw = self._send(dst, host, port, size) if size else bw
        except ProbeError as exc:
            return self._failed(dst, "bandwidth", exc)
        now = time.time()
        self._rates[dst] = bw.mbps
        m.rtt.labels(self.node, dst).set(rtt / 1000)
        m.bandwidth.labels(self.node, dst).set(bw.mbps * 1e6 / 8)
        m.measured.labels(self.node, dst).set(now)
        with self._lock:
            probes = self.row.get(dst, {}).get("probes", 0) + 1
            self.row[dst] = {"rtt_ms": rtt, "bandwidth_mbps": bw.mbps, "measured_at": now,
                             "probe_bytes": size, "probe_seconds": bw.seconds, "probes": probes}

    # ---- budget ----------------------------------------------------------------------
    def probe_size(self, dst: str) -> int:
        """Bytes for the next bandwidth probe to dst: ~target_seconds at its last rate, within budget."""
        p = self.plan
        rate = self._rates.get(dst)
        want = int(rate * 1e6 / 8 * p.target_seconds) if rate else p.first_bytes
        want = max(p.min_bytes, min(p.max_bytes, want))
        left = p.budget_bytes_per_minute - self.spent_last_minute()
        return min(want, left) if left >= p.min_bytes else 0

    def spent_last_minute(self) -> int:
        now = self.clock()
        while self._spent and now - self._spent[0][0] > 60:
            self._spent.popleft()
        return sum(n for _, n in self._spent)

    def _send(self, dst: str, host: str, port: int, size: int) -> Bandwidth:
        try:
            return measure_bandwidth(host, port, size)
        finally:  # a failed probe still spent (up to) its bytes
            self._spent.append((self.clock(), size))
            self.metrics.probe_bytes.labels(dst).inc(size)

    def _failed(self, dst: str, kind: str, exc: Exception) -> None:
        self.metrics.errors.labels(dst, kind).inc()
        log.info("%s", exc)
        with self._lock:
            entry = dict(self.row.get(dst, {}))
            entry.update(error=str(exc), failed_at=time.time())
            self.row[dst] = entry  # the last good measurement stays, with its own (ageing) time

    def _sample_nics(self) -> None:
        for rate in self.nics.sample():
            for direction in ("rx", "tx"):
                value = rate.rx_bytes_per_second if direction == "rx" else rate.tx_bytes_per_second
                self.metrics.nic_rate.labels(self.node, rate.interface, direction).set(value)
                util = rate.utilisation(direction)
                if util is not None:
                    self.metrics.nic_util.labels(self.node, rate.interface, direction).set(util)

    def matrix(self) -> dict[str, Any]:
        with self._lock:
            return {"node": self.node, "links": {k: dict(v) for k, v in self.row.items()}}


def serve_http(agent: Agent, host: str, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path == "/metrics":
                self._send(200, generate_latest(agent.metrics.registry), "text/plain; version=0.0.4")
            elif self.path == "/matrix":
                self._send(200, json.dumps(agent.matrix()).encode(), "application/json")
            elif self.path == "/healthz":
                self._send(200, b'{"status": "ok"}', "application/json")
            else:
                self._send(404, b'{"error": "netsched agent serves /metrics, /matrix and /healthz"}',
                           "application/json")

        def _send(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass  # scrapes every few seconds would drown the log

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="agent-http", daemon=True).start()
    return server


def run_agent(node: str, targets: Targets, host: str, port: int, probe_port: int, plan: ProbePlan) -> None:
    """Serve probes and HTTP, then probe until SIGINT/SIGTERM."""
    import signal

    ProbeServer(host, probe_port).start()
    agent = Agent(node, targets, plan)
    serve_http(agent, host, port)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: agent.stop.set())
    log.info("netsched agent %s: probes on :%d, metrics on :%d/metrics, every %.0f s", node, probe_port, port,
             plan.interval)
    agent.run()
