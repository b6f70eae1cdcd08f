"""Telemetry at scale: the agents' probes, their Prometheus series and the extender's link lookups
on a simulated network of 100, 1,000 and 5,000 nodes; and what placement loses with less telemetry.

    nice -n 5 python bench/telemetry_scale.py [--sizes 100,1000,5000] [--seed 2027]
        [--jct-nodes 1000] [--jct-gangs 300] [--jct-seeds 2027,2028,2029] [--no-prometheus] [--no-publish]

Network: the simulator's Cluster (netsched/datagen/simulator.py) with racks of about RACK_NODES
nodes, zones of several racks, every link's true bandwidth and RTT; a probe reads the true value
times lognormal(0, measure_noise). No sockets: the real `Agent` runs its real rounds on a simulated
clock, its probe functions and clocks given by that network (`SimulatedNetwork`).

Per size, for each scheme, on the same network and gangs: today's (the agents rotate through every
node, their link gauges never removed; the extender answers from the pair only) and demand + domains
(the agents know the nodes' labels and the waiting gangs' peers: netsched/telemetry/targets.py; the
extender falls back to the reverse pair and domain aggregates: netsched/telemetry/aggregates.py).
Today's per-destination probe counters are gone from the agent, so today's rows count its link
gauges only.
- lookups: at LOOKUP_INSTANTS random instants after WARM_UP_S, for every waiting gang, every
  candidate node towards each of the gang's placed peers, through the extender's own
  `Snapshot.measured` on a store the real `PrometheusFeed` filled; answered by a fresh pair, an
  aggregate or nothing;
- series: lines of `generate_latest()` of SERIES_AGENTS agents' real `AgentMetrics` after a
  rotation through every node (link series: those with a `dst` label), per node and times the nodes;
- probe bytes per node per minute over the lookup window, against the agent's budget;
- feed: wall time of `PrometheusFeed.refresh()` at each instant against an HTTP server answering
  its queries with the JSON Prometheus would (every agent's link series as an instant vector); and
  once, at the end, against a real Prometheus that scraped every agent's series (a refresh also
  builds the aggregates for the extender's node table);
- memory: what tracemalloc sees retained by the node table, the store after one refresh and one
  round of lookups (and the aggregates those build).

Placement quality (`--jct-nodes`): a stream of training gangs placed replica by replica on free
GPUs, each next replica on the node with the best weakest link to the replicas already placed as a
telemetry view sees it, against the true completion time (`simulator.completion_seconds`, no noise):
(a) every pair known (measured once, with the probes' noise), (b) aggregates only: the extender's
domain aggregates (`Aggregates`) of what the agents measured in their first WARM_UP_S, bounded by the
NIC speeds they exported, every pair and reverse pair hidden, (c) topology only (fewest domain levels
crossed). The agents' target order is seeded too, so a seed gives the same probes run after run.
"""

from __future__ import annotations

import argparse
import heapq
import http.server
import json
import math
import os
import random
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric

from netsched.api.labels import RACK_LABEL, ZONE_LABEL
from netsched.api.topology import DEFAULT
from netsched.datagen.simulator import COMM_LEVELS, GPUS_PER_NODE, Cluster, Job, SimConfig, completion_seconds
from netsched.datagen.testbed import start_prometheus, stop
from netsched.extender.snapshot import NodeTable, Snapshot
from netsched.telemetry import aggregates as origins
from netsched.telemetry.agent import Agent, ProbePlan
from netsched.telemetry.nic import NicMonitor
from netsched.telemetry.probe import Bandwidth
from netsched.telemetry.prometheus import MEASURED, NIC_QUERY, SPEED_QUERY, VALUES, PrometheusFeed, queries
from netsched.telemetry.store import TelemetryStore
from netsched.telemetry.targets import Found, Layout

sys.path.insert(0, str(Path(__file__).parent))
from report import exit_on_sigterm, publish  # noqa: E402

SECTION = "## Telemetry at scale"
SIZES = (100, 1000, 5000)
RACK_NODES = 24
MAX_AGE_S = 120.0  # the extender's --telemetry-max-age default
WARM_UP_S = 180.0  # past the first freshness window (MAX_AGE_S) and a round
LOOKUP_INSTANTS = 4
LOOKUP_WINDOW_S = 120.0  # instants drawn in [WARM_UP_S, WARM_UP_S + LOOKUP_WINDOW_S]
WAITING_GANGS = 16  # gangs waiting for placement at any instant, on average
GANG_WAIT_S = 300.0  # mean time a gang waits
CANDIDATE_SHARE = 0.5  # of the nodes: those with room for a gang's next replica
SERIES_AGENTS = 8
PROMETHEUS_MAX_LINKS = 1_000_000  # more link series than this are left out of the real-Prometheus run
START_UNIX = 1_767_225_600.0
PAIR, AGGREGATE, NONE = "pair", "aggregate", "none"
SPEED = "netsched_nic_speed_bytes_per_second"
TARGETS = {"answered": 0.95, "series_per_node": 50, "series_total_5000": 300_000, "jct_aggregates": 0.05}
VIEWS = ("pairs", "aggregates", "topology")


