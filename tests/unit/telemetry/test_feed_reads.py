"""The feed reads only what was measured since its last refresh, from a small fake Prometheus that
evaluates the three query shapes the feed sends."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from netsched.telemetry.prometheus import LAG, NIC_QUERY, SPEED_QUERY, PrometheusFeed, queries
from netsched.telemetry.store import TelemetryStore

SHAPE = re.compile(r"^(?:(\w+) and on\(src, dst\) )?(\w+) > ([0-9.]+)$")


class _Prometheus(BaseHTTPRequestHandler):
    series: dict[str, dict[tuple[str, str], float]] = {}  # metric -> (src, dst) -> value
    asked: list[str] = []
    down = False

    def do_GET(self):  # noqa: N802
        query = parse_qs(urlparse(self.path).query)["query"][0]
        self.asked.append(query)
        if self.down:
            self.send_error(503)
            return
        result = [] if query in (NIC_QUERY, SPEED_QUERY) else self._evaluate(query)
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _evaluate(self, query: str) -> list[dict]:
        """`M > x` and `V and on(src, dst) M > x`: the only shapes a feed may send."""
        shape = SHAPE.match(query)
        assert shape, f"unexpected query {query!r}"
        values, measured, since = shape.group(1), shape.group(2), float(shape.group(3))
        recent = {link for link, t in self.series[measured].items() if t > since}
        source = self.series[values or measured]
        return [{"metric": {"src": s, "dst": d}, "value": [0, str(v)]}
                for (s, d), v in source.items() if (s, d) in recent]

    def log_message(self, *args):
        pass


@pytest.fixture
def prometheus():
    _Prometheus.series = {"netsched_link_bandwidth_bytes_per_second": {},
                          "netsched_link_rtt_seconds": {},
                          "netsched_link_measured_timestamp_seconds": {}}
    _Prometheus.asked, _Prometheus.down = [], False
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Prometheus)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def _measure(src: str, dst: str, at: float, mbps: float = 80.0) -> None:
    _Prometheus.series["netsched_link_bandwidth_bytes_per_second"][src, dst] = mbps * 1e6 / 8
    _Prometheus.series["netsched_link_rtt_seconds"][src, dst] = 0.002
    _Prometheus.series["netsched_link_measured_timestamp_seconds"][src, dst] = at


def test_a_refresh_reads_only_links_measured_since_the_last_one_less_the_lag(prometheus):
    wall, mono = [10_000.0], [500.0]
    store = TelemetryStore(max_age=120, clock=lambda: mono[0])
    feed = PrometheusFeed(prometheus, store, wall=lambda: wall[0])
    for i in range(50):  # old measurements: beyond max_age, never read
        _measure(f"n{i}", "x", 10_000.0 - 500)
    _measure("a", "b", 9_950.0)
    assert feed.refresh() == 1  # the first refresh reads the last max_age
    assert _Prometheus.asked[0] == queries(10_000.0 - 120)["bandwidth"]
    _measure("a", "c", 10_005.0)
    wall[0], mono[0] = 10_010.0, 510.0
    _Prometheus.asked.clear()
    assert feed.refresh() == 2  # a -> b (within the lag of the last refresh) and a -> c
    assert f"> {10_000.0 - LAG:.3f}" in _Prometheus.asked[0]
    wall[0], mono[0] = 10_060.0, 560.0
    assert feed.refresh() == 1  # a -> c again (within the lag of the last refresh); a -> b is older
    assert store.link("a", "b") is not None  # not read again, kept: 110 s old of 120
    wall[0], mono[0] = 10_070.0, 570.0
    assert feed.refresh() == 1  # a -> c: measured 10,005, after 10,060 - 60
    wall[0], mono[0] = 10_130.0, 630.0
    assert feed.refresh() == 0  # nothing measured since 10,070 - 60
    wall[0], mono[0] = 10_400.0, 900.0  # a gap longer than max_age: the last max_age again
    _Prometheus.asked.clear()
    feed.refresh()
    assert f"> {10_400.0 - 120:.3f}" in _Prometheus.asked[0]


def test_a_failed_refresh_keeps_the_window_open_and_entries_age_out(prometheus):
    wall, mono = [10_000.0], [500.0]
    store = TelemetryStore(max_age=120, clock=lambda: mono[0])
    feed = PrometheusFeed(prometheus, store, wall=lambda: wall[0])
    _measure("a", "b", 9_990.0)
    assert feed.refresh() == 1
    _Prometheus.down = True
    wall[0], mono[0] = 10_030.0, 530.0
    _measure("a", "c", 10_020.0)
    assert feed.refresh() == 0 and "could not be read" in feed.last_error
    _Prometheus.down = False
    wall[0], mono[0] = 10_060.0, 560.0
    _Prometheus.asked.clear()
    assert feed.refresh() == 2  # from the last success, so a -> c measured while down is read
    assert f"> {10_000.0 - LAG:.3f}" in _Prometheus.asked[0]
    _Prometheus.down = True
    mono[0] = 560.0 + 200
    feed.refresh()
    assert store.link("a", "b") is None and store.link("a", "c") is None
