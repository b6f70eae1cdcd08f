"""Link answers for pairs nobody probed: medians of the fresh measurements between domains.

At 1,000 nodes an agent's fresh targets cover a few percent of the pairs, so a lookup for a pair
(candidate -> peer or data endpoint) is mostly unknown. Nodes of one rack, block or zone share their
uplinks, so the measurements between two domains say what a pair between them would measure. From
the fresh measurements, per configured level (`domains`, shape (depth, nodes), widest first, equal id
= same domain), the median bandwidth and RTT with their sample count of:

- node -> domain: one source node towards every destination in a domain;
- domain -> domain: every source in one domain towards every destination in another;

each kept apart by the pairs' topology distance. Between two different domains of a level every pair
is as far apart (they share the same wider domains), but inside one domain pairs differ: a zone's
measurements mix rack-mates with pairs across its spine. A lookup between two rack-mates with too
few samples in their own rack is answered by the rack-mates of the wider domains (their zone's
racks, each to itself), never by the zone's between-rack median, which would make the nearest
placement look no better than one behind the spine.

A data endpoint is a domain of its own at every level (it has no labels), so the sources of one
domain towards an endpoint aggregate too. Only measured directions count: an aggregate is of what
sources measured towards destinations.

A lookup (`Aggregates.answer`, vectorised over every node as source) takes, per source:
1. the pair, if fresh;
2. else the reverse pair (target -> source), if fresh and the target is a node: RTT is the same round
   trip and the fabrics netsched runs on are symmetric, so one direction stands for the other;
3. else, from the narrowest level to the widest, node -> domain and then domain -> domain, the first
   with at least MIN_SAMPLES fresh samples;
4. else unknown: the caller falls back to topology, as for an unknown pair.
`origin` holds which, as an int8 per source (`PAIR`, `REVERSE`, `NODE_TO_DOMAIN + k`,
`DOMAIN_TO_DOMAIN + k` for level k widest first, `NONE`).

A median speaks for its domains' typical pair, not for the two ends of this one: a node that kept a
25 Gbit/s NIC among 100 Gbit/s rack-mates gets their median. So, where the agents export their NIC's
link speed (`speeds`, node -> Mbit/s), an aggregate's bandwidth for a pair whose slower NIC is B is at
most

    share x B   where the cell's pairs measured as slow a NIC as B (B >= the slowest of their slower NICs),
    B           where they did not (only the link speed is known then),

with share the NIC_SHARE_QUANTILE of the cell's measured bandwidth over each pair's slower NIC: what
pairs this far apart pass of their NICs where nothing else limits them (a high quantile: a cap must
not cut a well-connected pair below what it measures; where a path, not the NICs, limits the cell,
its slow-NIC pairs reach the highest share, so a cap there rarely bites). `cap` says where it did.

Cost: built once per store change (the feed refreshes it after each write; a request only reads),
with one sort per level and kind over the fresh samples S: O(levels x S log S). Memory: one row per
non-empty cell, so at most levels x 2 x S rows, and never more than levels x (nodes + domains) x
destination domains; a row is 52 bytes, the reverse view holds 32 bytes per node -> node sample, and
the NIC speeds 8 bytes per node.
A cell is fresh while its newest sample is (samples that age out between two writes still count until
the next one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from netsched.api.topology import Topology

MIN_SAMPLES = 3  # fresh samples an aggregate needs before it answers for a pair
NIC_SHARE_QUANTILE = 0.9  # of measured bandwidth / the slower NIC: what a cell's best-connected pairs reach
CLASSES = 8  # cells are also keyed by the pairs' topology distance (at most 6 levels + far + 1)
NONE, PAIR, REVERSE = 0, 1, 2
NODE_TO_DOMAIN, DOMAIN_TO_DOMAIN = 16, 32  # + level index, widest first


class LinkAnswer(NamedTuple):
    """Per source (by table index or the candidates asked for): bandwidth (Mbit/s) and RTT (ms), NaN
    where unknown; where each came from (an origin code), how many measurements it is the median of, and
    the NIC cap (Mbit/s) that lowered an aggregate's bandwidth (NaN where none did)."""

    bw: np.ndarray
    rtt: np.ndarray
    origin: np.ndarray
    samples: np.ndarray
    cap: np.ndarray

    def at(self, idx: np.ndarray) -> LinkAnswer:
        return LinkAnswer(self.bw[idx], self.rtt[idx], self.origin[idx], self.samples[idx], self.cap[idx])