def shape(nodes: int) -> tuple[int, int]:
    """Zones and racks per zone for racks of about RACK_NODES nodes."""
    racks = max(1, math.ceil(nodes / RACK_NODES))
    zones = min(26, max(1, round(math.sqrt(racks / 2))))
    return zones, math.ceil(racks / zones)


def make_cluster(nodes: int, seed: int) -> Cluster:
    zones, racks_per_zone = shape(nodes)
    cfg = SimConfig(nodes=nodes, zones=zones, racks_per_zone=racks_per_zone, seed=seed)
    return Cluster(cfg, np.random.default_rng(seed))


class SimulatedNetwork:
    """Answers the agents' probes from the cluster's true links, on a simulated clock: `now` in
    seconds from the start, `source` the node whose agent is probing."""

    def __init__(self, cluster: Cluster, rng: np.random.Generator, noise: float = SimConfig.measure_noise):
        self.cluster, self.rng, self.noise = cluster, rng, noise
        self.index = {n: i for i, n in enumerate(cluster.names)}
        self.now, self.source = 0.0, 0
        self.sent = np.zeros(len(cluster.names))  # probe bytes by source node

    def wall(self) -> float:
        return START_UNIX + self.now

    def measure_rtt(self, host: str, port: int) -> float:
        _, rtt = self.cluster.node_link(self.source, self.index[host])
        return float(rtt * self.rng.lognormal(0, self.noise))

    def measure_bandwidth(self, host: str, port: int, size: int) -> Bandwidth:
        bw, _ = self.cluster.node_link(self.source, self.index[host])
        mbps = float(bw * self.rng.lognormal(0, self.noise))
        self.sent[self.source] += size
        return Bandwidth(mbps, size, size * 8 / (mbps * 1e6))

    def nic_speed(self, host: str) -> float:
        """The probing node's NIC link speed, as its agent reads it from /sys."""
        return float(self.cluster.nic[self.source])


class NoNics(NicMonitor):
    def __init__(self) -> None:
        super().__init__(read=dict)


@dataclass(frozen=True)
class Scheme:
    """How the agents choose targets and the extender answers lookups."""
    name: str
    plan: ProbePlan
    domains: bool  # agents know the nodes' labels (the domain sample) and what placement asks (demand)
    aggregates: bool  # the extender answers unmeasured pairs from aggregates


TODAY = Scheme("today", ProbePlan(max_links=2**31), domains=False, aggregates=False)  # gauges never removed
NEW = Scheme("demand + domains", ProbePlan(), domains=True, aggregates=True)


def make_agents(net: SimulatedNetwork, scheme: Scheme, gangs: list[Gang]) -> list[Agent]:
    """An agent per node, each discovering every other node; with `scheme.domains`, their labels and
    the placed peers of the waiting gangs it is a candidate for."""
    cluster, names = net.cluster, net.cluster.names
    everyone = {n: (n, 0) for n in names}
    labels = {n: {ZONE_LABEL: cluster.zone_names[cluster.zone[i]], RACK_LABEL: f"rack-{cluster.rack[i]}"}
              for i, n in enumerate(names)}
    layout = Layout(labels, DEFAULT)

    def targets_of(i: int) -> Callable[[], Found]:
        if not scheme.domains:
            return lambda: Found(everyone)

        def found() -> Found:
            demand = frozenset(names[p] for g in gangs if g.arrives <= net.now < g.leaves and g.room[i]
                               for p in g.peers)
            return Found(everyone, labels, demand)
        return found

    agents = []
    for i, n in enumerate(names):
        agent = Agent(n, targets_of(i), scheme.plan, nics=NoNics(), clock=lambda: net.now,
                      rtt=net.measure_rtt, bandwidth=net.measure_bandwidth, wall=net.wall,
                      nic_speed=net.nic_speed)
        if scheme.domains:  # one Layout for all (each agent would build the same one on its first round)
            agent._labels, agent._layout = labels, layout
        agents.append(agent)
    return agents


def run_rounds(net: SimulatedNetwork, agents: list[Agent], until: float, schedule: list[tuple[float, int]],
               rng: np.random.Generator) -> None:
    """Every agent in the schedule (a heap of (next round, agent)) probes at its jittered interval (as
    `Agent.run` does) up to `until`."""
    while schedule and schedule[0][0] <= until:
        at, i = heapq.heappop(schedule)
        net.now, net.source = at, i
        agents[i].probe_round()
        heapq.heappush(schedule, (at + agents[i].plan.interval * rng.uniform(0.8, 1.2), i))


@dataclass
class Gang:
    arrives: float
    leaves: float
    peers: tuple[int, ...]  # nodes of its replicas already placed
    candidates: np.ndarray  # nodes with room for its next replica
    room: np.ndarray  # the same as a mask over the nodes


