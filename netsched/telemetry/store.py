"""The telemetry store the extender reads: the latest measurement per link, with its age.

A link is (source node, destination) where the destination is another node or a
data endpoint. Rules, in one place so the extender and its docs agree:

- an entry older than `max_age` seconds is stale and `link()` returns None for it;
- a link never measured also returns None;
- callers treat None as "unknown": scorers fall back to topology, and hard
  constraints (max RTT, min bandwidth) fail the node with a reason saying so.

Writers (the Prometheus reader or agents, issue 5) call `record()`; readers never block
on I/O.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LinkStats:
    rtt_ms: float
    bandwidth_mbps: float
    observed_at: float  # monotonic seconds


class TelemetryStore:
    def __init__(self, max_age: float = 120.0, clock: Callable[[], float] = time.monotonic):
        self.max_age = max_age
        self.clock = clock
        self._links: dict[str, dict[str, LinkStats]] = {}  # destination -> source -> stats
        self._lock = threading.Lock()
        self._version = 0  # bumped by every record(): aligned arrays older than it are rebuilt
        self._aligned: dict[tuple[str, int], tuple[int, Mapping, tuple[np.ndarray, ...]]] = {}
        self._nics: dict[str, tuple[float, float]] = {}  # node -> (NIC utilisation, observed_at)
        self._nic_version = 0
        self._nic_cache: tuple | None = None

    def record(self, src: str, dst: str, rtt_ms: float, bandwidth_mbps: float,
               observed_at: float | None = None) -> None:
        stats = LinkStats(rtt_ms, bandwidth_mbps, self.clock() if observed_at is None else observed_at)
        with self._lock:
            self._links.setdefault(dst, {})[src] = stats
            self._version += 1

    def aligned(self, dst: str, index: Mapping[str, int], size: int) -> tuple[np.ndarray, np.ndarray]:
        """Bandwidth (Mbit/s) and RTT (ms) from every source towards dst, at the positions `index`
        gives the sources (NaN: never measured, or older than max_age). The arrays are rebuilt only
        after new measurements, so a request costs a vector comparison, not a pass over the row."""
        key = (dst, id(index))
        with self._lock:
            hit = self._aligned.get(key)
            if hit is None or hit[0] != self._version or hit[1] is not index:
                if len(self._aligned) > 1024:  # tables come and go as nodes change
                    self._aligned.clear()
                arrays = _arrays(self._links.get(dst, {}), index, size)
                hit = self._aligned[key] = (self._version, index, arrays)
        bw, rtt, seen = hit[2]
        stale = self.clock() - seen > self.max_age  # NaN (never measured) compares False: stays NaN
        return np.where(stale, np.nan, bw), np.where(stale, np.nan, rtt)

    def record_nic(self, node: str, utilisation: float, observed_at: float | None = None) -> None:
        """A node's NIC utilisation (busiest interface and direction, 0..1)."""
        with self._lock:
            self._nics[node] = (utilisation, self.clock() if observed_at is None else observed_at)
            self._nic_version += 1

    def nic(self, node: str) -> float | None:
        found = self._nics.get(node)
        return None if found is None or self.clock() - found[1] > self.max_age else found[0]

    def nic_aligned(self, index: Mapping[str, int], size: int) -> np.ndarray:
        """NIC utilisation at the positions `index` gives the nodes (NaN: unknown or stale),
        rebuilt only after new readings, like `aligned`."""
        with self._lock:
            hit = self._nic_cache
            if hit is None or hit[0] != self._nic_version or hit[1] is not index:
                util, seen = np.full(size, np.nan), np.full(size, np.nan)
                for node, (value, at) in self._nics.items():
                    j = index.get(node)
                    if j is not None:
                        util[j], seen[j] = value, at
                hit = self._nic_cache = (self._nic_version, index, util, seen)
        return np.where(self.clock() - hit[3] > self.max_age, np.nan, hit[2])

    def link(self, src: str, dst: str) -> LinkStats | None:
        stats = self._links.get(dst, {}).get(src)
        if stats is None or self.clock() - stats.observed_at > self.max_age:
            return None
        return stats

    def fresh_links_to(self, dst: str) -> dict[str, LinkStats]:
        """Every source with a fresh measurement towards dst."""
        now = self.clock()
        with self._lock:
            row = dict(self._links.get(dst, {}))
        return {src: s for src, s in row.items() if now - s.observed_at <= self.max_age}

    def fresh_count(self) -> int:
        now = self.clock()
        with self._lock:
            ages = [now - s.observed_at for row in self._links.values() for s in row.values()]
        return sum(age <= self.max_age for age in ages)

    def __bool__(self) -> bool:
        return bool(self._links or self._nics)


def _arrays(row: dict[str, LinkStats], index: Mapping[str, int], size: int) -> tuple[np.ndarray, ...]:
    bw, rtt, seen = (np.full(size, np.nan) for _ in range(3))
    for src, s in row.items():
        j = index.get(src)
        if j is not None:
            bw[j], rtt[j], seen[j] = s.bandwidth_mbps, s.rtt_ms, s.observed_at
    return bw, rtt, seen
