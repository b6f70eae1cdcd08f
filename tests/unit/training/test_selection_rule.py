"""The selection rule on records of one row per job tracks placement, not the ordering of jobs.

Two small worlds, each with a model that knows how long a job is and nothing of the nodes, and one
that knows the nodes and nothing of the job's length. Pairwise accuracy between jobs prefers the
first; placement (regret over each job's candidates) prefers the second; `select` must pick it.
"""

from dataclasses import replace

import numpy as np
import pytest

from netsched.models.features import FEATURE_NAMES, INDEX
from netsched.training.dataset import Dataset
from netsched.training.metrics import BY_NODE_PAIRS, better, judged_by, model_scores, score
from netsched.training.train import KindResult, select

JOBS, CANDIDATES = 120, 4
WORLDS = {  # the node column that decides speed: (its slow value, its fast value), the slow node's factor
    "GPU-bound": ("gpu_tflops16", (312.0, 989.0), 1.3),
    "data-bound": ("data_bw_mbps", (1_000.0, 10_000.0), 1.25),
}


def world(name: str, seed: int = 0) -> Dataset:
    """Every job on CANDIDATES nodes; its length spans most of one power of two (one size class)."""
    column, (slow, fast), factor = WORLDS[name]
    rng = np.random.default_rng(seed)
    rows = JOBS * CANDIDATES
    X = np.full((rows, len(FEATURE_NAMES)), np.nan)
    length = np.repeat(np.exp(rng.uniform(np.log(1100), np.log(2000), JOBS)), CANDIDATES)
    is_fast = rng.random(rows) < 0.5
    X[:, INDEX["job_gpus"]] = 8.0
    X[:, INDEX["kind_training"]] = 1.0
    X[:, [INDEX[k] for k in ("kind_inference", "kind_etl", "kind_batch")]] = 0.0
    X[:, INDEX["expected_seconds"]] = length
    X[:, INDEX[column]] = np.where(is_fast, fast, slow)
    y = length * np.where(is_fast, 1.0, factor) * rng.lognormal(0, 0.02, rows)
    job = np.repeat([f"j{k:03d}" for k in range(JOBS)], CANDIDATES)
    chosen = np.zeros(rows, dtype=bool)
    chosen[np.arange(JOBS) * CANDIDATES + rng.integers(CANDIDATES, size=JOBS)] = True
    return Dataset(X=X, y=y, candidate_set=job, job_id=job, node=np.arange(rows).astype(str),
                   site=np.full(rows, "zone-a"), start=np.repeat(np.arange(JOBS, dtype=float), CANDIDATES),
                   chosen=chosen, source=np.full(rows, "test"), cluster=np.full(rows, ""))


def knows_jobs(X: np.ndarray) -> np.ndarray:
    return X[:, INDEX["expected_seconds"]].copy()


def knows_nodes(name: str):
    column, (slow, fast), factor = WORLDS[name]
    return lambda X: np.where(X[:, INDEX[column]] == fast, 1500.0, 1500.0 * factor)


@pytest.mark.parametrize("name", WORLDS)
@pytest.mark.parametrize("first", ["jobs", "nodes"])  # which model `select` considers first
def test_one_row_per_job_picks_the_model_that_places_best_where_pair_accuracy_would_not(name, first):
    candidates = world(name)
    records = candidates.take(candidates.chosen)
    models = {"jobs": knows_jobs, "nodes": knows_nodes(name)}
    placement = {m: score(candidates.y, f(candidates.X), candidates.sets()) for m, f in models.items()}
    assert placement["nodes"].regret_mean < placement["jobs"].regret_mean - 0.05  # nodes places better
    scores = {m: model_scores(records, f(records.X), f) for m, f in models.items()}
    assert scores["jobs"].pair_accuracy > scores["nodes"].pair_accuracy + 0.05  # pairs say the reverse
    assert judged_by(scores["jobs"], scores["nodes"]) == BY_NODE_PAIRS
    jobs = scores["jobs"]
    assert jobs.node_pair_weighted == jobs.node_pair_accuracy == 0.5  # it predicts a job alike everywhere

    kinds = ("hist_gradient_boosting", "hist_gradient_boosting_physics")
    order = ["jobs", "nodes"] if first == "jobs" else ["nodes", "jobs"]
    results = [KindResult(kind, scores[m], None, scores[m]) for kind, m in zip(kinds, order, strict=True)]
    assert select(results).kind == kinds[order.index("nodes")]
    by_pairs = [replace(r, overall=replace(r.overall, node_pairs=0)) for r in results]  # the former rule
    assert select(by_pairs).kind == kinds[order.index("jobs")]
    assert better(scores["nodes"], scores["jobs"]) and not better(scores["jobs"], scores["nodes"])