def gang_stream(cluster: Cluster, rng: np.random.Generator, horizon: float) -> list[Gang]:
    """Gangs waiting for placement: WAITING_GANGS at a time on average, each waiting GANG_WAIT_S on
    average, its placed replicas packed in a rack (half), a zone (a third) or anywhere."""
    n, gangs, t = len(cluster.names), [], -GANG_WAIT_S * 3
    while t < horizon:
        t += rng.exponential(GANG_WAIT_S / WAITING_GANGS)
        replicas = int(rng.choice((2, 4, 8, 16)))
        anchor, style = int(rng.integers(n)), rng.random()
        pool = (np.flatnonzero(cluster.rack == cluster.rack[anchor]) if style < 0.5
                else np.flatnonzero(cluster.zone == cluster.zone[anchor]) if style < 0.83 else np.arange(n))
        placed = rng.choice(pool, size=min(len(pool), int(rng.integers(1, replicas))), replace=False)
        room = rng.random(n) < CANDIDATE_SHARE
        room[placed] = False
        gangs.append(Gang(t, t + rng.exponential(GANG_WAIT_S), tuple(int(p) for p in placed),
                          np.flatnonzero(room), room))
    return gangs


def answered_by(snapshot: Snapshot, idx: np.ndarray, peer: str,
                aggregates: bool) -> tuple[np.ndarray, np.ndarray]:
    """For each candidate in idx, what answered its lookup towards peer (PAIR, AGGREGATE or NONE) and
    the lookup's origin code (telemetry.aggregates)."""
    found = snapshot.measured(idx, peer)
    if found is None:
        return np.full(len(idx), NONE), np.full(len(idx), origins.NONE)
    pair = found.origin == origins.PAIR
    if not aggregates:  # today's extender: the pair or nothing
        return np.where(pair, PAIR, NONE), np.where(pair, origins.PAIR, origins.NONE)
    pair |= found.origin == origins.REVERSE
    kinds = np.where(pair, PAIR, np.where(found.origin >= origins.NODE_TO_DOMAIN, AGGREGATE, NONE))
    return kinds, found.origin


def aggregate_name(code: int, table: NodeTable) -> str:
    """"node -> rack", "zone -> zone": what an aggregate's origin code stands for."""
    kind, k = origins.level_of(code) or ("?", 0)
    level = table.topology.levels[k].name
    return f"{'node' if kind == 'node' else level} -> {level}"


class QueryServer:
    """Answers PrometheusFeed's queries with the instant vectors Prometheus would return for the
    agents' current series (each agent a scrape target of its own), as Prometheus' JSON: for the
    feed's next refresh, each link metric's series whose link was measured after the feed's `since`
    (the queries' filter), serialised before the refresh so that it times the feed alone."""

    def __init__(self, agents: list[Agent], net: SimulatedNetwork):
        self.agents, self.net = agents, net
        self.bodies: dict[str, bytes] = {}
        self.links = 0  # link series the agents export

        def answer(path: str) -> tuple[bytes, str]:
            query = urllib.parse.parse_qs(urllib.parse.urlparse(path).query)["query"][0]
            return self.bodies.get(query) or self.vector([]), "application/json"

        self.http = serve(answer)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"

    def vector(self, result: list[dict]) -> bytes:
        return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()

    def scrape(self, feed: PrometheusFeed) -> None:
        """The agents' link series as they are now, as the feed's next refresh will ask for them."""
        results: dict[str, list[dict]] = {metric: [] for metric in (MEASURED, *VALUES.values(), SPEED)}
        stamp = self.net.wall()
        for k, agent in enumerate(self.agents):
            for family in agent.metrics.registry.collect():
                out = results.get(family.name)
                if out is None:
                    continue
                for sample in family.samples:
                    out.append({"metric": {"__name__": sample.name, "instance": f"agent-{k}:9101",
                                           "job": "netsched-agents", **sample.labels},
                                "value": [stamp, repr(sample.value)]})
        since = feed.since(stamp)
        measured = {(r["metric"]["src"], r["metric"]["dst"]): float(r["value"][1]) for r in results[MEASURED]}
        self.links = len(measured)
        self.bodies = {NIC_QUERY: self.vector([]), SPEED_QUERY: self.vector(results[SPEED])}
        for name, query in queries(since).items():
            metric = VALUES.get(name, MEASURED)
            recent = [r for r in results[metric]
                      if measured.get((r["metric"]["src"], r["metric"]["dst"]), 0) > since]
            self.bodies[query] = self.vector(recent)

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


class MergedAgents:
    """Every agent's registry as one scrape target, each sample with an `instance` label naming its
    agent (Prometheus keeps it as `exported_instance`), so a real Prometheus holds the same series it
    would from one target per agent."""

    def __init__(self, agents: list[Agent]):
        self.agents = agents

    def collect(self) -> Iterator[Metric]:
        merged: dict[str, Metric] = {}
        for k, agent in enumerate(self.agents):
            for family in agent.metrics.registry.collect():
                into = merged.setdefault(family.name, Metric(family.name, family.documentation, family.type))
                for sample in family.samples:
                    into.add_sample(sample.name, {**sample.labels, "instance": f"agent-{k}"}, sample.value)
        yield from merged.values()


