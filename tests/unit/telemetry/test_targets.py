"""Target choice: demand first within its share, every domain pair of every level sampled once per
window, deterministic shares, the round's budget; and the agent's series bounded whatever it probes."""

from __future__ import annotations

import re
from collections import defaultdict

from prometheus_client import generate_latest

from netsched.api.topology import Level, Topology
from netsched.telemetry.agent import Agent, ProbePlan
from netsched.telemetry.nic import NicMonitor
from netsched.telemetry.probe import Bandwidth
from netsched.telemetry.targets import Budget, Found, Layout, choose

THREE = Topology((Level("block", "example.com/block"), Level("subblock", "example.com/subblock"),
                  Level("rack", "example.com/rack")))


def cluster() -> dict[str, dict[str, str]]:
    """4 blocks x 3 subblocks x 4 racks x 4 nodes (192), and two nodes with no rack label."""
    out = {}
    for b in range(4):
        for s in range(3):
            for r in range(4):
                for n in range(4):
                    out[f"n-{b}-{s}-{r}-{n}"] = {"example.com/block": f"b{b}",
                                                 "example.com/subblock": f"s{s}", "example.com/rack": f"r{r}"}
    out["lone-0"] = out["lone-1"] = {"example.com/block": "b0", "example.com/subblock": "s0"}
    return out


def domain_pairs_probed(labels, layout, budget, rounds) -> dict[int, set]:
    """Per level (widest first): the (source domain, target domain) pairs some node probed."""
    paths = {n: THREE.path(lb) for n, lb in labels.items()}
    seen: dict[int, set] = defaultdict(set)
    for node in labels:
        for r in rounds:
            for dst in choose(node, layout, r, budget).targets:
                for k in range(THREE.depth):
                    a, b = paths[node][k], paths[dst][k]
                    if a and b and a != b and a[:k] == b[:k]:
                        seen[k].add((a, b))
    return seen


def every_sibling_pair(labels) -> dict[int, set]:
    domains = [{THREE.path(lb)[k] for lb in labels.values()} - {None} for k in range(THREE.depth)]
    return {k: {(a, b) for a in domains[k] for b in domains[k] if a != b and a[:k] == b[:k]}
            for k in range(THREE.depth)}


def test_every_domain_pair_of_every_level_is_probed_in_each_window():
    labels = cluster()
    layout, budget = Layout(labels, THREE), Budget(peers_per_round=8, rounds_per_window=4)
    want = every_sibling_pair(labels)
    assert [len(want[k]) for k in range(3)] == [12, 4 * 3 * 2, 12 * 4 * 3]
    for window in range(3):
        rounds = range(window * 4, window * 4 + 4)
        assert domain_pairs_probed(labels, layout, budget, rounds) == want, window


def test_the_nodes_behind_a_domain_pair_rotate_from_window_to_window():
    labels = cluster()
    layout = Layout(labels, THREE)
    node = "n-0-0-0-0"
    assert layout.samples(node, 0) != layout.samples(node, 1)
    assert layout.samples(node, 0) == Layout(dict(reversed(labels.items())), THREE).samples(node, 0)


def test_a_domains_members_share_its_siblings_without_overlap_when_there_are_more_siblings():
    # 2 zones: zone z0 has 3 racks of 2 nodes, so at the rack level m=2 members share s=2 siblings
    topo = Topology((Level("zone", "z"), Level("rack", "r")))
    labels = {f"{z}{r}{n}": {"z": z, "r": r} for z in ("z0", "z1") for r in ("ra", "rb", "rc") for n in "01"}
    layout = Layout(labels, topo)
    for window in range(3):
        a, b = (set(layout.samples(n, window)) for n in ("z0ra0", "z0ra1"))
        racks = {labels[x]["r"] for x in a if labels[x]["z"] == "z0"}, \
            {labels[x]["r"] for x in b if labels[x]["z"] == "z0"}
        assert racks[0].isdisjoint(racks[1]) and racks[0] | racks[1] == {"rb", "rc"}
        assert layout.share("z0ra0") == 2  # one sibling rack and one sibling zone


