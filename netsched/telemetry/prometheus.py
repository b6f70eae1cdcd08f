"""Feeds the telemetry store from Prometheus' HTTP API (the agents' scraped metrics).

Every `interval` seconds it runs three instant queries (bandwidth, RTT, last-measured
time per src/dst link) and records each complete link with the time the *agent*
measured it, not the time Prometheus scraped it; and two for each node's NIC: its utilisation
(its busiest interface and direction) and the link speed of the interface its probes leave by,
recorded as of the query.

Reads are bounded by what is new, not by the number of series: a refresh at wall time T reads
only the links measured after `since`, the last measured time filtering all three queries
(`netsched_link_measured_timestamp_seconds > since`, joined `and on(src, dst)` for RTT and
bandwidth), where

    since = T0 - lag    after a successful refresh at T0 with T - T0 <= max_age,
    since = T - max_age on the first refresh and after a longer gap,

and `lag` (60 s, two of the chart's 30 s scrape intervals) covers a measurement Prometheus
scraped only after T0, and small clock skew between agents and the feed. So a refresh reads
about nodes x peers_per_round x (T - T0 + lag) / agent interval links, whatever the number of
series; links read twice are recorded twice with the same values. The store keeps the rest
until they age out. Then:

- an agent that stops measuring a link (peer unreachable, agent down) leaves an entry
  whose age grows until the store stops returning it (`TelemetryStore.max_age`);
- Prometheus down: queries fail, `last_error` says why, nothing new is recorded and the
  entries age out the same way; the extender falls back to topology (its documented rule).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable

from netsched.telemetry.store import TelemetryStore

log = logging.getLogger(__name__)
MEASURED = "netsched_link_measured_timestamp_seconds"
VALUES = {"bandwidth": "netsched_link_bandwidth_bytes_per_second", "rtt": "netsched_link_rtt_seconds"}
LAG = 60.0  # s: a measurement reaches Prometheus up to a scrape interval after it is taken
NIC_QUERY = "max by (node) (netsched_nic_utilisation_ratio)"  # a node's busiest interface and direction
SPEED_QUERY = "max by (node) (netsched_nic_speed_bytes_per_second)"  # one series per node


def queries(since: float) -> dict[str, str]:
    """The link queries of a refresh reading what was measured after `since` (wall seconds)."""
    recent = f"{MEASURED} > {since:.3f}"
    return {**{name: f"{metric} and on(src, dst) {recent}" for name, metric in VALUES.items()},
            "measured": recent}


class PrometheusFeed:
    def __init__(self, url: str, store: TelemetryStore, interval: float = 10.0, timeout: float = 5.0,
                 wall: Callable[[], float] = time.time, lag: float = LAG):
        self.url, self.store, self.wall = url.rstrip("/"), store, wall
        self.interval, self.timeout, self.lag = interval, timeout, lag
        self.last_error: str | None = None
        self.last_success: float | None = None  # monotonic
        self.last_read: float | None = None  # wall time of the last successful refresh
        self.stop = threading.Event()

    def start(self) -> PrometheusFeed:
        threading.Thread(target=self._run, name="prometheus-feed", daemon=True).start()
        return self

    def _run(self) -> None:
        while not self.stop.is_set():
            self.refresh()
            self.stop.wait(self.interval)

    def refresh(self) -> int:
        """One round; returns the number of links recorded (0 on failure, with last_error set)."""
        started = self.wall()
        try:
            series = {name: self._query(q) for name, q in queries(self.since(started)).items()}
            nics = {labels[0]: value for labels, value in self._query(NIC_QUERY, ("node",)).items()}
            speeds = {labels[0]: value * 8 / 1e6  # Mbit/s
                      for labels, value in self._query(SPEED_QUERY, ("node",)).items()}
        except (OSError, ValueError, KeyError) as exc:
            self.last_error = f"Prometheus at {self.url} could not be read: {exc}"
            log.warning("%s; telemetry entries age out after %g s", self.last_error, self.store.max_age)
            return 0
        now_wall, now_mono = self.wall(), self.store.clock()
        links = [(link[0], link[1], series["rtt"][link] * 1000, series["bandwidth"][link] * 8 / 1e6,
                  now_mono - max(0.0, now_wall - measured))
                 for link, measured in series["measured"].items()
                 if link in series["bandwidth"] and link in series["rtt"]]
        self.store.record_many(links, [(node, utilisation, now_mono) for node, utilisation in nics.items()],
                               [(node, mbps, now_mono) for node, mbps in speeds.items()])
        self.store.refresh_aggregates()
        self.last_error, self.last_success, self.last_read = None, now_mono, started
        return len(links)

    def since(self, now_wall: float) -> float:
        """The measured time after which a refresh at now_wall reads links (module docstring)."""
        last, max_age = self.last_read, self.store.max_age
        if last is None or now_wall - last > max_age:
            return now_wall - max_age
        return last - self.lag

    def _query(self, promql: str, keys: tuple[str, ...] = ("src", "dst")) -> dict[tuple[str, ...], float]:
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
        with urllib.request.urlopen(url, timeout=self.timeout) as resp:
            doc = json.loads(resp.read())
        if doc.get("status") != "success":
            raise ValueError(f"query {promql!r}: {doc.get('error', 'no data')}")
        out = {}
        for item in doc["data"]["result"]:
            labels = item["metric"]
            if all(k in labels for k in keys):
                out[tuple(labels[k] for k in keys)] = float(item["value"][1])
        return out
