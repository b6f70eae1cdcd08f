"""Benchmark scenarios in the shape of "Priority Matters" (arXiv 2511.08373).

Identical nodes; ReplicaSets of 1-4 replicas with CPU uniform in 100-1000 m and memory
in 100-1000 MB, each ReplicaSet one of `classes` priorities; total node capacity = total
requests / utilisation. Every pod is created (in random order) before the scheduler starts,
so the default-scheduler emulation queues them by priority and preempts, as kube-scheduler
does; a scenario counts when it leaves pods pending.
"""

from __future__ import annotations

import math
import random

from netsched.packing.default_scheduler import preemptive_schedule
from netsched.packing.problem import Node, Pod, Problem

MB = 1_000_000
TAKEN = 1_800_000_000.0  # the scenarios' clock (Unix seconds): pods started up to 10 hours before


def scenario(nodes: int, pods_per_node: int, classes: int, utilisation: float, seed: int,
             gpus: bool = False) -> Problem:
    """The cluster after the default scheduler placed every pod it could. With `gpus`, each
    ReplicaSet also asks for 1, 2 or 4 GPUs per pod, and nodes are sized for GPUs the same way."""
    rng = random.Random(seed)
    pods: list[Pod] = []
    rs = 0
    while len(pods) < nodes * pods_per_node:
        replicas = min(rng.randint(1, 4), nodes * pods_per_node - len(pods))
        req = {"cpu": rng.randint(100, 1000), "memory": rng.randint(100, 1000) * MB}
        if gpus:
            req["nvidia.com/gpu"] = rng.choice((1, 2, 4))
        prio = rng.randrange(classes) * 1000
        pods += [Pod(f"rs{rs}-{k}", dict(req), prio) for k in range(replicas)]
        rs += 1
    totals = {r: sum(p.requests.get(r, 0) for p in pods) for r in pods[0].requests}
    cap = {r: math.ceil(v / utilisation / nodes) for r, v in totals.items()}
    node_list = tuple(Node(f"node-{i}", dict(cap)) for i in range(nodes))
    order = pods[:]
    rng.shuffle(order)
    placed = preemptive_schedule(Problem(node_list, tuple(order)))
    clock = random.Random(-seed - 1)  # its own stream: run times do not change the pods drawn above
    started = {p.name: TAKEN - clock.uniform(0, 36000) for p in pods}
    # ReplicaSets' pods: stateless replicas, which the default policy may move for any work
    return Problem(node_list, tuple(Pod(p.name, p.requests, p.priority, placed[p.name],
                                        started=started[p.name] if placed[p.name] else None, stateless=True)
                                    for p in pods),
                   taken=TAKEN)


def failing(problem: Problem) -> bool:
    return any(not p.running for p in problem.pods)
