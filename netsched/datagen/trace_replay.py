"""The openb trace replayed as "Beware of Fragmentation" (USENIX ATC '23) does: pods drawn from the
trace with replacement until their GPU requests reach 1.3 times the cluster's GPUs (`arrivals`, in
random order), submitted one by one to a placement policy, nothing leaving; a pod that fits nowhere
is not placed. The measure: the GPU allocation ratio (GPU requests of the placed pods over the
cluster's GPUs) against the arrived load (GPU requests submitted so far over the cluster's GPUs), at
the loads of `LOADS`.

A policy may also keep the pods it could not place waiting and act when the load reaches each
measured point (`Replay.at_load`): netsched's packer does (`trace_packer`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from netsched.datagen.gpu_cluster import Ask, GpuCluster
from netsched.datagen.openb import MILLI, TraceNode, TracePod
from netsched.datagen.placement_policies import Chooser

LOADS = (0.9, 0.95, 1.0, 1.1, 1.3)


def arrivals(pods: list[TracePod], gpus: int, seed: int, limit: float = max(LOADS)) -> list[TracePod]:
    """Pods drawn with replacement (so in random order) until their GPU requests reach `limit` x `gpus`."""
    rng = np.random.default_rng(seed)
    out: list[TracePod] = []
    asked = 0.0
    while asked < limit * gpus - 1e-9:
        pod = pods[int(rng.integers(len(pods)))]
        out.append(pod)
        asked += pod.gpu_request
    return out


@dataclass
class Outcome:
    policy: str
    ratio: dict[float, float] = field(default_factory=dict)  # arrived load -> GPU allocation ratio
    unallocated: dict[float, float] = field(default_factory=dict)  # arrived load -> GPUs not allocated
    seconds: float = 0.0
    placed: int = 0
    pending: int = 0  # pods that were never placed (or were evicted and not placed again)
    moved: int = 0
    evicted: int = 0


class Replay:
    """One policy over one arrival sequence."""

    def __init__(self, name: str, nodes: list[TraceNode], choose: Chooser, seed: int) -> None:
        self.name, self.cluster, self.choose = name, GpuCluster(nodes), choose
        self.rng = np.random.default_rng([seed, 1])  # the policy's own draws, apart from the arrivals'
        self.asked: dict[str, TracePod] = {}  # placed pod -> what the trace says it asks
        self.waiting: dict[str, TracePod] = {}
        self.outcome = Outcome(name)

    def ask(self, pod: TracePod) -> Ask:
        """What the policy requests for a trace pod (netsched: whole GPUs)."""
        return Ask.of(pod)

    def at_load(self) -> None:
        """At each measured load, before measuring: what a policy does for the pods waiting."""

    def served_milli(self) -> int:
        return round(sum(p.gpu_request for p in self.asked.values()) * MILLI)

    def run(self, pods: list[TracePod]) -> Outcome:
        started = time.perf_counter()
        total = self.cluster.total_milli
        arrived, marks = 0.0, list(LOADS)
        for k, pod in enumerate(pods):
            key = f"{k}:{pod.name}"
            ask = self.ask(pod)
            idx = np.flatnonzero(self.cluster.feasible(ask))
            if len(idx):
                node, slots = self.choose(self.cluster, ask, idx, self.rng)
                self.cluster.place(key, node, ask, slots)
                self.asked[key] = pod
            else:
                self.waiting[key] = pod
            arrived += pod.gpu_request * MILLI
            while marks and arrived >= marks[0] * total - 1e-6:
                self.at_load()
                served = self.served_milli()
                self.outcome.ratio[marks[0]] = served / total
                self.outcome.unallocated[marks[0]] = (total - served) / MILLI
                marks.pop(0)
        self.outcome.seconds = time.perf_counter() - started
        self.outcome.placed, self.outcome.pending = len(self.asked), len(self.waiting)
        return self.outcome