def level_of(origin: int) -> tuple[str, int] | None:
    """("node", k) or ("domain", k) for an aggregate's origin code; None for a pair, reverse or none."""
    if origin >= DOMAIN_TO_DOMAIN:
        return "domain", origin - DOMAIN_TO_DOMAIN
    if origin >= NODE_TO_DOMAIN:
        return "node", origin - NODE_TO_DOMAIN
    return None


@dataclass(frozen=True)
class Cells:
    """Aggregated measurements keyed by an int64 (source id x destination width + destination id)."""

    keys: np.ndarray  # sorted, unique
    bw: np.ndarray  # medians
    rtt: np.ndarray
    samples: np.ndarray  # int32
    newest: np.ndarray  # observation time of the newest sample (monotonic seconds)
    share: np.ndarray  # NIC_SHARE_QUANTILE of bandwidth / the pair's slower NIC, NaN where no NIC is known
    slowest: np.ndarray  # the slowest of those slower NICs (Mbit/s), NaN where none is known

    @classmethod
    def of(cls, keys: np.ndarray, bw: np.ndarray, rtt: np.ndarray, seen: np.ndarray,
           ratio: np.ndarray) -> Cells:
        if not len(keys):
            empty = np.empty(0)
            return cls(np.empty(0, dtype=np.int64), empty, empty, np.empty(0, dtype=np.int32), empty, empty,
                       empty)
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        unique, starts, counts = np.unique(keys, return_index=True, return_counts=True)
        newest = np.maximum.reduceat(seen[order], starts)
        ratio = ratio[order]
        return cls(unique, _medians(bw[order], starts, counts), _medians(rtt[order], starts, counts),
                   counts.astype(np.int32), newest, _quantiles(ratio, starts, counts, NIC_SHARE_QUANTILE),
                   np.fmin.reduceat(bw[order] / ratio, starts))

    def find(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Row of each key (clipped) and whether it is there."""
        rows = np.clip(np.searchsorted(self.keys, keys), 0, max(len(self.keys) - 1, 0))
        found = (self.keys[rows] == keys) if len(self.keys) else np.zeros(len(keys), dtype=bool)
        return rows, found

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.keys, self.bw, self.rtt, self.samples, self.newest, self.share,
                                      self.slowest))


def _distances(domains: np.ndarray, sources: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Topology distance of each (source, target) pair by table index (a target < 0 is an endpoint:
    farther than any level), as `Topology.distance` counts it: 1 + levels narrower than the narrowest
    shared one, depth + 1 when none is shared."""
    depth = domains.shape[0]
    apart = np.full(len(sources), depth + 1, dtype=np.int64)
    node = targets >= 0
    for k in range(depth):  # widest first: a narrower shared level overwrites
        apart[node & (domains[k][sources] == domains[k][np.where(node, targets, 0)])] = depth - k
    return apart


def _quantiles(values: np.ndarray, starts: np.ndarray, counts: np.ndarray, q: float) -> np.ndarray:
    """The q-quantile (nearest rank, lower) of each group's known values (NaN sorts last), NaN where a
    group has none."""
    group = np.repeat(np.arange(len(starts)), counts)
    ordered = values[np.lexsort((values, group))]
    known = np.add.reduceat(~np.isnan(values), starts) if len(values) else np.zeros(0, dtype=int)
    at = starts + np.floor(q * np.maximum(known - 1, 0)).astype(np.int64)
    out: np.ndarray = np.where(known > 0, ordered[np.minimum(at, len(values) - 1)], np.nan)
    return out


def _medians(values: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Median of each group (values grouped by key, groups at starts): the groups sorted within
    themselves by a lexsort on (value, group)."""
    group = np.repeat(np.arange(len(starts)), counts)
    ordered = values[np.lexsort((values, group))]
    low = starts + (counts - 1) // 2
    high = starts + counts // 2
    medians: np.ndarray = (ordered[low] + ordered[high]) / 2
    return medians


@dataclass(frozen=True)
class Aggregates:
    """Per level (widest first): node -> domain and domain -> domain cells; and every fresh
    node -> node measurement by source, for reverse lookups."""

    index: Mapping[str, int]
    domains: np.ndarray
    widths: np.ndarray  # per level: domain ids in use; an endpoint's id there is width + its number
    endpoints: dict[str, int]
    node_to_domain: tuple[Cells, ...]
    domain_to_domain: tuple[Cells, ...]
    outgoing: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]  # src -> dst, bw, rtt, seen
    nic: np.ndarray  # per node: its NIC's link speed, Mbit/s (NaN: unknown)

    @classmethod
    def build(cls, links: Mapping[str, Mapping[str, Any]], index: Mapping[str, int], domains: np.ndarray,
              now: float, max_age: float, speeds: Mapping[str, float] | None = None) -> Aggregates:
        """From the store's links (destination -> source -> LinkStats), those fresh at `now`, and the
        nodes' NIC link speeds (node -> Mbit/s) where known."""
        src, dst, bw, rtt, seen = [], [], [], [], []
        endpoints: dict[str, int] = {}
        for target, row in links.items():
            j = index.get(target)
            if j is None:  # a data endpoint (or a node this table lacks: the same, harmlessly)
                j = -1 - endpoints.setdefault(target, len(endpoints))
            for source, s in row.items():
                i = index.get(source)
                if i is not None and now - s.observed_at <= max_age:
                    src.append(i)
                    dst.append(j)
                    bw.append(s.bandwidth_mbps)
                    rtt.append(s.rtt_ms)
                    seen.append(s.observed_at)
        s_ = np.array(src, dtype=np.int64)
        d_ = np.array(dst, dtype=np.int64)
        b_, r_, t_ = np.array(bw, dtype=float), np.array(rtt, dtype=float), np.array(seen, dtype=float)
        depth = domains.shape[0]
        widths = (domains.max(axis=1) + 1 if domains.size else np.zeros(depth)).astype(np.int64)
        n2d, d2d = [], []
        node = d_ >= 0
        apart = _distances(domains, s_, np.where(node, d_, -1))
        nic = np.full(domains.shape[1], np.nan)
        for name, mbps in (speeds or {}).items():
            if (i := index.get(name)) is not None and mbps > 0:
                nic[i] = mbps
        ratio = b_ / np.fmin(nic[s_], np.where(node, nic[np.where(node, d_, 0)], np.nan))
        for k in range(depth):
            width = int(widths[k]) + len(endpoints)
            to = np.where(node, domains[k][np.where(node, d_, 0)], widths[k] - 1 - d_)
            n2d.append(Cells.of((s_ * width + to) * CLASSES + apart, b_, r_, t_, ratio))
            d2d.append(Cells.of((domains[k][s_] * width + to) * CLASSES + apart, b_, r_, t_, ratio))
        outgoing = {}
        if node.any():
            order = np.argsort(s_[node], kind="stable")
            srcs, dsts = s_[node][order], d_[node][order]
            bws, rtts, seens = b_[node][order], r_[node][order], t_[node][order]
            unique, starts = np.unique(srcs, return_index=True)
            ends = [*starts[1:].tolist(), len(srcs)]
            for i, a, b in zip(unique.tolist(), starts.tolist(), ends, strict=True):
                outgoing[i] = (dsts[a:b], bws[a:b], rtts[a:b], seens[a:b])
        return cls(index, domains, widths, endpoints, tuple(n2d), tuple(d2d), outgoing, nic)

    @property
    def nbytes(self) -> int:
        """Memory the cells and the reverse view hold."""
        cells = sum(c.nbytes for c in (*self.node_to_domain, *self.domain_to_domain))
        return cells + sum(a.nbytes for arrays in self.outgoing.values() for a in arrays)

    def answer(self, target: str, pair_bw: np.ndarray, pair_rtt: np.ndarray, now: float,
               max_age: float, min_samples: int = MIN_SAMPLES) -> LinkAnswer:
        """Every node (by table index) towards target: the pair where fresh (pair_* from the store,
        NaN where not), else the reverse pair, else an aggregate, else NaN (module docstring)."""
        n = len(pair_bw)
        bw, rtt = pair_bw.copy(), pair_rtt.copy()
        origin = np.where(np.isnan(bw), NONE, PAIR).astype(np.int8)
        samples = (origin == PAIR).astype(np.int32)
        cap, share, slowest = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
        j = self.index.get(target)
        if j is not None and j in self.outgoing:
            dsts, b, r, seen = self.outgoing[j]
            fresh = now - seen <= max_age
            dsts, b, r = dsts[fresh], b[fresh], r[fresh]
            todo = origin[dsts] == NONE
            dsts, b, r = dsts[todo], b[todo], r[todo]
            bw[dsts], rtt[dsts], origin[dsts], samples[dsts] = b, r, REVERSE, 1
        e = self.endpoints.get(target) if j is None else None
        if j is None and e is None:
            return LinkAnswer(bw, rtt, origin, samples, cap)
        everyone = np.arange(n, dtype=np.int64)
        apart = _distances(self.domains, everyone, np.full(n, -1 if j is None else j, dtype=np.int64))
        for k in reversed(range(len(self.widths))):
            width = int(self.widths[k]) + len(self.endpoints)
            to = int(self.domains[k][j]) if j is not None else int(self.widths[k]) + (e or 0)
            for cells, sources, code in ((self.node_to_domain[k], everyone, NODE_TO_DOMAIN + k),
                                         (self.domain_to_domain[k], self.domains[k].astype(np.int64),
                                          DOMAIN_TO_DOMAIN + k)):
                todo = np.flatnonzero(origin == NONE)
                if not len(todo) or not len(cells.keys):
                    continue
                rows, found = cells.find((sources[todo] * width + to) * CLASSES + apart[todo])
                ok = found & (cells.samples[rows] >= min_samples) & (now - cells.newest[rows] <= max_age)
                at, rows = todo[ok], rows[ok]
                bw[at], rtt[at], samples[at] = cells.bw[rows], cells.rtt[rows], cells.samples[rows]
                share[at], slowest[at] = cells.share[rows], cells.slowest[rows]
                origin[at] = code
        # A median speaks for its domains' typical pair, not for the two ends of this one: a pair passes
        # no more of its slower NIC than the cell's pairs passed of theirs, and no more than that NIC's
        # link speed where the cell measured no NIC as slow (module docstring).
        bottleneck = np.fmin(self.nic, self.nic[j] if j is not None else np.nan)
        limit = np.where(bottleneck >= slowest, share, 1.0) * bottleneck
        lowered = (origin >= NODE_TO_DOMAIN) & (limit < bw) & ~np.isclose(limit, bw)  # not by rounding
        bw[lowered] = cap[lowered] = limit[lowered]
        return LinkAnswer(bw, rtt, origin, samples, cap)


def node_domains(labels: Mapping[str, Mapping[str, str] | None],
                 topology: Topology) -> tuple[dict[str, int], np.ndarray]:
    """An index of the nodes and their domain ids per level (as the extender's node table has them),
    from node labels: for callers without a node table (the operator's records)."""
    names = sorted(labels)
    domains, _ = domain_ids([topology.path(labels[n]) for n in names], topology.depth)
    return {n: i for i, n in enumerate(names)}, domains


def domain_ids(paths: Sequence[tuple[tuple[str, ...] | None, ...]],
               depth: int) -> tuple[np.ndarray, tuple[list[str | None], ...]]:
    """Domain ids per level, widest first, of nodes given by their `Topology.path`: shape (depth, nodes),
    equal ids for the same domain, an id of its own for a node alone at a level; and each id's name
    (the level's label value, None for a node alone)."""
    domains = np.empty((depth, len(paths)), dtype=np.int32)
    all_names: list[list[str | None]] = []
    for k in range(depth):
        ids: dict[tuple[str, ...], int] = {}
        level_names: list[str | None] = []
        for i, path in enumerate(paths):
            key = path[k]
            if key is None:
                domains[k, i] = len(level_names)
                level_names.append(None)
                continue
            found = ids.get(key)
            if found is None:
                found = ids[key] = len(level_names)
                level_names.append(key[-1])
            domains[k, i] = found
        all_names.append(level_names)
    return domains, tuple(all_names)
