"""The estimated gain of netsched's placements over kube-scheduler's default, per week and priority class
(`netsched report`): the completion time the completion-time model predicts for the placement the default
would have made (netsched.records.default_placement) against the time it predicts for the placement
netsched made, both from what the records say of a placement (nodes, domains, GPU products, the data's
distance; not the links and loads measured at the time, which no one measured for the default's nodes).

Only jobs that Succeeded and ran on recorded nodes count (as in training: a failed job's time says
nothing about its placement). The model supplies the ratio, not the seconds: a job's time under the default
is its real run time times (predicted time on the default's placement, the mean over DRAWS draws) /
(predicted time on netsched's), so a model trained on other clusters' job lengths still speaks in this
cluster's hours. The gain is 1 - (sum of the real times) / (sum of the default's), and the GPU-hours saved
the sum over jobs of GPUs x (default's time - real time). Their 95% intervals are a bootstrap over
the group's jobs (BOOTSTRAP resamples, fewer for groups over 10,000 jobs but at least BOOTSTRAP_MIN; a
fixed seed so a report reads the same twice): they say how much
the figure depends on which jobs ran and on the draws, not how wrong the model is; the model's own error
on one job (its held-out MAPE, from meta.json) is reported beside them and is not in the interval.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from netsched.api.gpujob import Phase
from netsched.models.errors import SchemaError
from netsched.models.predictor import Predictor
from netsched.records.default_placement import SeenCluster, placement_rows
from netsched.records.features import Record, record_topology

DRAWS = 2
BOOTSTRAP = 500
BOOTSTRAP_ELEMENTS = 5_000_000  # resamples x jobs at most (but BOOTSTRAP_MIN resamples): a year in 5 s
BOOTSTRAP_MIN = 200
SEED = 0


@dataclass(frozen=True)
class Gain:
    jobs: int  # jobs estimated
    netsched_seconds: float  # mean real completion time (start to completion) of the jobs
    default_seconds: float  # mean estimated under the default's placement
    gain: float  # 1 - netsched / default, summed over the jobs
    gain_low: float  # 95% bootstrap interval
    gain_high: float
    gpu_hours_saved: float
    gpu_hours_low: float
    gpu_hours_high: float
    resamples: int


@dataclass(frozen=True)
class JobTimes:
    """Per estimated job (by its record's index): its real run time (on netsched's placement), that time
    under the default's placement (real x predicted default / predicted netsched), and its GPUs."""
    index: np.ndarray
    netsched: np.ndarray
    default: np.ndarray
    gpus: np.ndarray


def predicted_times(records: Sequence[Record], predictor: Predictor, draws: int = DRAWS,
                    seed: int = SEED) -> JobTimes:
    """The real and the default's times of every job that Succeeded on recorded nodes."""
    rng = np.random.default_rng(seed)
    by_topology: dict[str, list[int]] = defaultdict(list)
    for i, record in enumerate(records):
        if (record.get("outcome") == Phase.SUCCEEDED and record.get("nodes")
                and (record.get("duration_seconds") or 0) > 0):
            by_topology[str(record_topology(record))].append(i)
    index: list[int] = []
    ratio: list[np.ndarray] = []
    for picked in by_topology.values():
        topology = record_topology(records[picked[0]])
        try:
            cluster = SeenCluster([records[i] for i in picked], topology)
            placed = placement_rows(records, cluster, picked, draws, rng)
        except (KeyError, TypeError, ValueError) as exc:
            raise SchemaError(f"records: a job's record cannot be read for the gain ({type(exc).__name__}: "
                              f"{exc}); see netsched.records.format.ROW_FIELDS") from None
        seconds = predictor.predict(placed.rows).reshape(len(placed.jobs), draws + 1)
        index.extend(placed.jobs)
        ratio.append(seconds[:, 1:].mean(axis=1) / seconds[:, 0])
    order = np.argsort(index) if index else np.empty(0, dtype=np.int64)
    jobs = np.array(index, dtype=np.int64)[order]
    real = np.array([float(records[i]["duration_seconds"]) for i in jobs])
    gpus = np.array([float(records[i].get("gpus") or 0) for i in jobs])
    default = real * (np.concatenate(ratio)[order] if ratio else np.empty(0))
    return JobTimes(jobs, real, default, gpus)


def gain(netsched: np.ndarray, default: np.ndarray, gpus: np.ndarray, resamples: int = BOOTSTRAP,
         seed: int = SEED) -> Gain | None:
    """The gain of a group of jobs with its bootstrap interval; None for no jobs."""
    n = len(netsched)
    if not n:
        return None
    saved = gpus * (default - netsched) / 3600
    rng = np.random.default_rng(seed)
    resamples = max(BOOTSTRAP_MIN, min(resamples, BOOTSTRAP_ELEMENTS // n))
    columns = np.stack([netsched, default, saved])
    sums = []
    step = max(1, 1_000_000 // n)  # resamples at a time: a year in one group stays a few tens of MB
    for start in range(0, resamples, step):
        pick = rng.integers(n, size=(min(step, resamples - start), n), dtype=np.int32)
        sums.append(columns[:, pick].sum(axis=2))
    both = np.concatenate(sums, axis=1)
    r, h = 1 - both[0] / both[1], both[2]
    return Gain(n, float(netsched.mean()), float(default.mean()), float(1 - netsched.sum() / default.sum()),
                float(np.percentile(r, 2.5)), float(np.percentile(r, 97.5)), float(saved.sum()),
                float(np.percentile(h, 2.5)), float(np.percentile(h, 97.5)), resamples)


def model_error(predictor: Predictor) -> dict[str, Any]:
    """The model's held-out error on one job, as its meta.json records it (none recorded: empty)."""
    scores = ((predictor.meta.get("validation") or {}).get("held_out") or {}).get("scores") or {}
    return {"model": str(predictor.path), "held_out_mape": scores.get("mape"),
            "held_out_mae_seconds": scores.get("mae")}
