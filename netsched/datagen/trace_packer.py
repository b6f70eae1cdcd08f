"""netsched in the openb replay, as served: the extender's scoring per pod (`netsched_served`), the
pods that fit nowhere waiting, and at each measured load the packer (`netsched.packing.solve`, the
default disruption policy) planning room for them over the whole cluster, its plan carried out
(moves, evictions, placements) before the load is measured.

What netsched does with a share of one GPU: nothing special. Kubernetes counts `nvidia.com/gpu` in
whole GPUs and netsched has no GPU sharing, so a trace pod asking part of a GPU asks one whole GPU
here; the replay still counts only the share it asked as allocated.

Priority comes from the trace's `qos` (`QOS_PRIORITY`). Under the default policy a pod is moved or
evicted only to place a higher-priority pod (no trace pod is a stateless replica, the one kind the
default lets move for equal-priority work); an evicted pod waits again.
"""

from __future__ import annotations

from netsched.datagen.gpu_cluster import Ask
from netsched.datagen.openb import MILLI, TraceNode, TracePod
from netsched.datagen.placement_policies import netsched_served
from netsched.datagen.trace_replay import Replay
from netsched.packing.policy import PRICED, Policy
from netsched.packing.problem import Node, Pod, Problem
from netsched.packing.solver import solve

QOS_PRIORITY = {"BE": 0, "Burstable": 1, "LS": 2, "Guaranteed": 3}  # best effort lowest
GPU = "nvidia.com/gpu"


class NetschedReplay(Replay):
    def __init__(self, nodes: list[TraceNode], seed: int, budget: float = 10.0,
                 policy: Policy = PRICED, name: str = "netsched", packer: bool = True) -> None:
        super().__init__(name, nodes, netsched_served, seed)
        self.budget, self.policy, self.packer = budget, policy, packer
        self.nodes = tuple(Node(n.name, {"cpu": n.cpu_milli, "memory": n.memory_mib, GPU: n.gpus})
                           for n in nodes)
        self.plans: list[dict[str, float]] = []  # per plan: pending, placed, moved, evicted, seconds

    def ask(self, pod: TracePod) -> Ask:
        return Ask(pod.cpu_milli, pod.memory_mib, pod.num_gpu, MILLI if pod.num_gpu else 0, pod.gpu_spec)

    def problem(self) -> Problem:
        names = self.cluster.names
        pods = [self._pod(key, pod, names[self.cluster.held[key][0]]) for key, pod in self.asked.items()]
        pods += [self._pod(key, pod, None) for key, pod in self.waiting.items()]
        return Problem(self.nodes, tuple(pods))

    def _pod(self, key: str, pod: TracePod, node: str | None) -> Pod:
        ask = self.ask(pod)
        models = self.cluster.models
        allowed = (tuple(n for n, m in zip(self.cluster.names, models, strict=True) if m in ask.models)
                   if ask.models else None)
        return Pod(key, {"cpu": ask.cpu, "memory": ask.memory, GPU: ask.gpus},
                   QOS_PRIORITY.get(pod.qos, 0), node, allowed=allowed, priority_class=pod.qos)

    def at_load(self) -> None:
        if not (self.packer and self.waiting):
            return
        problem, waiting = self.problem(), len(self.waiting)
        plan = solve(problem, self.budget, workers=1, policy=self.policy)
        changes = plan.changes(problem)
        index = {n: i for i, n in enumerate(self.cluster.names)}
        pods = {**self.asked, **self.waiting}
        for key, *_ in changes["moves"] + changes["evictions"]:
            self.cluster.remove(key)
            self.waiting[key] = self.asked.pop(key)
        for key, *where in changes["moves"] + changes["placements"]:
            node = index[where[-1]]
            ask = self.ask(pods[key])
            self.cluster.place(key, node, ask, self.cluster.best_fit_slots(node, ask))
            self.asked[key] = self.waiting.pop(key)
        self.outcome.moved += len(changes["moves"])
        self.outcome.evicted += len(changes["evictions"])
        self.plans.append({"pending": waiting,
                           "placed": len(changes["placements"]), "moved": len(changes["moves"]),
                           "evicted": len(changes["evictions"]), "seconds": plan.seconds})
