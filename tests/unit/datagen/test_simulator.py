import math
from collections import defaultdict

import numpy as np
import pytest

from netsched.datagen.simulator import SimConfig
from netsched.models.features import TARGET
from netsched.testing.models import sim_rows
from netsched.training.dataset import COLUMNS
from netsched.training.policies import least_allocated_balanced


def test_the_same_seed_gives_the_same_rows_and_another_seed_does_not():
    first, again, other = sim_rows(jobs=20, seed=4), sim_rows(jobs=20, seed=4), sim_rows(jobs=20, seed=5)
    assert all(_same(a, b) for a, b in zip(first, again, strict=True))
    assert [r[TARGET] for r in first] != [r[TARGET] for r in other]


def _same(a: dict, b: dict) -> bool:
    return all(a[k] == b[k] or (isinstance(a[k], float) and math.isnan(a[k]) and math.isnan(b[k])) for k in a)


def test_rows_are_whole_candidate_sets_in_time_order():
    rows = sim_rows(jobs=25, seed=6)
    assert all(set(r) == set(COLUMNS) for r in rows)
    sets = defaultdict(list)
    for r in rows:
        sets[r["candidate_set"]].append(r)
    starts = [group[0]["start_unix"] for group in sets.values()]
    assert len(sets) == 25 and starts == sorted(starts)
    for group in sets.values():
        assert len(group) == 8 and len({r["node"] for r in group}) == 8
        assert all(r[TARGET] > 0 and r["node_free_gpus"] >= r["gpus_per_replica"] for r in group)
        chosen = [r for r in group if r["chosen"]]
        scores = least_allocated_balanced(np.array([r["node_cpu_load"] for r in group]),
                                          np.array([r["node_mem_load"] for r in group]))
        assert len(chosen) == 1 and chosen[0] is group[int(np.argmax(scores))]  # kube-scheduler's pick


def test_a_later_start_moves_the_window_only():
    early, late = sim_rows(jobs=3, seed=2), sim_rows(jobs=3, seed=2, start_unix=1_800_000_000.0)
    shift = late[0]["start_unix"] - early[0]["start_unix"]
    assert shift == pytest.approx(1_800_000_000.0 - 1_767_225_600.0, abs=0.01)


def test_impossible_shapes_are_refused():
    with pytest.raises(ValueError, match="8 candidates per job need at least as many nodes, not 4"):
        SimConfig(nodes=4)
    with pytest.raises(ValueError, match="at least 2 nodes, 2 candidates and 1 job"):
        SimConfig(jobs=0)


def test_every_cluster_profile_simulates_its_own_gpus_and_an_unknown_profile_is_refused():
    from netsched.datagen.simulator import PROFILES, profile_config, simulate

    for name in PROFILES:
        rows = list(simulate(profile_config(name, jobs=5, seed=1)))
        assert len(rows) == 5 * 8 and all(r[TARGET] > 0 for r in rows)
    with pytest.raises(ValueError, match="unknown cluster profile 'nope'; one of default"):
        SimConfig(profile="nope")
