"""Run-time estimates: the blend of model, hint and history, and the interval from past errors."""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import pytest

from netsched.api.labels import GPU_PRODUCT_LABEL
from netsched.jobs.capacity import node_room
from netsched.jobs.forecast import cluster_forecast
from netsched.jobs.run_time import Case, RunTimes
from netsched.models.features import FEATURE_NAMES, INDEX
from netsched.models.gpus import gpu_features
from netsched.testing.builders import CLUSTER, NOW, ago, make_gpujob, make_node, make_pod

A100 = "NVIDIA-A100-SXM4-80GB"


def row(seconds: float, expected: float | None = None, gpu: str | None = None) -> dict:
    return {"outcome": "Succeeded", "duration_seconds": seconds, "workload_kind": "training", "replicas": 2,
            "gpus_per_replica": 4, "expected_duration_seconds": expected,
            "gpu_models": [gpu] if gpu else None}


class SlowerOnA100:
    """A stand-in model: 100 s on any GPU, 200 s on the slower A100 (known by its memory bandwidth)."""
    features = FEATURE_NAMES

    def predict(self, matrix: np.ndarray) -> np.ndarray:
        a100 = gpu_features(A100)["gpu_mem_bw_gbps"]
        return np.where(np.isclose(matrix[:, INDEX["gpu_mem_bw_gbps"]], a100), 200.0, 100.0)


def test_each_source_counts_by_how_close_it_came_before():
    # hints all over the place (run / hint from 0.25 to 4), runs of such jobs all near 100 s
    history = [row(100 + i % 3, expected=e) for i, e in enumerate([25, 400, 100, 50, 200, 30, 300] * 2)]
    estimate = RunTimes(history).estimate(Case("training", 2, 4, 1000))
    assert 100 <= estimate.seconds < 120  # the history's median run, barely moved by the hint's 1000
    assert "blended from" in estimate.basis and "the median run of 14 finished" in estimate.basis


def test_the_model_is_calibrated_on_the_history_and_knows_the_gpu():
    history = [row(2 * (200 if gpu == A100 else 100), gpu=gpu) for gpu in [A100, "NVIDIA-H100-80GB-HBM3"] * 6]
    times = RunTimes(history, SlowerOnA100())  # type: ignore[arg-type]
    on_a100 = times.estimate(Case("training", 2, 4, None, A100))
    on_h100 = times.estimate(Case("training", 2, 4, None, "NVIDIA-H100-80GB-HBM3"))
    # the model was right up to a factor 2 every time: it outweighs the median of all runs (300 s)
    assert on_a100.seconds == pytest.approx(400, rel=1e-3) and on_h100.seconds == pytest.approx(200, rel=1e-3)
    assert f"the completion-time model on {A100} × 2.00" in on_a100.basis


def test_the_interval_is_the_10th_to_90th_percentile_of_past_errors():
    ratios = [0.5, 0.7, 0.8, 0.9, 1.0, 1.0, 1.1, 1.2, 1.5, 2.0, 1.0, 1.0]
    history = [row(100 * r, expected=100) for r in ratios]
    times = RunTimes(history)
    estimate = times.estimate(Case("inference", 1, 1, 100))
    low, mid, high = estimate.quantiles()
    assert low < mid < high
    # the errors of the same blend over the finished jobs, each estimated without itself (here: the same)
    residuals = [math.log(100 * r) - math.log(mid) for r in ratios]
    assert math.log(low / mid) == pytest.approx(np.quantile(residuals, 0.1))
    assert math.log(high / mid) == pytest.approx(np.quantile(residuals, 0.9))
    inside = sum(low <= 100 * r <= high for r in ratios)
    assert 0.6 * len(ratios) <= inside < len(ratios)
    assert RunTimes(history[:9]).estimate(Case("inference", 1, 1, 100)).spread is None  # too few to say


def test_a_waiting_job_gets_start_and_finish_intervals_around_its_predicted_times():
    history = [row(300 * r, expected=300) for r in (0.8, 0.9, 1.0, 1.0, 1.0, 1.1, 1.2, 1.3, 0.7, 1.0)]
    for r in history:
        r["replicas"], r["gpus_per_replica"] = 4, 8
    hint = {"expectedDurationSeconds": 300}
    running = make_gpujob("big", replicas=4, gpus=8, created=ago(300), workload=hint)
    running["status"] = {"phase": "Running", "startTime": ago(100)}
    waiting = make_gpujob("next", replicas=4, gpus=8, created=ago(60), workload=hint)
    waiting["status"] = {"phase": "Pending"}
    pods = [make_pod(f"big-{i}", n, gpus=8, job="big")
            for i, n in enumerate(["a1-0", "a1-1", "a2-0", "b1-0"])]
    out = cluster_forecast(NOW, [node_room(n) for n in CLUSTER], pods, [running, waiting], history)
    big, after = out["ml/big"], out["ml/next"]
    assert big.finish_range[0] < big.finish < big.finish_range[1]
    assert after.start_range == big.finish_range  # it starts when big ends, however long big runs
    assert after.finish_range[0] < after.finish < after.finish_range[1]
    # its finish interval is wider than its start's, but narrower than both widths added up
    start_width, finish_width = (after.start_range[1] - after.start_range[0], after.finish_range[1] -
                                 after.finish_range[0])
    run_low, _, run_high = after.estimate.quantiles()
    assert start_width < finish_width < start_width + timedelta(seconds=run_high - run_low)


def test_a_running_job_is_estimated_on_the_gpu_its_pods_run_on():
    nodes = [make_node("h", gpu_model="NVIDIA-H100-80GB-HBM3"), make_node("a", gpu_model=A100)]
    history = [row(2 * (200 if gpu == A100 else 100), gpu=gpu) for gpu in [A100, "NVIDIA-H100-80GB-HBM3"] * 6]
    jobs = []
    for name in ("on-h", "on-a"):
        body = make_gpujob(name, replicas=1, gpus=8, created=ago(300))
        body["status"] = {"phase": "Running", "startTime": ago(0)}
        jobs.append(body)
    pods = [make_pod("on-h-0", "h", gpus=8, job="on-h"), make_pod("on-a-0", "a", gpus=8, job="on-a")]
    assert nodes[1]["metadata"]["labels"][GPU_PRODUCT_LABEL] == A100
    out = cluster_forecast(NOW, [node_room(n) for n in nodes], pods, jobs, history,
                           model=SlowerOnA100())  # type: ignore[arg-type]
    assert out["ml/on-a"].estimate.seconds == pytest.approx(2 * out["ml/on-h"].estimate.seconds, rel=0.05)