def real_prometheus_refresh(agents: list[Agent], net: SimulatedNetwork,
                            store: TelemetryStore) -> tuple[float, int]:
    """Median seconds of `PrometheusFeed.refresh()` against a real Prometheus that scraped the agents'
    series as they are now, and the links it recorded (NaN, 0: Prometheus is not installed or did
    not get them all in time)."""
    if shutil.which("prometheus") is None:
        return math.nan, 0
    registry = CollectorRegistry()
    registry.register(MergedAgents(agents))
    exporter = serve(lambda path: (generate_latest(registry), "text/plain; version=0.0.4"))
    want = sum(len(family.samples) for a in agents for family in a.metrics.registry.collect()
               if family.name == MEASURED)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    directory = Path(tempfile.mkdtemp(prefix="netsched-scale-prometheus-"))
    proc = start_prometheus([f"127.0.0.1:{exporter.server_address[1]}"], directory, port, scrape_seconds=15)
    try:
        feed = PrometheusFeed(f"http://127.0.0.1:{port}", store, timeout=120.0, wall=net.wall)
        deadline = time.monotonic() + 120
        while series_count(feed.url, MEASURED) < want:
            if time.monotonic() > deadline:
                return math.nan, 0
            time.sleep(1)
        took, links = [], 0
        for _ in range(3):
            t0 = time.perf_counter()
            links = feed.refresh()
            took.append(time.perf_counter() - t0)
        return statistics.median(took), links
    finally:
        stop(proc)
        exporter.shutdown()
        exporter.server_close()
        shutil.rmtree(directory, ignore_errors=True)


def series_count(url: str, metric: str) -> int:
    """How many series of `metric` a Prometheus holds now."""
    query = urllib.parse.urlencode({"query": f"count({metric})"})
    with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=30) as resp:
        result = json.loads(resp.read())["data"]["result"]
    return int(float(result[0]["value"][1])) if result else 0


def serve(answer: Callable[[str], tuple[bytes, str]]) -> http.server.ThreadingHTTPServer:
    """An HTTP server on a free local port answering every GET with answer(path): body, content type."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body, kind = answer(self.path)
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def node_table(cluster: Cluster) -> NodeTable:
    facts = {n: {"levels": DEFAULT.path({ZONE_LABEL: cluster.zone_names[cluster.zone[i]],
                                         RACK_LABEL: f"rack-{cluster.rack[i]}"}),
                 "gpus": GPUS_PER_NODE, "gpu_product": str(cluster.gpu[i]), "gpu_labels": {},
                 "cpu": 64.0, "memory": 2.0**40}
             for i, n in enumerate(cluster.names)}
    return NodeTable.build(facts)


def lookups(table: NodeTable, store: TelemetryStore, gangs: list[Gang], at: float, names: list[str],
            counts: dict[str, int], aggregates: bool, by_level: Counter[str] | None = None) -> None:
    snapshot = Snapshot(table=table, free=np.zeros(len(names)), peers=(), age=0.0, stale=False, synced=True,
                        telemetry=store.snapshot(at))
    for gang in gangs:
        if gang.arrives <= at < gang.leaves:
            idx = np.array([table.index[names[c]] for c in gang.candidates], dtype=np.int64)
            for peer in gang.peers:
                found, codes = answered_by(snapshot, idx, names[peer], aggregates)
                for kind in (PAIR, AGGREGATE, NONE):
                    counts[kind] += int((found == kind).sum())
                if by_level is not None:
                    used, times = np.unique(codes[found == AGGREGATE], return_counts=True)
                    for code, n in zip(used, times, strict=True):
                        by_level[aggregate_name(int(code), table)] += int(n)


def series_seconds(nodes: int, plan: ProbePlan) -> float:
    """Long enough for a rotation through every other node, where today's series settle."""
    return (math.ceil(nodes / plan.peers_per_round) + 8) * plan.interval * 1.2


def series_lines(agent: Agent) -> tuple[int, int]:
    """Series `generate_latest()` exports for the agent: link series (with a dst label), all."""
    lines = [line for line in generate_latest(agent.metrics.registry).decode().splitlines()
             if line and not line.startswith("#")]
    return sum('dst="' in line for line in lines), len(lines)


@dataclass
class SizeResult:
    nodes: int
    scheme: str
    shape: tuple[int, int]
    counts: dict[str, int]
    link_series_per_node: float
    series_per_node: float
    bytes_per_minute: tuple[float, float]  # mean, max over nodes
    feed_seconds: float
    feed_links: int
    prometheus: tuple[float, int]  # the same refresh against a real Prometheus: seconds (NaN: not run), links
    memory_bytes: int
    wall_seconds: float
    by_level: Counter[str] = field(default_factory=Counter)  # aggregate answers by what answered

    def share(self, kind: str) -> float:
        total = sum(self.counts.values())
        return self.counts[kind] / total if total else math.nan


