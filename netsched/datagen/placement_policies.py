"""The placement policies the openb replay compares, each written here from its published definition
(Weng et al., "Beware of Fragmentation", USENIX ATC '23, section 6, and the policies it cites), plus
kube-scheduler's default scoring and netsched's as served. Each picks, among the nodes that could take
a pod (`GpuCluster.feasible`), one node and the GPU slots the pod takes there.

- Random: any feasible node.
- DotProd (Tetris): the node whose free (CPU, GPU) vector, normalised by the node's capacity, has the
  smallest dot product with the pod's demand.
- Packing: a shared GPU already in use first (the fullest), then free GPUs of a node already in use
  (fewest), then an idle node (the smallest); a pod asking no GPU anywhere.
- Clustering: pods of one GPU shape (GPUs and share each) together: a node holding only that shape
  first, then one holding it among others, then an idle node, then any; within each, the fullest.
  A pod asking no GPU anywhere.
- BestFit: the node with the least left after placing, 0.5 CPU + 0.5 GPU, each over the largest node's.
- FGD: the node (and GPU) that least increases the expected fragmentation under the workload's own
  distribution of pod shapes: for a pod shape m, a node's free GPU share that m cannot use (all of it
  when m does not fit the node; otherwise the GPUs with less free than m's per-GPU share), weighted by
  how often m occurs.
- default: kube-scheduler's default profile, NodeResourcesFit LeastAllocated plus
  NodeResourcesBalancedAllocation over CPU and memory (`netsched.packing.default_scheduler`).
- netsched: as served to a pod with no network annotations: the extender's shortlist of one is the node
  whose free GPUs it uses most exactly (`netsched.models.heuristic.tightness`), the first by name among
  equals; a pod asking no GPU never reaches the extender and gets kube-scheduler's scoring in the
  netsched profile (MostAllocated over GPUs plus BalancedAllocation).

Ties go to a random node among the best (kube-scheduler's selectHost), except netsched's (by name, as
its extender ranks). A share of one GPU goes to the fullest GPU it fits on, except under FGD, which
weighs every GPU it could take.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np

from netsched.datagen.gpu_cluster import Ask, GpuCluster
from netsched.datagen.openb import MILLI
from netsched.models.heuristic import tightness

Choice = tuple[int, tuple[int, ...]]  # node, GPU slots
Chooser = Callable[[GpuCluster, Ask, np.ndarray, np.random.Generator], Choice]
TOLERANCE = 1e-9


def _best(values: np.ndarray, idx: np.ndarray, rng: np.random.Generator | None) -> int:
    """The node of the highest value; among equals a random one (rng) or the first."""
    top = np.flatnonzero(values >= values.max() - TOLERANCE)
    return int(idx[top[0] if rng is None else rng.choice(top)])


def _with_slots(cluster: GpuCluster, ask: Ask, node: int) -> Choice:
    return node, cluster.best_fit_slots(node, ask)


def random_fit(cluster: GpuCluster, ask: Ask, idx: np.ndarray, rng: np.random.Generator) -> Choice:
    return _with_slots(cluster, ask, int(rng.choice(idx)))


def _gpu_free(cluster: GpuCluster, idx: np.ndarray) -> np.ndarray:
    return np.where(cluster.gpu[idx] >= 0, cluster.gpu[idx], 0).sum(axis=1)


def dot_product(cluster: GpuCluster, ask: Ask, idx: np.ndarray, rng: np.random.Generator) -> Choice:
    cpu_cap, gpu_cap = cluster.cpu_cap[idx], np.maximum(cluster.gpu_cap[idx] * MILLI, 1)
    dot = (ask.cpu / cpu_cap) * (cluster.cpu[idx] / cpu_cap) + \
        (ask.gpus * ask.milli / gpu_cap) * (_gpu_free(cluster, idx) / gpu_cap)
    return _with_slots(cluster, ask, _best(-dot, idx, rng))


def packing(cluster: GpuCluster, ask: Ask, idx: np.ndarray, rng: np.random.Generator) -> Choice:
    if not ask.gpus:  # it packs GPUs only: a pod asking none may go anywhere
        return random_fit(cluster, ask, idx, rng)
    gpu = cluster.gpu[idx]
    whole = (gpu == MILLI).sum(axis=1)
    idle = whole == cluster.gpu_cap[idx]
    score = np.where(idle, 100 / 3 - whole, 50.0 - ask.gpus)  # an idle node last, the smallest first
    if ask.shares:  # a GPU in use with room for the share: best, the fullest first
        partial = np.where((gpu >= ask.milli) & (gpu < MILLI), gpu, MILLI + 1).min(axis=1)
        score = np.where(partial <= MILLI, 100 - partial / 100, score)
    return _with_slots(cluster, ask, _best(score, idx, rng))


class Clustering:
    """Pods of one GPU shape together. It remembers the shapes it placed on each node (nothing leaves
    in the replay)."""

    def __init__(self, asks: list[Ask]) -> None:
        self.shapes: dict[int, set[tuple[int, int]]] = {}

    def __call__(self, cluster: GpuCluster, ask: Ask, idx: np.ndarray, rng: np.random.Generator) -> Choice:
        if not ask.gpus:
            return random_fit(cluster, ask, idx, rng)
        shape = (ask.gpus, ask.milli)
        here = [self.shapes.get(int(i), set()) for i in idx]
        tier = np.array([3 if s == {shape} else 2 if shape in s else 1 if not s else 0 for s in here])
        used = 1 - _gpu_free(cluster, idx) / (max(1, int(cluster.gpu_cap.max())) * MILLI)
        node, slots = _with_slots(cluster, ask, _best(tier + used, idx, rng))
        self.shapes.setdefault(node, set()).add(shape)
        return node, slots


def best_fit(cluster: GpuCluster, ask: Ask, idx: np.ndarray, rng: np.random.Generator) -> Choice:
    cpu_max, gpu_max = cluster.cpu_cap.max(), max(1, int(cluster.gpu_cap.max())) * MILLI
    left = 0.5 * (cluster.cpu[idx] - ask.cpu) / cpu_max + \
        0.5 * (_gpu_free(cluster, idx) - ask.gpus * ask.milli) / gpu_max
    return _with_slots(cluster, ask, _best(-left, idx, rng))


def kube_default(cluster: GpuCluster, ask: Ask, idx: np.ndarray, rng: np.random.Generator) -> Choice:
    used = np.stack([(cluster.cpu_cap[idx] - cluster.cpu[idx] + ask.cpu) / cluster.cpu_cap[idx],
                     (cluster.mem_cap[idx] - cluster.mem[idx] + ask.memory) / cluster.mem_cap[idx]])
    score = (1 - used).mean(axis=0) + 1 - used.std(axis=0)  # LeastAllocated + BalancedAllocation
    return _with_slots(cluster, ask, _best(score, idx, rng))


def netsched_served(cluster: GpuCluster, ask: Ask, idx: np.ndarray, rng: np.random.Generator) -> Choice:
    if ask.gpus:
        tight = tightness(cluster.gpu_cap[idx], cluster.whole_free()[idx], ask.gpus)
        return _with_slots(cluster, ask, _best(tight, idx, None))
    used = np.stack([(cluster.cpu_cap[idx] - cluster.cpu[idx] + ask.cpu) / cluster.cpu_cap[idx],
                     (cluster.mem_cap[idx] - cluster.mem[idx] + ask.memory) / cluster.mem_cap[idx]])
    gpus_used = (cluster.gpu_cap[idx] - cluster.whole_free()[idx]) / np.maximum(cluster.gpu_cap[idx], 1)
    score = gpus_used + 1 - used.std(axis=0)  # MostAllocated over GPUs + BalancedAllocation
    return _with_slots(cluster, ask, _best(score, idx, rng))


class Fgd:
    """Fragmentation gradient descent over the pod shapes of `asks` (their distribution)."""

    def __init__(self, asks: list[Ask]) -> None:
        shapes = Counter((a.cpu, a.gpus, a.milli) for a in asks)
        total = sum(shapes.values())
        self.cpu = np.array([s[0] for s in shapes], dtype=np.int64)
        self.gpus = np.array([s[1] for s in shapes], dtype=np.int64)
        self.milli = np.array([s[2] for s in shapes], dtype=np.int64)
        self.weight = np.array([n / total for n in shapes.values()])

    def fragmentation(self, cpu: np.ndarray, gpu: np.ndarray) -> np.ndarray:
        """Expected free GPU share (milli) the workload could not use, per state (rows of cpu, gpu)."""
        free = np.where(gpu >= 0, gpu, 0)
        total = free.sum(axis=1)[:, None]
        whole = (gpu == MILLI).sum(axis=1)[:, None]
        shares = self.milli < MILLI
        gpu_fits = np.where(self.gpus == 0, True,
                            np.where(shares, (gpu[:, None, :] >= self.milli[None, :, None]).any(axis=2),
                                     whole >= self.gpus[None, :]))
        fits = (cpu[:, None] >= self.cpu[None, :]) & gpu_fits
        unusable = (free[:, None, :] * (free[:, None, :] < self.milli[None, :, None])).sum(axis=2)
        per_shape = np.where(fits, np.where(self.gpus == 0, 0, unusable), total)
        return np.asarray(per_shape @ self.weight)

    def __call__(self, cluster: GpuCluster, ask: Ask, idx: np.ndarray, rng: np.random.Generator) -> Choice:
        # nodes in the same state score the same: score each state once
        gpu = -np.sort(-cluster.gpu[idx], axis=1)
        states, which = np.unique(np.column_stack([cluster.cpu[idx], gpu]), axis=0, return_inverse=True)
        which = which.ravel()
        cpu, slots = states[:, 0], states[:, 1:]
        before = self.fragmentation(cpu, slots)
        options: list[tuple[int, int]] = []  # (state, the free share of the GPU it takes; -1 none)
        after_gpu = []
        for s, row in enumerate(slots):
            if ask.shares:
                for value in np.unique(row[row >= ask.milli]):
                    k = int(np.flatnonzero(row == value)[0])
                    new = row.copy()
                    new[k] -= ask.milli
                    options.append((s, int(value)))
                    after_gpu.append(new)
            else:
                new = row.copy()
                if ask.gpus:
                    new[np.flatnonzero(row == MILLI)[:ask.gpus]] = 0
                options.append((s, -1))
                after_gpu.append(new)
        states_of = np.array([s for s, _ in options])
        after = self.fragmentation(cpu[states_of] - ask.cpu, np.array(after_gpu))
        delta = after - before[states_of]
        best = np.flatnonzero(delta <= delta.min() + TOLERANCE)
        pick = best[rng.integers(len(best))] if len(best) > 1 else best[0]
        state, value = options[int(pick)]
        node = int(idx[rng.choice(np.flatnonzero(which == state))])
        if value < 0:
            return _with_slots(cluster, ask, node)
        return node, (int(np.flatnonzero(cluster.gpu[node] == value)[0]),)


POLICIES: dict[str, Callable[[list[Ask]], Chooser]] = {
    "Random": lambda asks: random_fit,
    "DotProd": lambda asks: dot_product,
    "Packing": lambda asks: packing,
    "Clustering": Clustering,
    "BestFit": lambda asks: best_fit,
    "FGD": Fgd,
    "kube default": lambda asks: kube_default,
}
