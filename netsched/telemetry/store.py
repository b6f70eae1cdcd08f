"""The telemetry store the extender reads: the latest measurement per link, with its age.

A link is (source node, destination) where the destination is another node or a
data endpoint. Rules, in one place so the extender and its docs agree:

- an entry older than `max_age` seconds is stale and reads as unknown;
- a link never measured also reads as unknown;
- callers treat unknown as such: scorers fall back to topology, and hard
  constraints (max RTT, min bandwidth) fail the node with a reason saying so.

Writers (the Prometheus feed) record a whole round at once with `record_many()`;
readers take a `TelemetrySnapshot`: the store's tables as they were at one instant,
aged against one clock reading. Writes never change a table a snapshot holds (a write
replaces the rows it touches and then the table, under the lock), so a request that
reads several links sees one consistent state and never blocks on a writer for longer
than a reference swap.

Pairs nobody measured are answered from domain aggregates (`aggregates.py`): `answer()` reads them,
built for the node table the store follows (`follow()`, which the extender's table publisher calls
with each new table) and again after each write (`refresh_aggregates()`, which the feed calls), so
a request reads cells and builds them only if it raced one of those. Other readers (the operator's
records, once per job start) build them when they ask.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netsched.telemetry.aggregates import Aggregates, LinkAnswer


@dataclass(frozen=True)
class LinkStats:
    rtt_ms: float
    bandwidth_mbps: float
    observed_at: float  # monotonic seconds


Links = Mapping[str, Mapping[str, LinkStats]]  # destination -> source -> stats
Nics = Mapping[str, tuple[float, float]]  # node -> (NIC utilisation or link speed in Mbit/s, observed_at)
LinkRecord = tuple[str, str, float, float, float | None]  # src, dst, rtt ms, bandwidth Mbit/s, observed_at
AGGREGATES_KEPT = 4  # built aggregates kept: the current links and table, and a few a request may still hold
# Seconds a lookup's answer is reused by later requests for the same target over the same aggregates:
# kube-scheduler asks about a gang's peers pod after pod, and at 5,000 nodes an answer costs about a
# millisecond. An entry may so be used up to this much past max_age.
ANSWER_REUSE = 1.0


class TelemetryStore:
    def __init__(self, max_age: float = 120.0, clock: Callable[[], float] = time.monotonic):
        self.max_age = max_age
        self.clock = clock
        self._lock = threading.Lock()
        self._links: Links = {}
        self._nics: Nics = {}
        self._speeds: Nics = {}
        # Arrays aligned to a node table, kept across requests: keyed by the row object they were
        # built from, which a write replaces, so an entry is valid exactly while its row is current.
        self._aligned: dict[tuple[str, str, int],
                            tuple[object, Mapping[str, int], tuple[np.ndarray, ...]]] = {}
        # Aggregates by the links, NIC speeds and node table they were built from (identity, as for _aligned).
        self._aggregates: list[tuple[Links, Nics, Mapping[str, int], np.ndarray, Aggregates]] = []
        self._answers: dict[tuple[str, int], tuple[Aggregates, float, LinkAnswer]] = {}
        self._table: tuple[Mapping[str, int], np.ndarray] | None = None  # the node table followed

    def record(self, src: str, dst: str, rtt_ms: float, bandwidth_mbps: float,
               observed_at: float | None = None) -> None:
        self.record_many([(src, dst, rtt_ms, bandwidth_mbps, observed_at)])

    def record_nic(self, node: str, utilisation: float, observed_at: float | None = None) -> None:
        """A node's NIC utilisation (busiest interface and direction, 0..1)."""
        self.record_many((), [(node, utilisation, observed_at)])

    def record_nic_speed(self, node: str, mbps: float, observed_at: float | None = None) -> None:
        """The link speed (Mbit/s) of the NIC a node's probes leave by."""
        self.record_many((), (), [(node, mbps, observed_at)])

    def record_many(self, links: Iterable[LinkRecord],
                    nics: Iterable[tuple[str, float, float | None]] = (),
                    speeds: Iterable[tuple[str, float, float | None]] = ()) -> None:
        """A round of measurements, published at once: readers see all of it or none."""
        now = self.clock()
        rows: dict[str, dict[str, LinkStats]] = {}
        with self._lock:
            for src, dst, rtt_ms, bandwidth_mbps, observed_at in links:
                row = rows.get(dst)
                if row is None:
                    row = rows[dst] = dict(self._links.get(dst, {}))
                row[src] = LinkStats(rtt_ms, bandwidth_mbps, now if observed_at is None else observed_at)
            if rows:
                self._links = _without_stale({**self._links, **rows}, now - self.max_age)
            new_nics = {node: (value, now if at is None else at) for node, value, at in nics}
            if new_nics:
                self._nics = {**self._nics, **new_nics}
            new_speeds = {node: (value, now if at is None else at) for node, value, at in speeds}
            if new_speeds:
                self._speeds = {**self._speeds, **new_speeds}

    def snapshot(self, now: float | None = None) -> TelemetrySnapshot:
        """The store as it is now, aged at `now` (the caller's clock reading, else the store's)."""
        with self._lock:
            links, nics, speeds = self._links, self._nics, self._speeds
        now = self.clock() if now is None else now
        return TelemetrySnapshot(self, links, nics, now, self.max_age, speeds)

    def _arrays(self, dst: str, row: Mapping[str, Any], index: Mapping[str, int], size: int,
                nic: bool = False) -> tuple[np.ndarray, ...]:
        """Per index position: bandwidth, RTT and observation time of one destination's row, or
        (nic=True) utilisation and observation time of the NIC readings."""
        key = ("nic" if nic else "link", dst, id(index))
        with self._lock:
            hit = self._aligned.get(key)
        if hit is not None and hit[0] is row and hit[1] is index:
            return hit[2]
        arrays: tuple[np.ndarray, ...]
        if nic:
            util, at = np.full(size, np.nan), np.full(size, np.nan)
            for node, (value, observed) in row.items():
                j = index.get(node)
                if j is not None:
                    util[j], at[j] = value, observed
            arrays = (util, at)
        else:
            bw, rtt, seen = (np.full(size, np.nan) for _ in range(3))
            for src, s in row.items():
                j = index.get(src)
                if j is not None:
                    bw[j], rtt[j], seen[j] = s.bandwidth_mbps, s.rtt_ms, s.observed_at
            arrays = (bw, rtt, seen)
        with self._lock:
            if len(self._aligned) > 1024:  # tables come and go as nodes change
                self._aligned.clear()
            self._aligned[key] = (row, index, arrays)
        return arrays

    def aggregates(self, links: Links, index: Mapping[str, int], domains: np.ndarray,
                   now: float | None = None, speeds: Nics | None = None) -> Aggregates:
        """The aggregates of `links` over the node table (index, domains), their answers bounded by the
        NIC speeds fresh at `now` (the store's own when not given), built on first use."""
        speeds = self._speeds if speeds is None else speeds
        with self._lock:
            for built in self._aggregates:
                if built[0] is links and built[1] is speeds and built[2] is index and built[3] is domains:
                    return built[4]
        now = self.clock() if now is None else now
        fresh = {node: mbps for node, (mbps, at) in speeds.items() if now - at <= self.max_age}
        found = Aggregates.build(links, index, domains, now, self.max_age, fresh)
        with self._lock:
            self._aggregates = [*self._aggregates[-(AGGREGATES_KEPT - 1):],
                                (links, speeds, index, domains, found)]
        return found

    def _answer(self, target: str, index: Mapping[str, int], found: Aggregates,
                snap: TelemetrySnapshot) -> LinkAnswer:
        """snap's answer towards target, reused for ANSWER_REUSE seconds over the same aggregates."""
        key = (target, id(index))
        with self._lock:
            hit = self._answers.get(key)
        if hit is not None and hit[0] is found and 0 <= snap.now - hit[1] < ANSWER_REUSE:
            return hit[2]
        answer = snap._build_answer(target, index, found)
        for array in answer:  # shared by the requests that reuse it
            array.flags.writeable = False
        with self._lock:  # only the answers still reusable are kept: a few targets' worth
            self._answers = {k: v for k, v in self._answers.items() if 0 <= snap.now - v[1] < ANSWER_REUSE}
            self._answers[key] = (found, snap.now, answer)
        return answer

    def follow(self, index: Mapping[str, int], domains: np.ndarray) -> None:
        """Aggregate over this node table from now on: built now (the extender's table publisher
        calls this with each new table) and after each write."""
        with self._lock:
            links, speeds, self._table = self._links, self._speeds, (index, domains)
        self.aggregates(links, index, domains, speeds=speeds)

    def refresh_aggregates(self) -> None:
        """Build the current links' aggregates for the node table followed, so the next request finds
        them built (the feed calls this after each write)."""
        with self._lock:
            links, speeds, table = self._links, self._speeds, self._table
        if table is not None:
            self.aggregates(links, *table, speeds=speeds)

    # Reads of the current state, for callers that want one value (the operator, metrics, tests).
    def link(self, src: str, dst: str) -> LinkStats | None:
        return self.snapshot().link(src, dst)

    def nic(self, node: str) -> float | None:
        return self.snapshot().nic(node)

    def fresh_links_to(self, dst: str) -> dict[str, LinkStats]:
        return self.snapshot().fresh_links_to(dst)

    def fresh_count(self) -> int:
        return self.snapshot().fresh_count()

    def aligned(self, dst: str, index: Mapping[str, int], size: int) -> tuple[np.ndarray, np.ndarray]:
        return self.snapshot().aligned(dst, index, size)

    def nic_aligned(self, index: Mapping[str, int], size: int) -> np.ndarray:
        return self.snapshot().nic_aligned(index, size)

    def __bool__(self) -> bool:
        return bool(self._links or self._nics)


