"""The completion-time laws of the worlds unlike the simulator's own (netsched.datagen.laws)."""

import dataclasses
import math

import numpy as np
import pytest

from netsched.datagen import laws
from netsched.datagen.simulator import PROFILES

BASE = laws.Inputs(gpu="NVIDIA-L40S", kind="inference", work_s=1000.0, physics_compute_s=2000.0,
                   cpu_factor=1.0,
                   input_gb_per_replica=10.0, data_mbps=1000.0, data_far=False, replicas=4, volume_gb=50.0,
                   peer_mbps=10_000.0, peer_rtt_ms=0.5, steps=100.0)


def at(**changes) -> laws.Inputs:
    return dataclasses.replace(BASE, **changes)


def test_affinity_speed_depends_on_the_workload_kind_not_on_one_number_per_gpu():
    def t(gpu, kind):
        return laws.seconds("affinity", at(gpu=gpu, kind=kind, replicas=1, peer_mbps=math.nan), 30.0, 0.0)

    assert t("NVIDIA-L40S", "inference") < t("NVIDIA-A100-SXM4-80GB", "inference")  # the reverse in training
    assert t("NVIDIA-L40S", "training") > t("NVIDIA-A100-SXM4-80GB", "training")


def test_cliff_costs_nothing_while_the_link_keeps_up_then_stretches_compute():
    def t(mbps, rtt=0.5):
        return laws.seconds("cliff", at(peer_mbps=mbps, peer_rtt_ms=rtt), 30.0, 0.0)

    need = 2 * 3 / 4 * 50.0 * 8000 / 2000.0  # 300 Mbit/s while computing
    assert t(need * 10) == t(need * 2) == 30 + 80 + 2000
    assert t(need / 2) == pytest.approx(30 + 80 + 4000)  # half the rate: twice the compute time
    assert t(need * 10, rtt=1.0) == t(need * 10, rtt=0.2) < t(need * 10, rtt=3.0)


def test_cached_inputs_cost_the_same_anywhere_and_large_far_ones_twice():
    def t(gb, far, mbps=1000.0):
        return laws.seconds("cached", at(input_gb_per_replica=gb, data_far=far, data_mbps=mbps, replicas=1,
                                         peer_mbps=math.nan), 30.0, 0.0)

    assert t(laws.CACHE_GB, True, 100.0) == t(laws.CACHE_GB, False, 5000.0)
    big = 4 * laws.CACHE_GB
    assert t(big, True) - t(big, False) == pytest.approx(big * 8000 / 1000.0)


def test_stragglers_are_rare_on_idle_nodes_heavy_tailed_and_capped():
    rng = np.random.default_rng(0)
    idle = np.array([laws.straggle(rng, 0.0, 0.0) for _ in range(4000)])
    busy = np.array([laws.straggle(rng, 1.0, 1.0) for _ in range(4000)])
    assert (idle > 1).mean() < (busy > 1).mean()
    assert busy.max() == laws.STRAGGLE_CAP and np.median(busy) == 1.0


@pytest.mark.parametrize(("cpu", "nic"), [(0.0, 0.0), (0.5, 0.3), (1.0, 1.0)])
def test_the_expected_straggle_is_the_mean_of_the_draws(cpu, nic):
    rng = np.random.default_rng(1)
    draws = np.array([laws.straggle(rng, cpu, nic) for _ in range(40_000)])
    assert laws.expected_straggle(cpu, nic) == pytest.approx(draws.mean(), rel=0.02)


def test_every_law_is_a_profile_and_an_unknown_law_is_refused():
    assert {p.law for p in PROFILES.values()} == set(laws.LAWS)
    with pytest.raises(ValueError, match="unknown completion-time law 'nope'"):
        laws.seconds("nope", BASE, 30.0, 1.0)