def run_size(nodes: int, seed: int, scheme: Scheme, real_prometheus: bool = False) -> SizeResult:
    """One size under one scheme; the same seed gives both schemes the same network and gangs."""
    began = time.monotonic()
    rng = np.random.default_rng(seed)
    random.seed(seed)  # the agents shuffle their round's targets: the same seed, the same probes
    cluster = make_cluster(nodes, seed)
    names = cluster.names
    end = WARM_UP_S + LOOKUP_WINDOW_S
    gangs = gang_stream(cluster, rng, end)
    net = SimulatedNetwork(cluster, rng)
    agents = make_agents(net, scheme, gangs)
    plan = scheme.plan
    schedule = [(float(rng.uniform(0, plan.interval)), i) for i in range(nodes)]
    heapq.heapify(schedule)
    instants = sorted(rng.uniform(WARM_UP_S, end, LOOKUP_INSTANTS))
    table = node_table(cluster)
    store = TelemetryStore(max_age=MAX_AGE_S, clock=lambda: net.now)
    server = QueryServer(agents, net)
    feed = PrometheusFeed(server.url, store, timeout=120.0, wall=net.wall)
    counts = {PAIR: 0, AGGREGATE: 0, NONE: 0}
    by_level: Counter[str] = Counter()
    feed_times, feed_links = [], 0
    if scheme.aggregates:  # as the extender's table publisher does: each refresh builds the aggregates
        store.follow(table.index, table.domains)
    run_rounds(net, agents, WARM_UP_S, schedule, rng)
    sent_before = net.sent.copy()
    try:
        for at in instants:
            run_rounds(net, agents, at, schedule, rng)
            net.now = at
            server.scrape(feed)
            t0 = time.perf_counter()
            feed_links = feed.refresh()
            feed_times.append(time.perf_counter() - t0)
            if feed.last_error:
                raise RuntimeError(feed.last_error)
            lookups(table, store, gangs, at, names, counts, scheme.aggregates, by_level)
        run_rounds(net, agents, end, schedule, rng)
        per_minute = (net.sent - sent_before) / ((end - WARM_UP_S) / 60)
        memory = retained_memory(cluster, server, net, gangs, end, scheme.aggregates)
        prometheus = (real_prometheus_refresh(agents, net, TelemetryStore(MAX_AGE_S, clock=lambda: net.now))
                      if real_prometheus and server.links <= PROMETHEUS_MAX_LINKS else (math.nan, 0))
    finally:
        server.close()
    # series: a sample of agents probing on alone, to where today's never-removed series settle
    sample = [int(i) for i in rng.choice(nodes, size=min(SERIES_AGENTS, nodes), replace=False)]
    alone = [(at, i) for at, i in schedule if i in sample]
    heapq.heapify(alone)
    run_rounds(net, agents, series_seconds(nodes, plan), alone, rng)
    counted = [series_lines(agents[i]) for i in sample]
    return SizeResult(nodes, scheme.name, shape(nodes), counts,
                      statistics.mean(c[0] for c in counted), statistics.mean(c[1] for c in counted),
                      (float(per_minute.mean()), float(per_minute.max())), statistics.median(feed_times),
                      feed_links, prometheus, memory, time.monotonic() - began, by_level)


def retained_memory(cluster: Cluster, server: QueryServer, net: SimulatedNetwork, gangs: list[Gang],
                    at: float, aggregates: bool) -> int:
    """Bytes tracemalloc sees held by a fresh node table and store after one feed refresh and one
    round of lookups (the extender's telemetry state, whatever caches the lookups build)."""
    store = TelemetryStore(max_age=MAX_AGE_S, clock=lambda: net.now)
    feed = PrometheusFeed(server.url, store, timeout=120.0, wall=net.wall)
    server.scrape(feed)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        table = node_table(cluster)
        if aggregates:
            store.follow(table.index, table.domains)
        feed.refresh()
        lookups(table, store, gangs, at, cluster.names, {PAIR: 0, AGGREGATE: 0, NONE: 0}, aggregates)
        held = tracemalloc.get_traced_memory()[0] - base
        del table, store
    finally:
        tracemalloc.stop()
    return held


# ---- placement quality ----------------------------------------------------------------------------
View = Callable[[int, np.ndarray], np.ndarray]  # peer, candidates -> how good each candidate's link is


def pair_view(cluster: Cluster, rng: np.random.Generator) -> View:
    """Every pair measured (once, with the probes' noise): bandwidth."""
    columns: dict[int, np.ndarray] = {}
    noise = SimConfig.measure_noise

    def view(peer: int, idx: np.ndarray) -> np.ndarray:
        if peer not in columns:
            columns[peer] = np.array([cluster.node_link(i, peer)[0] for i in range(len(cluster.names))]
                                     ) * rng.lognormal(0, noise, len(cluster.names))
        return columns[peer][idx]
    return view


def topology_view(cluster: Cluster) -> View:
    """Only where nodes are: fewer levels crossed is better."""
    def view(peer: int, idx: np.ndarray) -> np.ndarray:
        return -np.array([cluster.distance(int(i), peer) for i in idx], dtype=float)
    return view


def sampled_store(cluster: Cluster, scheme: Scheme, until: float, seed: int) -> TelemetryStore:
    """A store the real feed filled from agents of `scheme` probing until `until` (no gangs wait, so
    no demand: the domain sample and the rotation only), aged at `until`."""
    rng = np.random.default_rng([seed, 4])
    random.seed(seed)  # the agents shuffle their round's targets: the same seed, the same probes
    net = SimulatedNetwork(cluster, rng)
    agents = make_agents(net, scheme, [])
    schedule = [(float(rng.uniform(0, scheme.plan.interval)), i) for i in range(len(agents))]
    heapq.heapify(schedule)
    run_rounds(net, agents, until, schedule, rng)
    net.now = until
    server = QueryServer(agents, net)
    try:
        store = TelemetryStore(max_age=MAX_AGE_S, clock=lambda: net.now)
        feed = PrometheusFeed(server.url, store, timeout=120.0, wall=net.wall)
        server.scrape(feed)
        feed.refresh()
    finally:
        server.close()
    return store


