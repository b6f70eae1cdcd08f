"""`netsched agent`: one per node. Probes peers and data endpoints, reads NIC counters, serves metrics.

Schedule and budget, so probing never crowds out the jobs it measures:
- every `interval` seconds (x0.8..1.2 jitter, so agents do not probe in step) the agent probes
  up to `peers_per_round` targets (netsched/telemetry/targets.py: demand first, then a rotating
  sample of every domain pair, then everyone in turn), each with an RTT probe (the fastest of 5
  one-byte round trips, and of the last 3 rounds: queueing is load, not distance) and one
  bandwidth probe sized to last about `target_seconds` at the link's last measured rate
  (a link's first probe is small; when it ends too fast to trust, a second one sized by it follows);
- all bandwidth probes of the last minute together stay under `budget_bytes_per_minute`; a probe
  that would exceed it is skipped and that link's entry simply ages.
- so each link carries probe traffic for at most target_seconds per interval (0.5 s of 30 s).

Series stay bounded whatever the cluster's size: the link gauges are kept for the `max_links` most
recently measured destinations only (older ones are removed), and the probe counters carry no
destination. A restarted agent exports only what it measured since it started.

HTTP (`--port`): /metrics (Prometheus), /matrix (this node's latest row, JSON), /healthz.
Probes are answered on `--probe-port` (netsched/telemetry/probe.py).
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from netsched.api.topology import DEFAULT, Topology
from netsched.telemetry.nic import NicMonitor, speed_towards
from netsched.telemetry.probe import Bandwidth, ProbeError, ProbeServer, measure_bandwidth, measure_rtt
from netsched.telemetry.targets import Budget, Endpoint, Found, Layout, choose

log = logging.getLogger(__name__)
RTT_ROUNDS = 3  # the published RTT is the fastest seen in this many rounds: queueing is load, not distance
Targets = Callable[[], Found | Mapping[str, Endpoint]]  # a plain mapping: name -> (host, port), no more
MeasureRtt = Callable[[str, int], float]  # host, port -> milliseconds
MeasureBandwidth = Callable[[str, int, int], Bandwidth]  # host, port, bytes
NicSpeed = Callable[[str], float | None]  # host -> Mbit/s of the NIC traffic to it leaves by, None: unknown


@dataclass(frozen=True)
class ProbePlan:
    interval: float = 30.0
    peers_per_round: int = 8
    target_seconds: float = 0.5
    min_bytes: int = 128 * 1024
    max_bytes: int = 32 * 1024 * 1024
    first_bytes: int = 256 * 1024
    budget_bytes_per_minute: int = 64 * 1024 * 1024
    max_age: float = 120.0  # how long the extender uses a measurement: the sampling window
    demand_share: float = 0.5
    max_links: int = 16  # destinations whose link gauges are exported

    @property
    def budget(self) -> Budget:
        return Budget(self.peers_per_round, self.demand_share, max(1, int(self.max_age // self.interval)))


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
        # no destination label on counters: a counter cannot be removed without a reset, and one
        # series per destination would grow with the cluster
        self.errors = Counter("netsched_probe_errors_total", "Probes that failed, by kind (rtt, bandwidth)",
                              ["kind"], registry=r)
        self.probe_bytes = Counter("netsched_probe_bytes_total", "Bytes sent by bandwidth probes", registry=r)
        self.skipped = Counter("netsched_probe_skipped_total", "Bandwidth probes skipped by the budget",
                               registry=r)
        self.nic_rate = Gauge("netsched_nic_bytes_per_second", "NIC traffic rate",
                              ["node", "interface", "direction"], registry=r)
        self.nic_util = Gauge("netsched_nic_utilisation_ratio", "NIC traffic / link speed",
                              ["node", "interface", "direction"], registry=r)
        # one series per node: what the extender caps domain aggregates touching this node by
        self.nic_speed = Gauge("netsched_nic_speed_bytes_per_second",
                               "Link speed of the interface probes leave by", ["node"], registry=r)


class Agent:
    """One node's prober. `rtt` and `bandwidth` measure a link (defaults: the real TCP probes) and
    `nic_speed` reads the link speed of the NIC towards a target (default: the routed interface's, from
    /sys); a simulated network passes its own, and its clocks: `clock` for the probe budget, `wall` for
    the time a link was measured (Unix seconds, what the extender ages)."""

    def __init__(self, node: str, targets: Targets, plan: ProbePlan = ProbePlan(),
                 nics: NicMonitor | None = None, clock: Callable[[], float] = time.monotonic,
                 topology: Topology = DEFAULT, rtt: MeasureRtt = measure_rtt,
                 bandwidth: MeasureBandwidth = measure_bandwidth, wall: Callable[[], float] = time.time,
                 nic_speed: NicSpeed = speed_towards):
        self.node, self.targets, self.plan, self.topology = node, targets, plan, topology
        self.nics, self.nic_speed = nics or NicMonitor(), nic_speed
        self.clock, self.wall = clock, wall
        self.measure_rtt, self.measure_bandwidth = rtt, bandwidth
        self.metrics = AgentMetrics()
        self.row: OrderedDict[str, dict[str, Any]] = OrderedDict()  # dst -> latest measurement or error
        self._exported: OrderedDict[str, None] = OrderedDict()  # dsts with link gauges, oldest first
        self._rates: dict[str, float] = {}  # dst -> last measured Mbit/s
        self._rtts: dict[str, deque[float]] = {}  # dst -> fastest RTT of each of the last rounds
        self._last: dict[str, float] = {}  # dst -> the round it was last probed in: least recent goes first
        self._spent: deque[tuple[float, int]] = deque()
        self._layout = Layout({}, topology)
        self._labels: Mapping[str, Mapping[str, str]] | None = None
        self._round = 0
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
        chosen = list(self.next_targets())
        random.shuffle(chosen)  # agents choosing alike do not probe one target at the same moment
        for dst, (host, port) in chosen:
            self.probe(dst, host, port)
        self._sample_nics()
        self._export_speed([host for _, (host, _) in chosen])

    def next_targets(self) -> list[tuple[str, Endpoint]]:
        """This round's targets with their endpoints (targets.choose), and the round counted."""
        got = self.targets()
        found = got if isinstance(got, Found) else Found(got)
        if found.labels is not self._labels:  # a new discovery: domains may have changed
            self._labels = found.labels
            self._layout = Layout(found.labels, self.topology)
        endpoints = found.endpoints
        everyone = sorted(name for name in endpoints if name != self.node)
        demand = [name for name in found.demand if name in endpoints]
        picked = choose(self.node, self._layout, self._round, self.plan.budget, demand, self._last,
                        everyone, self._turn)
        for name in picked.targets:
            self._last[name] = self._round
        self._round, self._turn = self._round + 1, picked.turn
        return [(name, endpoints[name]) for name in picked.targets if name in endpoints]

    def probe(self, dst: str, host: str, port: int) -> None:
        m = self.metrics
        try:
            window = self._rtts.setdefault(dst, deque(maxlen=RTT_ROUNDS))
            window.append(self.measure_rtt(host, port))
            rtt = min(window)
        except ProbeError as exc:
            return self._failed(dst, "rtt", exc)
        size = self.probe_size(dst)
        if not size:
            m.skipped.inc()
            return
        try:
            bw = self._send(dst, host, port, size)
            if bw.seconds < self.plan.target_seconds / 4:  # too short to trust (TCP ramp-up, shaper
                self._rates[dst] = bw.mbps                  # bursts): once more, sized by this result
                size = self.probe_size(dst)
                bw = self._send(dst, host, port, size) if size else bw
        except ProbeError as exc:
            return self._failed(dst, "bandwidth", exc)
        now = self.wall()
        self._rates[dst] = bw.mbps
        self._export(dst, rtt / 1000, bw.mbps * 1e6 / 8, now)
        with self._lock:
            probes = self.row.get(dst, {}).get("probes", 0) + 1
            self._keep(dst, {"rtt_ms": rtt, "bandwidth_mbps": bw.mbps, "measured_at": now,
                             "probe_bytes": size, "probe_seconds": bw.seconds, "probes": probes})

    # ---- bounded series ----------------------------------------------------------------
    def _export(self, dst: str, rtt_seconds: float, bytes_per_second: float, at: float) -> None:
        """Set dst's link gauges and remove those of the destinations measured longest ago beyond
        `max_links`: their values would only age, and every destination kept is a series."""
        m = self.metrics
        m.rtt.labels(self.node, dst).set(rtt_seconds)
        m.bandwidth.labels(self.node, dst).set(bytes_per_second)
        m.measured.labels(self.node, dst).set(at)
        self._exported[dst] = None
        self._exported.move_to_end(dst)
        while len(self._exported) > self.plan.max_links:
            old, _ = self._exported.popitem(last=False)
            for gauge in (m.rtt, m.bandwidth, m.measured):
                gauge.remove(self.node, old)

    def _keep(self, dst: str, entry: dict[str, Any]) -> None:
        """The /matrix row keeps as many destinations as the gauges do, most recently probed."""
        self.row[dst] = entry
        self.row.move_to_end(dst)
        while len(self.row) > self.plan.max_links:
            self.row.popitem(last=False)

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
            return self.measure_bandwidth(host, port, size)
        finally:  # a failed probe still spent (up to) its bytes
            self._spent.append((self.clock(), size))
            self.metrics.probe_bytes.inc(size)

    def _failed(self, dst: str, kind: str, exc: Exception) -> None:
        self.metrics.errors.labels(kind).inc()
        log.info("%s", exc)
        with self._lock:
            entry = dict(self.row.get(dst, {}))
            entry.update(error=str(exc), failed_at=self.wall())
            self._keep(dst, entry)  # the last good measurement stays, with its own (ageing) time

    def _sample_nics(self) -> None:
        for rate in self.nics.sample():
            for direction in ("rx", "tx"):
                value = rate.rx_bytes_per_second if direction == "rx" else rate.tx_bytes_per_second
                self.metrics.nic_rate.labels(self.node, rate.interface, direction).set(value)
                util = rate.utilisation(direction)
                if util is not None:
                    self.metrics.nic_util.labels(self.node, rate.interface, direction).set(util)

    def _export_speed(self, hosts: list[str]) -> None:
        """The link speed of the NIC this round's probes left by (the first target's that is known): one
        series, so that the extender can bound aggregate answers by this node's own NIC."""
        for host in hosts:
            mbps = self.nic_speed(host)
            if mbps:
                self.metrics.nic_speed.labels(self.node).set(mbps * 1e6 / 8)
                return

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


def run_agent(node: str, targets: Targets, host: str, port: int, probe_port: int, plan: ProbePlan,
              topology: Topology = DEFAULT, nic_speed: NicSpeed = speed_towards) -> None:
    """Serve probes and HTTP, then probe until SIGINT/SIGTERM."""
    import signal

    from prometheus_client import disable_created_metrics

    # a `_created` sample per counter would double the counters' series (the library leaves this untyped)
    disable_created_metrics()  # type: ignore[no-untyped-call]
    ProbeServer(host, probe_port).start()
    agent = Agent(node, targets, plan, topology=topology, nic_speed=nic_speed)
    serve_http(agent, host, port)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: agent.stop.set())
    log.info("netsched agent %s: probes on :%d, metrics on :%d/metrics, every %.0f s", node, probe_port, port,
             plan.interval)
    agent.run()