def _without_stale(links: Links, cutoff: float) -> Links:
    """The links measured since cutoff: a stale entry reads as unknown anyway, and dropping it keeps the
    store as large as one freshness window of measurements, not every destination ever probed. A row
    with nothing stale is kept as it is (its aligned arrays stay valid)."""
    out: dict[str, Mapping[str, LinkStats]] = {}
    for dst, row in links.items():
        if any(s.observed_at < cutoff for s in row.values()):
            fresh = {src: s for src, s in row.items() if s.observed_at >= cutoff}
            if fresh:
                out[dst] = fresh
        else:
            out[dst] = row
    return out


@dataclass(frozen=True)
class TelemetrySnapshot:
    """The store's links and NIC readings at one instant, each aged against `now`."""

    store: TelemetryStore = field(repr=False)
    links: Links
    nics: Nics
    now: float
    max_age: float
    speeds: Nics = field(default_factory=dict)  # node -> (NIC link speed in Mbit/s, observed_at)

    def fresh(self, observed_at: float) -> bool:
        return self.now - observed_at <= self.max_age

    def link(self, src: str, dst: str) -> LinkStats | None:
        stats = self.links.get(dst, {}).get(src)
        return stats if stats is not None and self.fresh(stats.observed_at) else None

    def nic(self, node: str) -> float | None:
        found = self.nics.get(node)
        return found[0] if found is not None and self.fresh(found[1]) else None

    def fresh_links_to(self, dst: str) -> dict[str, LinkStats]:
        """Every source with a fresh measurement towards dst."""
        return {src: s for src, s in self.links.get(dst, {}).items() if self.fresh(s.observed_at)}

    def fresh_count(self) -> int:
        return sum(self.fresh(s.observed_at) for row in self.links.values() for s in row.values())

    def aligned(self, dst: str, index: Mapping[str, int], size: int) -> tuple[np.ndarray, np.ndarray]:
        """Bandwidth (Mbit/s) and RTT (ms) from every source towards dst, at the positions `index`
        gives the sources (NaN: never measured, or older than max_age). The position arrays are
        rebuilt only after new measurements towards dst, so a request costs a vector comparison."""
        bw, rtt, seen = self.store._arrays(dst, self.links.get(dst, {}), index, size)
        stale = self.now - seen > self.max_age  # NaN (never measured) compares False: stays NaN
        return np.where(stale, np.nan, bw), np.where(stale, np.nan, rtt)

    def answer(self, target: str, index: Mapping[str, int], domains: np.ndarray) -> LinkAnswer:
        """From every node (by the positions `index` gives) towards target: the fresh pair, else the
        reverse pair, else a domain aggregate, else NaN, with where each came from (aggregates.py)."""
        found = self.store.aggregates(self.links, index, domains, self.now, self.speeds)
        return self.store._answer(target, index, found, self)

    def _build_answer(self, target: str, index: Mapping[str, int], found: Aggregates) -> LinkAnswer:
        bw, rtt = self.aligned(target, index, len(index))
        return found.answer(target, bw, rtt, self.now, self.max_age)

    def nic_aligned(self, index: Mapping[str, int], size: int) -> np.ndarray:
        """NIC utilisation at the positions `index` gives the nodes (NaN: unknown or stale)."""
        util, seen = self.store._arrays("", self.nics, index, size, nic=True)
        return np.where(self.now - seen > self.max_age, np.nan, util)

    def __bool__(self) -> bool:
        return bool(self.links or self.nics)