def aggregate_view(cluster: Cluster, seed: int) -> View:
    """Aggregates of what the agents measured, every pair hidden (the reverse pair too): bandwidth;
    where no aggregate answers, the topology view's value, below any measured one."""
    store = sampled_store(cluster, NEW, WARM_UP_S, seed)
    table = node_table(cluster)
    links = store.snapshot(WARM_UP_S).links
    built = replace(store.aggregates(links, table.index, table.domains, WARM_UP_S), outgoing={})
    hidden = np.full(len(table.names), np.nan)
    order = np.array([table.index[n] for n in cluster.names])  # cluster position -> table position
    topology = topology_view(cluster)
    columns: dict[int, np.ndarray] = {}

    def view(peer: int, idx: np.ndarray) -> np.ndarray:
        if peer not in columns:
            answer = built.answer(cluster.names[peer], hidden, hidden, WARM_UP_S, MAX_AGE_S)
            columns[peer] = answer.bw[order]
        bw = columns[peer][idx]
        return np.where(np.isnan(bw), topology(peer, idx), bw)
    return view


PLACES = {1: "same rack", 2: "same zone, other rack", 3: "other zone"}  # the simulator's distances


def view_bias(cluster: Cluster, view: View, every: int = 37) -> dict[int, float]:
    """Median of what the view says over the true bandwidth, by distance, for every node towards
    every `every`-th node (where the view has a measured value)."""
    ratios: dict[int, list[float]] = {}
    everyone = np.arange(len(cluster.names))
    for peer in range(0, len(cluster.names), every):
        idx = everyone[everyone != peer]
        seen = view(peer, idx)
        for i, value in zip(idx.tolist(), seen.tolist(), strict=True):
            if value > 0:
                ratios.setdefault(cluster.distance(i, peer), []).append(value / cluster.node_link(i, peer)[0])
    return {d: float(np.median(r)) for d, r in sorted(ratios.items())}


def gang_jobs(cluster: Cluster, rng: np.random.Generator, count: int) -> list[Job]:
    jobs = []
    for k in range(count):
        comm = str(rng.choice(("medium", "high")))
        jobs.append(Job(f"gang-{k}", 0.0, "training", int(rng.choice((2, 4, 8))), int(rng.choice((4, 8))),
                        float(rng.lognormal(math.log(1500), 0.8)), float(rng.lognormal(math.log(200), 1.0)),
                        comm, float(COMM_LEVELS[comm] * rng.lognormal(0, 0.6)), "zone",
                        int(rng.integers(len(cluster.zone_names))), math.nan, ()))
    return jobs


