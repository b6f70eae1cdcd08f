"""Whom an agent probes in a round: the links placement will ask about first, then a rotating sample
of every domain pair, then everyone else in turn. Pure and cheap (no I/O, work in proportion to what
it returns): the scale benchmark runs it for thousands of simulated agents.

A round has `peers_per_round` slots, filled in this order:
1. demand, at most `floor(demand_share x peers_per_round)`: the gang peers, data nodes and endpoints
   and PackingPlan nodes discovery found for this node, least recently measured first;
2. the domain sample (below), at most what its share of the window needs per round;
3. the rest of the demand not yet probed in this window, then everyone in rotation (at small sizes
   every pair stays fresh).

Domain sample. A window is `rounds_per_window = max_age / interval` rounds (120 s / 30 s = 4): a
measurement lives that long. At each configured level, narrowest first, a node in domain D (m
members, its rank r among them by name, 0-based) shares the probes to D's sibling domains (the other
domains of that level inside D's parent; at the widest level all other domains) with D's other
members. With s siblings taken in the order that starts after D, in window w the node takes

    siblings j = (r + w) mod m, +m, +2m, ...   when m <= s   (ceil(s / m) or floor(s / m) of them)
    sibling  j = (r + w) mod s                 when m > s    (one; several members share one)

and of each such sibling domain E its member number (w + r) mod |E|, so the pairs behind each
domain pair rotate from window to window. Together D's members probe every sibling once per window
(more than once when m > s); a node's share is sum over levels of ceil(s/m), spread over the
window's rounds (ceil(share / rounds_per_window) per round). When that exceeds the sample slots
(peers_per_round minus the demand taken), a window covers slots x rounds_per_window of the node's
share; the rotation by w moves the rest to later windows. A node without a level's label is alone
there: it takes no share at that level, and no one samples it as a domain of that level.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from netsched.api.topology import DEFAULT, Topology

Domain = tuple[str, ...]  # a domain key as Topology.path gives it: label values down to its level


@dataclass(frozen=True)
class Budget:
    peers_per_round: int = 8
    demand_share: float = 0.5  # of the round's slots demand may take before the domain sample
    rounds_per_window: int = 4  # max_age / interval: rounds a measurement stays fresh

    @property
    def demand_cap(self) -> int:
        return int(self.demand_share * self.peers_per_round)  # rounded down: the sample keeps its slot


@dataclass(frozen=True)
class Round:
    targets: tuple[str, ...]  # in the order chosen: demand, domain sample, rotation
    turn: int  # where the rotation over everyone continues next round


class Layout:
    """The domains of every level, from each node's labels; built once per discovery (and once for
    all simulated agents of a benchmark), then `samples` costs only what it returns."""

    def __init__(self, labels: Mapping[str, Mapping[str, str] | None], topology: Topology = DEFAULT):
        self.topology = topology
        self.paths = {name: topology.path(node_labels) for name, node_labels in labels.items()}
        depth = topology.depth
        self.members: list[dict[Domain, list[str]]] = [{} for _ in range(depth)]
        for name in sorted(self.paths):
            for k, domain in enumerate(self.paths[name]):
                if domain is not None:
                    self.members[k].setdefault(domain, []).append(name)
        self.rank = [{n: r for ms in level.values() for r, n in enumerate(ms)} for level in self.members]
        # the domains of level k inside each parent (the key's first k values), in name order
        self.children: list[dict[Domain, list[Domain]]] = [{} for _ in range(depth)]
        self.position: list[dict[Domain, int]] = [{} for _ in range(depth)]
        for k in range(depth):
            for domain in sorted(self.members[k]):
                siblings = self.children[k].setdefault(domain[:k], [])
                self.position[k][domain] = len(siblings)
                siblings.append(domain)

    def share(self, node: str) -> int:
        """How many sibling domains the node probes per window, over all levels."""
        return len(self.samples(node, 0))

    def samples(self, node: str, window: int) -> list[str]:
        """The node's domain sample for a window: one member of each sibling domain it takes, narrowest
        level first (module docstring: the formula)."""
        path = self.paths.get(node)
        if path is None:
            return []
        out = []
        for k in range(self.topology.depth - 1, -1, -1):
            mine = path[k]
            if mine is None:
                continue
            domains = self.children[k][mine[:k]]
            s, m, r = len(domains) - 1, len(self.members[k][mine]), self.rank[k][node]
            if s <= 0:
                continue
            after = self.position[k][mine] + 1
            picks = range((r + window) % m, s, m) if m <= s else ((r + window) % s,)
            for j in picks:
                members = self.members[k][domains[(after + j) % len(domains)]]
                out.append(members[(window + r) % len(members)])
        return out


def choose(node: str, layout: Layout, round_no: int, budget: Budget = Budget(),
           demand: Sequence[str] = (), last: Mapping[str, float] | None = None,
           everyone: Sequence[str] = (), turn: int = 0) -> Round:
    """The targets of round `round_no` (counted from the agent's start).
    demand: what placement will ask about; last: the round each target was last probed in (never:
    absent); everyone: every probe-able target in a fixed order, rotated through with `turn`."""
    slots = budget.peers_per_round
    last = last or {}
    chosen: list[str] = []
    taken = {node}

    def take(names: Sequence[str], limit: int) -> None:
        for name in names:
            if len(chosen) >= limit:
                return
            if name not in taken:
                taken.add(name)
                chosen.append(name)

    wanted = sorted(set(demand) - taken, key=lambda n: (last.get(n, -math.inf), n))
    take(wanted, budget.demand_cap)
    rounds = max(1, budget.rounds_per_window)
    window, phase = divmod(round_no, rounds)
    sample = layout.samples(node, window)
    per_round = math.ceil(len(sample) / rounds)
    take(sample[phase * per_round:(phase + 1) * per_round], slots)
    take([n for n in wanted if last.get(n, -math.inf) < window * rounds], slots)
    n = len(everyone)
    looked = 0
    while len(chosen) < slots and looked < n:
        take((everyone[(turn + looked) % n],), slots)
        looked += 1
    return Round(tuple(chosen), (turn + looked) % n if n else 0)


Endpoint = tuple[str, int]  # host, port
NO_LABELS: Mapping[str, Mapping[str, str]] = MappingProxyType({})


@dataclass(frozen=True)
class Found:
    """What discovery found: where each target answers probes (peer agents by node name, data
    endpoints by HOST:PORT), the labels of the nodes with agents (this one's too) and the targets
    placement will ask about."""
    endpoints: Mapping[str, Endpoint]
    # one shared empty mapping, so the agent sees no new discovery (and builds no new Layout) per round
    labels: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: NO_LABELS)
    demand: frozenset[str] = frozenset()
