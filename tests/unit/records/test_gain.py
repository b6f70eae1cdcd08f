"""`netsched report`'s estimated gain over the default scheduler: the default's placement drawn from the
records, both placements' features, the gain and its bootstrap interval, and the command on a generated
month (records written here by the operator's own record builder)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from netsched.api.topology import DEFAULT
from netsched.models.features import FEATURE_NAMES, INDEX
from netsched.records.default_placement import SeenCluster, placement_rows
from netsched.records.features import record_features
from netsched.records.gain import JobTimes, gain, predicted_times
from netsched.records.weekly import by_week_and_class
from netsched.testing.records import generated_records, operator_record

RACK = {"name": "d", "kind": "rack", "location": "rack-a1", "sizeGB": 100}


class Fixed:
    """A stand-in model: seconds = 1e6 / the node's dense 16-bit TFLOPS (only the GPU matters)."""

    def predict(self, rows: np.ndarray) -> np.ndarray:
        return 1e6 / rows[:, INDEX["gpu_tflops16"]]


def records() -> list[dict]:
    return [operator_record(["a1-0", "a1-1", "a1-0"], RACK, uid="u1"),
            operator_record(["a2-0", "b1-0"], uid="u2"),
            operator_record(["b1-0"], {"name": "d", "kind": "node", "location": "a1-1"}, uid="u3")]


@pytest.mark.parametrize("which", [0, 1, 2], ids=["rack-data-3-replicas", "two-zones", "node-data"])
def test_netscheds_own_placement_has_the_features_training_reads(which):
    recs = records()
    cluster = SeenCluster(recs, DEFAULT)
    rows = placement_rows(recs, cluster, [which], draws=2, rng=np.random.default_rng(0)).rows
    trained = record_features({**recs[which], "telemetry": None})
    assert rows.shape == (3, len(FEATURE_NAMES))
    for name in FEATURE_NAMES:
        got, want = rows[0, INDEX[name]], trained[name]
        assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want), name


def test_the_defaults_peers_never_share_the_last_replicas_node_and_fit_it():
    recs = records() + [operator_record(["a1-0"], uid="u4", gpus_per_replica=8)]
    cluster = SeenCluster(recs, DEFAULT)
    assert cluster.largest[cluster.ids["a1-0"]] == 8 and cluster.largest[cluster.ids["b1-0"]] == 4
    big = operator_record(["a1-0", "a1-0"], uid="u5", gpus_per_replica=8)
    rows = placement_rows([*recs, big], cluster, [4], draws=50, rng=np.random.default_rng(1)).rows
    # only a1-0 holds 8 GPUs: its replicas cannot leave it, so every draw puts the peer on it too
    assert set(rows[1:, INDEX["peer_frac_node"]]) == {1.0}
    rows = placement_rows(recs, cluster, [0], draws=200, rng=np.random.default_rng(1)).rows
    assert (rows[1:, INDEX["peer_frac_node"]] == 0).all()  # four nodes hold 4 GPUs: one replica a node
    assert 0 < rows[1:, INDEX["peer_frac_rack"]].mean() < 1 and (rows[1:, INDEX["peer_frac_zone"]] > 0).any()


def test_the_datas_distance_from_where_the_records_saw_its_domain():
    recs = records()
    cluster = SeenCluster(recs, DEFAULT)
    last = np.array([[cluster.ids[n] for n in ("a1-0", "a1-1", "a2-0", "b1-0")]])
    from netsched.records.default_placement import _data_distance  # the table the rows read
    assert list(_data_distance(cluster, [cluster.data_place(recs[0])], last)[0]) == [1.0, 1.0, 2.0, 3.0]
    node = cluster.data_place(recs[2])
    assert list(_data_distance(cluster, [node], last)[0]) == [1.0, 0.0, 2.0, 3.0]


def test_gain_and_its_interval_by_hand():
    won = gain(np.array([100.0, 100.0]), np.array([200.0, 200.0]), np.array([2.0, 2.0]))
    assert won is not None and won.jobs == 2 and won.gain == 0.5 == won.gain_low == won.gain_high
    assert won.gpu_hours_saved == pytest.approx(2 * 2 * 100 / 3600)
    mixed = gain(np.array([100.0, 100.0, 100.0]), np.array([100.0, 150.0, 400.0]), np.ones(3))
    assert mixed is not None and mixed.gain == pytest.approx(1 - 300 / 650)
    assert 0 <= mixed.gain_low < mixed.gain < mixed.gain_high <= 1 - 300 / 1200
    assert gain(np.empty(0), np.empty(0), np.empty(0)) is None


def test_the_default_time_is_the_real_one_scaled_by_the_models_ratio():
    recs = records()
    times = predicted_times(recs, Fixed(), draws=64)  # type: ignore[arg-type]
    assert list(times.index) == [0, 1, 2] and list(times.netsched) == [3600.0] * 3
    # job 0 ran on an H100 (989 TFLOPS); the default draws any of the four nodes: H100, H100, A100, L40S
    h100, a100, l40s = 989.0, 312.0, 362.0
    assert h100 / l40s > times.default[0] / 3600 > 1
    assert times.default[2] / 3600 < 1  # job 2 ran on the L40S: the default would often do better
    assert a100 < h100 and l40s < h100


def test_weeks_carry_the_gain_of_their_own_jobs():
    recs = records()
    times = JobTimes(np.array([0, 2]), np.array([100.0, 100.0]), np.array([200.0, 50.0]), np.ones(2))
    rows = by_week_and_class(recs, times)
    assert len(rows) == 1 and rows[0].gain is not None and rows[0].gain.jobs == 2
    assert rows[0].gain.gain == pytest.approx(1 - 200 / 250)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "netsched", "report", *args], capture_output=True,
                          text=True, timeout=60)


def test_report_on_a_generated_month_with_the_shipped_model(tmp_path):
    path = generated_records(tmp_path / "records.jsonl", jobs=300, days=28)
    plot = tmp_path / "gain.svg"
    table = run(str(path), "--plot", str(plot))
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert "GAIN (95% CI)" in lines[0] and lines[-2].startswith("all weeks: 285 jobs, estimated gain ")
    assert "held-out MAPE 37%" in lines[-1]
    assert plot.read_text().startswith("<svg") and "high" in plot.read_text()
    doc = json.loads(run(str(path), "-o", "json").stdout)
    assert doc["gain"]["draws_per_job"] == 2
    assert doc["gain"]["held_out_mape"] == pytest.approx(0.373, abs=1e-3)
    week = doc["weeks"][0]["gain"]
    assert week["gain_low"] <= week["gain"] <= week["gain_high"] and week["jobs"] > 0


def test_a_plot_that_is_not_svg_is_refused_in_one_line(tmp_path):
    done = run(str(tmp_path / "none.jsonl"), "--plot", str(tmp_path / "gain.png"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith("netsched report: error: argument --plot: ")