def test_a_node_without_a_levels_label_takes_no_share_there_and_is_no_domain_of_it():
    labels = cluster()
    layout = Layout(labels, THREE)
    assert layout.share("lone-0") == 2  # subblock and block levels only
    racks = layout.members[2]
    assert not any(name.startswith("lone") for members in racks.values() for name in members)


def test_demand_goes_first_least_recently_measured_first_within_its_share():
    labels = cluster()
    layout, budget = Layout(labels, THREE), Budget(peers_per_round=8, demand_share=0.5, rounds_per_window=4)
    demand = [f"n-3-2-3-{i}" for i in range(4)] + [f"n-2-2-2-{i}" for i in range(4)]
    last = {name: float(i - 20) for i, name in enumerate(demand)}  # rounds: demand[0] probed longest ago
    last["n-3-2-3-1"] = -30.0
    picked = choose("n-0-0-0-0", layout, 0, budget, demand, last).targets
    assert picked[:4] == ("n-3-2-3-1", "n-3-2-3-0", "n-3-2-3-2", "n-3-2-3-3")
    sample = layout.samples("n-0-0-0-0", 0)
    assert picked[4] == sample[0]  # the domain sample keeps its slots after demand's share
    assert len(picked) == 8 and set(picked[5:]) <= set(demand)  # then the rest of the demand
    last.update({name: 0.0 for name in picked})  # probed in round 0
    again = choose("n-0-0-0-0", layout, 1, budget, demand, last, ["x", "y"]).targets
    assert again[0] == demand[7] and set(again[1:4]) <= set(demand)  # its share, the one left out first
    assert again[4] == layout.samples("n-0-0-0-0", 0)[1]
    assert again[5:] == ("x", "y")  # demand probed in this window already: the rotation gets the rest


def test_a_round_never_exceeds_its_budget_and_never_names_the_node_itself():
    labels = cluster()
    layout = Layout(labels, THREE)
    everyone = sorted(labels)
    for ppr in (1, 3, 8):
        budget = Budget(peers_per_round=ppr, rounds_per_window=4)
        turn = 0
        for r in range(10):
            picked = choose("n-1-1-1-1", layout, r, budget, everyone[:20], {}, everyone, turn)
            assert len(picked.targets) == ppr and "n-1-1-1-1" not in picked.targets
            assert len(set(picked.targets)) == ppr
            turn = picked.turn


def test_without_labels_the_rotation_reaches_everyone_as_before():
    layout = Layout({})
    everyone = [f"p{i}" for i in range(5)]
    seen, turn = [], 0
    for r in range(5):
        picked = choose("me", layout, r, Budget(peers_per_round=2), (), {}, everyone, turn)
        seen += picked.targets
        turn = picked.turn
    assert seen == everyone * 2


def test_after_probing_100_destinations_at_most_48_link_series_remain():
    peers = {f"p{i:03}": ("10.0.0.1", 9102) for i in range(100)}
    calls = []

    def fake_rtt(host: str, port: int) -> float:
        calls.append(host)
        return 1.0

    agent = Agent("me", lambda: Found(peers), ProbePlan(peers_per_round=8, max_links=16),
                  NicMonitor(read=lambda: {}, speed=lambda _: None),
                  rtt=fake_rtt, bandwidth=lambda host, port, size: Bandwidth(100.0, size, 0.5),
                  wall=lambda: 42.0)
    for _ in range(13):
        agent.probe_round()
    assert len(calls) == 104  # the simulated probes ran (13 rounds of 8), no socket
    text = generate_latest(agent.metrics.registry).decode()
    links = re.findall(r'^netsched_link_\w+\{dst="([^"]+)",src="me"\}', text, re.M)
    assert len(links) == 48 and len(set(links)) == 16
    # the most recently measured: the last two rounds, p088..p099 and, rotation come round, p000..p003
    assert set(links) == {f"p{i:03}" for i in (*range(88, 100), *range(4))}
    assert len(agent.matrix()["links"]) == 16
    assert 'netsched_link_measured_timestamp_seconds{dst="p000",src="me"} 42.0' in text  # simulated time
    counters = [line for line in text.splitlines() if line.startswith("netsched_probe_")]
    assert counters and not any("dst=" in line for line in counters)  # folded: no destination label