def place(cluster: Cluster, free: np.ndarray, job: Job, view: View) -> list[int] | None:
    """Replica by replica: the first in the rack with the most free GPUs, each next one on the node
    whose weakest link (by the view) to those placed is best; None when the gang does not fit."""
    need = job.gpus_per_replica
    if (free // need).sum() < job.replicas:
        return None
    left, placed = free.copy(), []
    racks = np.bincount(cluster.rack, weights=np.where(left >= need, left, 0), minlength=cluster.racks)
    in_rack = np.flatnonzero((cluster.rack == int(np.argmax(racks))) & (left >= need))
    first = int(in_rack[np.argmax(left[in_rack])])
    placed.append(first)
    left[first] -= need
    while len(placed) < job.replicas:
        idx = np.flatnonzero(left >= need)
        score = np.full(len(idx), np.inf)
        for peer in set(placed):
            here = idx == peer
            score = np.minimum(score, np.where(here, np.inf, view(peer, idx)))
        best = int(idx[np.argmax(score)])
        placed.append(best)
        left[best] -= need
    return placed


def gang_seconds(cluster: Cluster, job: Job, nodes: list[int]) -> float:
    """The gang ends with its slowest replica."""
    return max(completion_seconds(cluster, replace(job, peers=tuple(nodes[:k] + nodes[k + 1:])), node)
               for k, node in enumerate(nodes))


def stream_jct(cluster: Cluster, jobs: list[Job], view: View, load: float, rng: np.random.Generator) -> float:
    """Mean completion time (from start) of the gangs arriving as a Poisson stream at `load` of the
    GPUs, first come first placed, each holding its GPUs until it ends."""
    free = np.full(len(cluster.names), GPUS_PER_NODE)
    mean_gpus = statistics.mean(j.replicas * j.gpus_per_replica for j in jobs)
    mean_s = statistics.mean(j.work_s for j in jobs)
    gap = mean_gpus * mean_s / (load * free.sum())
    arrivals = np.cumsum(rng.exponential(gap, len(jobs)))
    running: list[tuple[float, int, list[int]]] = []
    now, seconds = 0.0, []
    for k, job in enumerate(jobs):
        now = max(now, arrivals[k])
        while True:
            while running and running[0][0] <= now:
                _, j, nodes = heapq.heappop(running)
                np.add.at(free, nodes, jobs[j].gpus_per_replica)
            nodes = place(cluster, free, job, view)
            if nodes is not None:
                break
            now = running[0][0]
        np.subtract.at(free, nodes, job.gpus_per_replica)
        took = gang_seconds(cluster, job, nodes)
        seconds.append(took)
        heapq.heappush(running, (now + took, k, nodes))
    return statistics.mean(seconds)


def compare_jct(nodes: int, gangs: int, seed: int,
                load: float = 0.7) -> tuple[dict[str, float], dict[int, float]]:
    """Mean gang completion time by view, and the aggregate view's bias by distance (view_bias)."""
    cluster = make_cluster(nodes, seed)
    jobs = gang_jobs(cluster, np.random.default_rng([seed, 1]), gangs)
    views = {"pairs": pair_view(cluster, np.random.default_rng([seed, 2])),
             "aggregates": aggregate_view(cluster, seed), "topology": topology_view(cluster)}
    jct = {name: stream_jct(cluster, jobs, view, load, np.random.default_rng([seed, 3]))
           for name, view in views.items()}
    return jct, view_bias(cluster, views["aggregates"])


# ---- report -----------------------------------------------------------------------------------------
PLOT = Path(__file__).resolve().parents[1] / "docs" / "img" / "telemetry-scale.png"


def plot(results: list[SizeResult], path: Path) -> None:
    """Lookups answered (stacked by source) and link series per node, per size and scheme."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    labels = [f"{r.nodes:,}\n" + r.scheme.replace(" + ", " +\n") for r in results]
    x = np.arange(len(results))
    pair = np.array([r.share(PAIR) for r in results]) * 100
    agg = np.array([r.share(AGGREGATE) for r in results]) * 100
    left.bar(x, pair, label="fresh pair")
    left.bar(x, agg, bottom=pair, label="aggregate")
    left.axhline(TARGETS["answered"] * 100, color="k", linestyle="--", linewidth=1, label="target (1,000+)")
    left.set(ylabel="% of lookups for gang candidates", ylim=(0, 100), xticks=x)
    left.set_xticklabels(labels, fontsize=8)
    left.legend(fontsize=8)
    right.bar(x, [r.link_series_per_node for r in results], color="tab:gray")
    right.axhline(TARGETS["series_per_node"], color="k", linestyle="--", linewidth=1, label="target")
    right.set(ylabel="link series per node", yscale="log", ylim=(1, None), xticks=x)
    right.set_xticklabels(labels, fontsize=8)
    right.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(args: argparse.Namespace, results: list[SizeResult], jct: dict[int, dict[str, float]],
           bias: dict[int, dict[int, float]], load: tuple[str, str]) -> str:
    plan = ProbePlan()
    rows = []
    for r in results:
        total = r.link_series_per_node * r.nodes
        rows.append(
            f"| {r.nodes:,} | {r.scheme} | {r.shape[0]} x {r.shape[1]} | {r.share(PAIR):.2%} | "
            f"{r.share(AGGREGATE):.2%} | {r.share(NONE):.2%} | {r.link_series_per_node:.0f} "
            f"({r.series_per_node:.0f}) | {total:,.0f} | {r.bytes_per_minute[0] / 2**20:.1f} / "
            f"{r.bytes_per_minute[1] / 2**20:.1f} MiB | {r.feed_seconds:.2f} s ({r.feed_links:,}) | "
            f"{seconds(r.prometheus[0])} ({r.prometheus[1]:,}) | "
            f"{r.memory_bytes / 2**20:.1f} MiB | {r.wall_seconds:.0f} s |")
    jct_rows = [f"| {seed} | " + " | ".join(f"{got[v]:,.0f} s" for v in VIEWS) + " | "
                + " | ".join(f"{got[v] / got['pairs'] - 1:+.1%}" for v in VIEWS[1:]) + " |"
                for seed, got in jct.items()]
    worst = max(got["aggregates"] / got["pairs"] - 1 for got in jct.values()) if jct else math.nan
    sizes = ",".join(str(s) for s in args.sizes)
    return "\n".join([
        SECTION, "",
        f"Command: `nice -n 5 python bench/telemetry_scale.py --sizes {sizes} --seed {args.seed} "
        f"--jct-nodes {args.jct_nodes} --jct-gangs {args.jct_gangs} --jct-seeds "
        f"{','.join(str(s) for s in args.jct_seeds)}` ({time.strftime('%Y-%m-%d')}, 2 cores shared with "
        f"other work: load average {load[0]} at the start, {load[1]} at the end).", "",
        f"The real agent (`{plan.peers_per_round}` targets per round every {plan.interval:g} s, jittered, "
        f"budget {plan.budget_bytes_per_minute / 2**20:g} MiB/min) on a simulated network: the simulator's "
        f"cluster, racks of about {RACK_NODES} nodes, probes answered from its true links with 8% noise, no "
        f"sockets. Lookups: {LOOKUP_INSTANTS} random instants "
        f"{WARM_UP_S:g}-{WARM_UP_S + LOOKUP_WINDOW_S:g} s "
        f"after the agents start, {WAITING_GANGS} gangs waiting on average, every candidate (half the nodes) "
        f"towards each placed peer, through the extender's `Snapshot.measured` on a store the real "
        f"`PrometheusFeed` filled. Series: `generate_latest()` of {SERIES_AGENTS} agents after "
        f"a rotation through every node (link series, all series in brackets); total = link series x "
        "nodes. Feed: `refresh()` against a local server answering with the JSON Prometheus would return "
        "(what was measured since the feed's last read, as its queries filter; HTTP, parse, record, and the "
        "aggregates' build; median; links recorded in brackets); then the same against a real Prometheus "
        "(`prometheus` on PATH) that scraped the agents' series at the end of the window, median of 3 "
        f"(left out above {PROMETHEUS_MAX_LINKS:,} link series). Memory: "
        "tracemalloc, node table + store + lookup caches after one refresh.", "",
        f"![lookups answered and series per node](img/{PLOT.name})", "",
        "| nodes | scheme | zones x racks | pair | aggregate | none | link series / node (all) | "
        "link series, total | probe bytes / node / min, mean / max | feed refresh | same, real Prometheus | "
        "extender memory | "
        "bench wall |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *rows, "",
        f"Targets: pair or aggregate >= {TARGETS['answered']:.0%} at 1,000 and 5,000 nodes; <= "
        f"{TARGETS['series_per_node']} link series per node; <= {TARGETS['series_total_5000']:,} in total at "
        "5,000 nodes.", "",
        *verdicts(results), "",
        *[f"- {r.nodes:,}, {r.scheme}: aggregate answers by level, "
          + ", ".join(f"{name} {n / sum(r.counts.values()):.1%}" for name, n in r.by_level.most_common())
          for r in results if r.by_level], "",
        f"Placement quality, {args.jct_nodes:,} nodes, {args.jct_gangs} training gangs (2-8 replicas of 4 or "
        "8 GPUs) arriving at 70% of the GPUs, mean completion time from start (the simulator's formula, no "
        "noise). Each next replica goes where the view's weakest link to the placed ones is best; (b) is the "
        "extender's aggregates of what the agents measured in their first "
        f"{WARM_UP_S:g} s, bounded by the NIC speeds they exported. Target: aggregate-only within 5% of "
        "every pair known.", "",
        "| seed | (a) every pair known | (b) aggregates only | (c) topology only | (b) against (a) | "
        "(c) against (a) |", "|---|---|---|---|---|---|",
        *jct_rows, "",
        f"- (b) at most {worst:+.1%} against (a) over the seeds "
        f"({'met' if worst <= TARGETS['jct_aggregates'] else 'missed'}).",
        *[f"- seed {seed}: (b)'s view over the true bandwidth, median: "
          + ", ".join(f"{PLACES.get(d, d)} {ratio:.2f}" for d, ratio in got.items())
          for seed, got in bias.items()],
        "",
    ])


def seconds(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f} s"


def verdicts(results: list[SizeResult]) -> list[str]:
    """Each scheme against each target, from the rows above."""
    out = []
    for scheme in dict.fromkeys(r.scheme for r in results):
        mine = [r for r in results if r.scheme == scheme]
        answered = [f"{r.nodes:,}: {1 - r.share(NONE):.1%}" for r in mine if r.nodes >= 1000]
        worst = max(r.link_series_per_node for r in mine)
        total = [f"{r.link_series_per_node * r.nodes:,.0f}" for r in mine if r.nodes == 5000]
        met = (all(1 - r.share(NONE) >= TARGETS["answered"] for r in mine if r.nodes >= 1000),
               worst <= TARGETS["series_per_node"],
               all(r.link_series_per_node * r.nodes <= TARGETS["series_total_5000"]
                   for r in mine if r.nodes == 5000))
        ran = (bool(answered), True, bool(total))
        words = [("met" if ok else "missed") if there else "-" for ok, there in zip(met, ran, strict=True)]
        out.append(f"- {scheme}: answered {', '.join(answered) or 'not run at 1,000+'} ({words[0]}); link "
                   f"series per node at most {worst:.0f} ({words[1]}); total at 5,000 "
                   f"{', '.join(total) or 'not run'} ({words[2]}).")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",") if x], default=list(SIZES))
    parser.add_argument("--seed", type=int, default=2027)
    parser.add_argument("--jct-nodes", type=int, default=1000)
    parser.add_argument("--jct-gangs", type=int, default=300)
    parser.add_argument("--jct-seeds", type=lambda s: [int(x) for x in s.split(",") if x],
                        default=[2027, 2028, 2029])
    parser.add_argument("--no-prometheus", action="store_true", help="leave out the real Prometheus")
    parser.add_argument("--no-publish", action="store_true", help="print the section, leave the docs alone")
    args = parser.parse_args()
    exit_on_sigterm()  # through the finally blocks: the Prometheus a run starts goes down with it
    load_start = os.getloadavg()[0]
    results = []
    for nodes in args.sizes:
        print(f"{nodes} nodes ...", file=sys.stderr, flush=True)
        for scheme in (TODAY, NEW):
            results.append(run_size(nodes, args.seed, scheme, real_prometheus=not args.no_prometheus))
    jct, bias = {}, {}
    for seed in args.jct_seeds:
        print(f"placement, seed {seed} ...", file=sys.stderr, flush=True)
        jct[seed], bias[seed] = compare_jct(args.jct_nodes, args.jct_gangs, seed)
    section = report(args, results, jct, bias, (f"{load_start:.1f}", f"{os.getloadavg()[0]:.1f}"))
    if args.no_publish:
        print(section)
    else:
        plot(results, PLOT)
        publish(section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
