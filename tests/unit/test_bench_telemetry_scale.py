"""bench/telemetry_scale.py at a tiny size, so the benchmark keeps running as the code under it changes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import telemetry_scale as bench  # noqa: E402


@pytest.fixture(scope="module")
def results():
    return {scheme.name: bench.run_size(40, 7, scheme) for scheme in (bench.TODAY, bench.NEW)}


def test_every_lookup_is_counted_once_and_some_are_answered(results):
    for r in results.values():
        assert sum(r.counts.values()) > 0
        assert sum(r.share(kind) for kind in (bench.PAIR, bench.AGGREGATE, bench.NONE)) == pytest.approx(1)
        assert r.counts[bench.PAIR] > 0
        assert r.feed_links > 0 and r.memory_bytes > 0


def test_probes_stay_within_the_agents_budget_and_series_are_counted(results):
    for r in results.values():
        assert r.bytes_per_minute[1] <= bench.TODAY.plan.budget_bytes_per_minute
        assert 0 < r.link_series_per_node <= r.series_per_node
    # three link gauges (RTT, bandwidth, when) for each of at most max_links destinations
    assert results[bench.NEW.name].link_series_per_node <= 3 * bench.NEW.plan.max_links


def test_placement_fits_free_gpus_and_every_view_gives_a_mean():
    cluster = bench.make_cluster(40, 7)
    job = bench.gang_jobs(cluster, np.random.default_rng(1), 1)[0]
    free = np.zeros(len(cluster.names), dtype=int)
    free[:3] = 8
    nodes = bench.place(cluster, free, job, bench.topology_view(cluster))
    if job.replicas * job.gpus_per_replica > 24:
        assert nodes is None
    else:
        assert nodes is not None and set(nodes) <= {0, 1, 2}
        assert all(nodes.count(n) * job.gpus_per_replica <= 8 for n in nodes)
    got, bias = bench.compare_jct(40, 12, 7)
    assert set(got) == set(bench.VIEWS) and all(v > 0 for v in got.values())
    assert set(bias) <= set(bench.PLACES) and all(r > 0 for r in bias.values())


def test_the_report_names_the_targets(results):
    args = argparse.Namespace(sizes=[40], seed=7, jct_nodes=40, jct_gangs=12, jct_seeds=[7])
    jct = {7: {"pairs": 100.0, "aggregates": 103.0, "topology": 110.0}}
    text = bench.report(args, list(results.values()), jct, {7: {1: 0.5, 3: 1.0}}, ("1.0", "1.0"))
    assert text.startswith(bench.SECTION)
    assert "| 40 | today |" in text and "| +3.0% | +10.0% |" in text and ">= 95%" in text
    assert "(b) at most +3.0% against (a) over the seeds (met)" in text
    assert "seed 7: (b)'s view over the true bandwidth, median: same rack 0.50, other zone 1.00" in text


def test_the_plot_is_drawn(results, tmp_path):
    pytest.importorskip("matplotlib")
    bench.plot(list(results.values()), tmp_path / "scale.png")
    assert (tmp_path / "scale.png").stat().st_size > 0
