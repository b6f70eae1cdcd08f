"""A GPU cluster at the level of single GPUs, for replaying the openb trace (`trace_replay`): per node
free CPU and memory, and per GPU the free share in milli-GPUs, so that a pod asking part of one GPU
(gpu_milli below 1000) shares a GPU with others, as in the trace's own cluster.

Pure bookkeeping, vectorised over nodes: a replay asks "which nodes could take this pod" once per
pod, at 1,213 nodes and ten thousand pods per run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netsched.datagen.openb import MILLI, TraceNode, TracePod

NO_GPU = -1  # the free share of a GPU slot the node does not have


@dataclass(frozen=True)
class Ask:
    """What one pod asks for: CPU, memory, and `gpus` GPUs of `milli` each (a share when below 1000)."""
    cpu: int
    memory: int
    gpus: int
    milli: int
    models: tuple[str, ...] = ()  # GPU models it may use; empty: any

    @classmethod
    def of(cls, pod: TracePod) -> Ask:
        milli = pod.gpu_milli if pod.num_gpu else 0
        return cls(pod.cpu_milli, pod.memory_mib, pod.num_gpu, milli, pod.gpu_spec)

    @property
    def shares(self) -> bool:
        return self.gpus == 1 and 0 < self.milli < MILLI


class GpuCluster:
    def __init__(self, nodes: list[TraceNode]) -> None:
        self.names = [n.name for n in nodes]
        self.cpu_cap = np.array([n.cpu_milli for n in nodes], dtype=np.int64)
        self.mem_cap = np.array([n.memory_mib for n in nodes], dtype=np.int64)
        self.gpu_cap = np.array([n.gpus for n in nodes], dtype=np.int64)
        self.models = np.array([n.model for n in nodes])
        slots = max(1, int(self.gpu_cap.max(initial=0)))
        self.cpu, self.mem = self.cpu_cap.copy(), self.mem_cap.copy()
        self.gpu = np.where(np.arange(slots)[None, :] < self.gpu_cap[:, None], MILLI, NO_GPU).astype(np.int64)
        self.total_milli = int(self.gpu_cap.sum()) * MILLI
        self.held: dict[str, tuple[int, tuple[int, ...], Ask]] = {}  # pod -> node, its GPU slots, its ask

    @property
    def allocated_milli(self) -> int:
        """GPU share held by the pods placed (what they hold, not what they asked)."""
        return int(np.where(self.gpu >= 0, MILLI - self.gpu, 0).sum())

    def whole_free(self) -> np.ndarray:
        return (self.gpu == MILLI).sum(axis=1)

    def feasible(self, ask: Ask, nodes: np.ndarray | slice = slice(None)) -> np.ndarray:
        """Per node (of `nodes`, default all): could it take `ask` now."""
        ok = (self.cpu[nodes] >= ask.cpu) & (self.mem[nodes] >= ask.memory)
        if ask.models:
            ok &= np.isin(self.models[nodes], ask.models)
        if ask.gpus == 0:
            return ok
        gpu = self.gpu[nodes]
        if ask.shares:
            return ok & (gpu >= ask.milli).any(axis=1)
        return ok & ((gpu == MILLI).sum(axis=1) >= ask.gpus)

    def best_fit_slots(self, node: int, ask: Ask) -> tuple[int, ...]:
        """The GPU slots `ask` takes on `node`: a share goes to the fullest GPU it fits on (it keeps
        whole GPUs whole), whole GPUs to the first free ones."""
        row = self.gpu[node]
        if ask.gpus == 0:
            return ()
        if ask.shares:
            fits = np.flatnonzero(row >= ask.milli)
            return (int(fits[np.argmin(row[fits])]),)
        return tuple(int(s) for s in np.flatnonzero(row == MILLI)[:ask.gpus])

    def place(self, pod: str, node: int, ask: Ask, slots: tuple[int, ...]) -> None:
        self.cpu[node] -= ask.cpu
        self.mem[node] -= ask.memory
        for s in slots:
            self.gpu[node, s] -= ask.milli
        self.held[pod] = (node, slots, ask)

    def remove(self, pod: str) -> int:
        """Take a placed pod off its node; returns the node."""
        node, slots, ask = self.held.pop(pod)
        self.cpu[node] += ask.cpu
        self.mem[node] += ask.memory
        for s in slots:
            self.gpu[node, s] += ask.milli
        return node
