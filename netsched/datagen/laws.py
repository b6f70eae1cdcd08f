"""Completion-time laws unlike the simulator's own: worlds whose form, not only parameters, differs.

The simulator's law (simulator.py's docstring, `physics` here) adds startup, pull, compute and
exchange seconds, with GPU speed one number per product raised to a power per workload kind: much
the shape netsched.models.physics assumes. A model that only ever meets that shape can score well
for the wrong reason, so these worlds break one assumption each (datagen/README.md says which):

- `affinity`: a GPU's speed is a table per (product, workload kind), not a power of one number per
  product: inference runs on an L40S almost as fast as on an H100, ETL barely cares which GPU;
- `cliff`: the exchange is overlapped with compute while the link keeps up, and past that it
  stretches the whole compute time (multiplicative, with a threshold), as does RTT above 1 ms;
- `cached`: inputs up to CACHE_GB per replica come from a cluster-wide cache at the same speed
  everywhere (locality does not matter); larger ones are read from their source, twice as slowly
  from beyond the node's zone;
- `stragglers`: the simulator's law times a heavy-tailed straggle factor, more likely on loaded
  nodes (1 + Lomax(STRAGGLE_SHAPE), capped at STRAGGLE_CAP).

Nothing of netsched's models imports this module (import-linter: datagen sits above training and
models); the models learn these laws only from the rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

LAWS = ("physics", "affinity", "cliff", "cached", "stragglers")

# affinity: relative speed per workload kind (training, inference, etl, batch); an H100 training is 1
AFFINITY_SPEED = {
    "NVIDIA-H100-80GB-HBM3": (1.0, 0.55, 0.45, 0.8),
    "NVIDIA-A100-SXM4-80GB": (0.55, 0.45, 0.45, 0.65),
    "NVIDIA-L40S": (0.3, 0.5, 0.42, 0.55),
    "NVIDIA-A40": (0.22, 0.35, 0.4, 0.35),
    "NVIDIA-L4": (0.07, 0.3, 0.38, 0.15),
    "Tesla-V100-SXM2-32GB": (0.3, 0.2, 0.4, 0.3),
}
AFFINITY_KINDS = ("training", "inference", "etl", "batch")
RTT_FREE_MS = 1.0  # cliff: RTT up to this is hidden behind compute
CACHE_GB = 60.0  # cached: per-replica input served from the cluster cache
CACHE_MBPS = 20_000.0
FAR_PENALTY = 2.0  # cached: a large input read from beyond the node's zone
STRAGGLE_SHAPE, STRAGGLE_CAP = 1.5, 20.0


@dataclass(frozen=True)
class Inputs:
    """What a law needs of one (job, candidate): the true quantities, never the row's measured ones."""
    gpu: str
    kind: str
    work_s: float  # compute seconds on an H100 at the physics law's speed 1
    physics_compute_s: float  # the physics law's compute seconds on this GPU and CPU load
    cpu_factor: float  # 1 + CPU sensitivity x CPU load
    input_gb_per_replica: float
    data_mbps: float  # true bandwidth to the data, contention applied (local disk: none)
    data_far: bool  # the data is beyond the node's zone (or at an endpoint)
    replicas: int
    volume_gb: float  # GB the job exchanges over its work
    peer_mbps: float  # the weakest peer link's true bandwidth, contention applied; NaN without peers
    peer_rtt_ms: float  # the highest peer RTT; NaN without peers
    steps: float


def seconds(law: str, x: Inputs, startup_s: float, physics_s: float) -> float:
    """Completion seconds under `law` (without noise; `physics_s` is the physics law's answer)."""
    if law == "physics" or law == "stragglers":
        return physics_s
    pull = x.input_gb_per_replica * 8000 / x.data_mbps
    compute = x.physics_compute_s
    if law == "affinity":
        speed = AFFINITY_SPEED[x.gpu][AFFINITY_KINDS.index(x.kind)]
        return startup_s + pull + x.work_s / speed * x.cpu_factor + _additive_exchange(x)
    if law == "cliff":
        if x.replicas < 2 or math.isnan(x.peer_mbps):
            return startup_s + pull + compute
        need = 2 * (x.replicas - 1) / x.replicas * x.volume_gb * 8000 / compute  # Mbit/s while computing
        stretch = max(1.0, need / x.peer_mbps)
        stall = 1 + x.steps * 2 * (x.replicas - 1) * max(0.0, x.peer_rtt_ms - RTT_FREE_MS) / 1000 / compute
        return startup_s + pull + compute * stretch * stall
    if law == "cached":
        if x.input_gb_per_replica <= CACHE_GB:
            pull = x.input_gb_per_replica * 8000 / CACHE_MBPS
        elif x.data_far:
            pull *= FAR_PENALTY
        return startup_s + pull + compute + _additive_exchange(x)
    raise ValueError(f"unknown completion-time law {law!r}; one of {', '.join(LAWS)}")


def _additive_exchange(x: Inputs) -> float:
    if x.replicas < 2 or math.isnan(x.peer_mbps):
        return 0.0
    r = x.replicas
    return 2 * (r - 1) / r * x.volume_gb * 8000 / x.peer_mbps + x.steps * 2 * (r - 1) * x.peer_rtt_ms / 1000


def straggle(rng: np.random.Generator, cpu: float, nic: float) -> float:
    """stragglers: the factor a run takes longer by, 1 for most runs, heavy-tailed for the rest; a
    busier node (CPU load, NIC utilisation) straggles more often."""
    hit, tail = rng.random(), rng.pareto(STRAGGLE_SHAPE)
    return min(1.0 + tail, STRAGGLE_CAP) if hit < _straggle_chance(cpu, nic) else 1.0


def expected_straggle(cpu: float, nic: float) -> float:
    """The mean of `straggle` on a node so loaded: what a run there can be expected to take longer
    by, knowing how likely the node is to straggle but not which run will. E[min(T, c)] of a Lomax T
    of shape a is (1 - (1 + c)^(1 - a)) / (a - 1)."""
    a, c = STRAGGLE_SHAPE, STRAGGLE_CAP - 1
    return 1.0 + _straggle_chance(cpu, nic) * (1 - (1 + c) ** (1 - a)) / (a - 1)


def _straggle_chance(cpu: float, nic: float) -> float:
    return 0.03 + 0.25 * cpu ** 2 + 0.2 * nic ** 2
