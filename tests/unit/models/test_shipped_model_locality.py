"""The model the image ships, and the physics kind fitted on any data, never predict a node slower
because more of the job's peers are near it, everything else equal: for simulated jobs of every
cluster profile, each peer moved one level closer (far to zone, zone to rack, rack to the node
itself) leaves the candidate's prediction as fast or faster, with the links measured, unknown, and
with no job hints at all (a bare batch Job's pods)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from netsched.datagen.simulator import PROFILES, profile_config, simulate
from netsched.models.features import FEATURE_NAMES, INDEX
from netsched.models.predictor import Predictor
from netsched.testing.models import sim_rows
from netsched.training.dataset import dataset_from_rows
from netsched.training.fitting import fit_model

SHIPPED = Path(__file__).resolve().parents[3] / "models" / "current.json"
SHARES = ("peer_frac_node", "peer_frac_rack", "peer_frac_zone")  # then the rest: farther
HINTS = ("input_size_gb", "comm_gb_per_hour", "expected_seconds", "replicas")
JOBS_PER_PROFILE = 60


@pytest.fixture(scope="module")
def shipped() -> Predictor:
    return Predictor.load(SHIPPED)


def rows_with_peers(profile: str) -> np.ndarray:
    """A candidate row of each simulated job of `profile` that has placed peers."""
    rows, seen = [], set()
    for r in simulate(profile_config(profile, jobs=JOBS_PER_PROFILE, seed=101)):
        if r["peer_count"] > 0 and r["job_id"] not in seen:
            seen.add(r["job_id"])
            rows.append([r[name] for name in FEATURE_NAMES])
    return np.array(rows, dtype=np.float64)


def peers_moved_closer(row: np.ndarray) -> list[np.ndarray]:
    """`row` with its peers brought closer one peer and one level at a time until all are on the node:
    each step one peer moves from its level to the next closer one. The weakest link is kept while a
    peer is still off the node (all else equal) and unknown once none is, as the extender writes it."""
    k = int(row[INDEX["peer_count"]])
    counts = [round(row[INDEX[s]] * k) for s in SHARES]
    counts.append(k - sum(counts))  # node, rack, zone, farther
    steps = [row]
    while counts[0] < k:
        level = max(i for i, c in enumerate(counts) if c > 0)
        counts[level] -= 1
        counts[level - 1] += 1
        step = steps[-1].copy()
        for name, c in zip(SHARES, counts, strict=False):
            step[INDEX[name]] = c / k
        if counts[0] == k:
            step[INDEX["peer_bw_mbps"]] = step[INDEX["peer_rtt_ms"]] = math.nan
        steps.append(step)
    return steps


def variants(rows: np.ndarray) -> dict[str, np.ndarray]:
    unknown_links, bare = rows.copy(), rows.copy()
    unknown_links[:, [INDEX["peer_bw_mbps"], INDEX["peer_rtt_ms"]]] = math.nan
    bare[:, [INDEX[name] for name in HINTS]] = math.nan
    bare[:, [INDEX[name] for name in FEATURE_NAMES if name.startswith("kind_")]] = 0.0
    return {"links measured": rows, "links unknown": unknown_links, "no job hints": bare}


@pytest.mark.parametrize("profile", list(PROFILES))
def test_moving_peers_closer_never_makes_the_shipped_models_prediction_slower(shipped, profile):
    assert_peers_closer_never_slower(shipped.predict, rows_with_peers(profile))


@pytest.mark.parametrize("seed", [4, 9])
def test_moving_peers_closer_never_makes_a_physics_model_fitted_on_one_small_cluster_slower(seed):
    """Few rows, fitted here: the constraints hold whatever the data, not only for the shipped file."""
    ds = dataset_from_rows(sim_rows(jobs=150, seed=seed))
    model = fit_model("hist_gradient_boosting_physics", FEATURE_NAMES, ds.X, np.log(ds.y), ds.candidate_set,
                      seed=0)
    assert_peers_closer_never_slower(lambda X: np.exp(model.predict(X)), rows_with_peers("default"))


def assert_peers_closer_never_slower(predict, rows: np.ndarray) -> None:
    assert len(rows) >= 15, "too few simulated jobs with peers to test on"
    for variant, sample in variants(rows).items():
        moved = 0
        for row in sample:
            steps = peers_moved_closer(row)
            seconds = predict(np.array(steps))
            worse = np.flatnonzero(np.diff(seconds) > 1e-9 * seconds[:-1])
            assert not len(worse), (f"{variant}: peers moved closer, predicted slower: "
                                    f"{seconds[worse[0]]:.2f} s -> {seconds[worse[0] + 1]:.2f} s "
                                    f"(shares {steps[worse[0]][[INDEX[s] for s in SHARES]]} -> "
                                    f"{steps[worse[0] + 1][[INDEX[s] for s in SHARES]]})")
            moved += len(steps) - 1
        assert moved >= len(rows), variant  # most jobs had peers off the candidate to move
