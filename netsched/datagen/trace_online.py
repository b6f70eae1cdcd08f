"""The openb trace replayed online: pods arrive at the trace's creation times and run for the trace's own
run time (deletion - scheduled), a placement policy places each when it fits, and a pod that fits nowhere
waits, in kube-scheduler's queue order (higher priority first, then earlier arrival; priority from
`qos`), until a departure makes room. Measured: the queueing delay (arrival to placement) p50 / p95 of
the pods placed, the GPU utilisation (GPUs held by running pods, time-averaged over the arrival window,
and over the time some pod waited: there a GPU not held is one the waiting pods could not use), the pods
still waiting when the last pod arrives, and those never placed at all (a pod that fits no node of the
empty cluster is one of them and never queues).

`compress` divides the arrival times, run times kept, to offer the cluster more load than the trace
does: at its own times the default file's pods never hold more than 66 of the 6,212 GPUs at once (the
file is a sample of the cluster's pods). Pods the real cluster never scheduled (no scheduled time, so no
run time) are left out. No policy here moves or evicts a pod: netsched's packer does not take part.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from netsched.datagen.gpu_cluster import Ask, GpuCluster
from netsched.datagen.openb import MILLI, TraceNode, TracePod
from netsched.datagen.placement_policies import Chooser
from netsched.datagen.trace_packer import QOS_PRIORITY

ARRIVE, DEPART = 1, 0  # at one instant, departures first: their room is there for the arrivals


@dataclass
class OnlineOutcome:
    policy: str
    pods: int = 0
    placed: int = 0
    queue_p50: float = 0.0  # seconds, of the pods placed
    queue_p95: float = 0.0
    utilisation: float = 0.0  # GPU requests of running pods over the cluster's GPUs, time-averaged
    utilisation_waiting: float = 0.0  # the same over the time some pod waited (where placement tells)
    waited_seconds: float = 0.0  # how long some pod waited, in all
    waiting_at_end: int = 0  # still waiting when the last pod arrived
    never_placed: int = 0
    seconds: float = 0.0  # wall time of the replay


def runs(pods: list[TracePod]) -> list[TracePod]:
    """The pods with a run time: scheduled by the real cluster and deleted."""
    return [p for p in pods if p.scheduled_time is not None and p.deletion_time is not None]


def _run_time(pod: TracePod) -> float:
    return float((pod.deletion_time or 0) - (pod.scheduled_time or 0))


def replay_online(name: str, nodes: list[TraceNode], pods: list[TracePod], choose: Chooser,
                  ask: Callable[[TracePod], Ask] = Ask.of, compress: float = 1.0,
                  seed: int = 0) -> OnlineOutcome:
    """One policy over the pods' own arrivals (divided by `compress`) and run times; `ask`: what the
    policy requests for a trace pod (netsched: whole GPUs)."""
    started = time.perf_counter()
    cluster, rng = GpuCluster(nodes), np.random.default_rng(seed)
    live = runs(pods)
    asks = [ask(p) for p in live]
    ever = [bool(cluster.feasible(a).any()) for a in asks]  # fits the empty cluster: else never queued
    events = [(p.creation_time / compress, ARRIVE, k) for k, p in enumerate(live)]
    heapq.heapify(events)
    end_of_arrivals = max(t for t, _, _ in events) if events else 0.0
    waiting: list[tuple[int, float, int]] = []  # (-priority, arrival, pod), kept sorted
    delays: list[float] = []
    held_milli, area, last_t, waiting_at_end = 0.0, 0.0, 0.0, 0
    busy_area = busy_time = 0.0
    while events:
        now = events[0][0]
        area += held_milli * (min(now, end_of_arrivals) - min(last_t, end_of_arrivals))
        if waiting:
            busy_area += held_milli * (now - last_t)
            busy_time += now - last_t
        last_t = now
        changed: set[int] = set()
        while events and events[0][0] == now:
            _, kind, k = heapq.heappop(events)
            if kind == DEPART:
                changed.add(cluster.remove(str(k)))
                held_milli -= live[k].gpu_request * MILLI
            elif ever[k]:
                waiting.append((-QOS_PRIORITY.get(live[k].qos, 0), now, k))
        waiting.sort()
        freed = np.array(sorted(changed), dtype=np.int64)
        room = _Room(cluster, freed)
        still = []
        for entry in waiting:
            _, arrived, k = entry
            earlier = arrived < now  # it fitted nowhere before: only the nodes freed now may take it
            if earlier and not room.may_fit(asks[k]):
                still.append(entry)
                continue
            nodes_now = freed if earlier else slice(None)
            idx = np.flatnonzero(cluster.feasible(asks[k], nodes_now))
            if not len(idx):
                still.append(entry)
                continue
            where = idx if isinstance(nodes_now, slice) else nodes_now[idx]
            node, slots = choose(cluster, asks[k], where, rng)
            cluster.place(str(k), node, asks[k], slots)
            held_milli += live[k].gpu_request * MILLI
            delays.append(now - arrived)
            heapq.heappush(events, (now + _run_time(live[k]), DEPART, k))
        waiting = still
        if now == end_of_arrivals:
            waiting_at_end = len(waiting)
    total = cluster.total_milli
    return OnlineOutcome(
        name, len(live), len(delays), float(np.percentile(delays, 50)) if delays else 0.0,
        float(np.percentile(delays, 95)) if delays else 0.0,
        area / (total * end_of_arrivals) if end_of_arrivals else 0.0,
        busy_area / (total * busy_time) if busy_time else 0.0, busy_time, waiting_at_end,
        len(waiting) + ever.count(False), time.perf_counter() - started)


class _Room:
    """The most any freed node has free (CPU, memory, whole GPUs, one GPU's share) when the instant's
    departures are done: a waiting pod asking more fits none of them, told without a numpy call."""

    def __init__(self, cluster: GpuCluster, freed: np.ndarray) -> None:
        if not len(freed):
            self.cpu = self.memory = self.whole = self.share = -1
            return
        gpu = cluster.gpu[freed]
        self.cpu, self.memory = int(cluster.cpu[freed].max()), int(cluster.mem[freed].max())
        self.whole, self.share = int((gpu == MILLI).sum(axis=1).max()), int(gpu.max())

    def may_fit(self, ask: Ask) -> bool:
        if ask.cpu > self.cpu or ask.memory > self.memory:
            return False
        if ask.shares:
            return ask.milli <= self.share
        return ask.gpus <= self.whole
