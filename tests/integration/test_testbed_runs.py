"""The testbed runner on real shaped links (needs root: ip netns, tc): rows a model can train on,
whose measured bandwidth and real durations follow the shaping."""

from __future__ import annotations

import math
import subprocess
import time

import numpy as np
import pytest

from netsched.datagen.testbed_runs import DATA, RATES, Background, Job, execute, measure, run, shaped_testbed
from netsched.models.features import INDEX
from netsched.training.dataset import read_dataset

NET = {"prefix": "nswt", "subnet": "10.79.9"}  # not the runner's own: a real run may be going on
# Data links: n5 5 Mbit/s, n2 80. A pull-dominated job: 2 MB takes ~3.2 s on n5, ~0.2 s on n2.
PULL = Job("pull", "etl", 1, 1, 2.0, "low", 0.0, 0.05, math.nan, (), ("n5", "n2"))
# The peer on n3: 40 Mbit/s from n1 (same zone), 20 from n4 (the other zone).
EXCHANGE = Job("exchange", "training", 2, 2, 0.3, "high", 1.0, 0.1, 1.0, ("n3",), ("n1", "n4"))
# Peers on n1 and n2: from n2 one is n2 itself and one 80 Mbit/s away; from n4 they are 10 and 5.
MIXED = Job("mixed", "batch", 3, 1, 1.0, "medium", 0.3, 0.2, math.nan, ("n1", "n2"), ("n2", "n4"))


def rate(a: str, b: str) -> float:
    return RATES.get((a, b)) or RATES[(b, a)]


def namespaces() -> list[str]:
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in listing.splitlines() if line.startswith(f"{NET['prefix']}-")]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("testbed-runs") / "runs.csv"
    assert run([PULL, EXCHANGE, MIXED], out, max_flows=0, log=lambda line: None, **NET) == 6
    assert namespaces() == [], "the runner left its namespaces behind"
    return read_dataset(out)


def rows_of(ds, job: str) -> dict[str, int]:
    return {ds.node[i]: i for i in range(len(ds)) if ds.job_id[i] == job}


def feature(ds, row: int, name: str) -> float:
    return ds.X[row, INDEX[name]]


def test_measured_bandwidth_is_the_shaped_rate_without_background(dataset):
    for i in range(len(dataset)):
        node = dataset.node[i]
        expected = rate(node, DATA)
        assert abs(feature(dataset, i, "data_bw_mbps") - expected) <= 0.3 * expected, (node, expected)
        assert feature(dataset, i, "nic_util") < 0.05
    for job in (EXCHANGE, MIXED):
        for node, i in rows_of(dataset, job.id).items():
            expected = min(rate(node, p) for p in job.peers if p != node)
            assert abs(feature(dataset, i, "peer_bw_mbps") - expected) <= 0.3 * expected, (job.id, node)


def test_a_pull_dominated_job_takes_as_long_as_its_data_link_says(dataset):
    rows = rows_of(dataset, "pull")
    slow, fast = dataset.y[rows["n5"]], dataset.y[rows["n2"]]
    assert feature(dataset, rows["n2"], "data_bw_mbps") > feature(dataset, rows["n5"], "data_bw_mbps")
    assert fast < slow
    assert abs(slow - 2.0 * 8 / 5) <= 0.3 * 2.0 * 8 / 5  # 2 MB at 5 Mbit/s, with a little compute


def test_topology_features_follow_the_declared_nodes(dataset):
    n1, n4 = (rows_of(dataset, "exchange")[n] for n in ("n1", "n4"))
    assert feature(dataset, n1, "peer_frac_zone") == 1 and feature(dataset, n1, "data_distance") == 2
    assert feature(dataset, n4, "peer_frac_zone") == 0 and feature(dataset, n4, "data_distance") == 3
    assert (feature(dataset, n4, "gpu_tflops16"), feature(dataset, n4, "gpu_memory_gib")) == (125, 32)  # V100
    n2 = rows_of(dataset, "mixed")["n2"]
    assert feature(dataset, n2, "peer_frac_node") == 0.5 and feature(dataset, n2, "peer_count") == 2


def test_background_flows_take_a_fair_share_of_the_links_they_use(tmp_path):
    with shaped_testbed(tmp_path, **NET) as bed:
        background = Background(bed, np.random.default_rng(0), max_flows=0)
        background.start("n2", DATA)  # competes with n2's probes to the data site (80 Mbit/s)
        background.start(DATA, "n3")  # competes with n3's pulls from it (40 Mbit/s)
        time.sleep(1)  # past TCP's ramp-up
        # Competing flows split a link, but how evenly depends on who gets the CPU on a busy machine:
        # check that the probe clearly shared the link (far from its 80 Mbit/s alone, far from nothing)
        # rather than an exact half.
        seen = measure(bed, PULL, "n2")
        assert 0.1 * 80 <= seen["links"][DATA]["bw_mbps"] <= 0.75 * 80
        assert seen["nic_tx_mbps"] > 0.5 * 80
        pull_s = execute(bed, PULL, "n3")["pull_s"]
        alone = 2.0 * 8 / 40  # 2 MB over the 40 Mbit/s link with nothing else on it
        assert 1.25 * alone <= pull_s <= 10 * alone
