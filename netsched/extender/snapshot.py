"""An immutable view of the cluster that one extender request reads from start to end.

Background watchers (to come) build a new snapshot when Nodes or Pods change; a
request never waits on I/O. `taken_at` lets the extender refuse a snapshot older
than its bound instead of trusting stale data silently.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class NodeInfo:
    name: str
    zone: str | None
    rack: str | None
    gpu_model: str | None
    gpus_allocatable: int
    gpus_free: int


@dataclass(frozen=True)
class ClusterSnapshot:
    nodes: dict[str, NodeInfo]
    # "<namespace>/<job>" -> nodes already holding (or bound for) that job's pods, one entry per pod
    job_placements: dict[str, tuple[str, ...]] = field(default_factory=dict)
    taken_at: float = field(default_factory=time.monotonic)

    def age(self, now: float | None = None) -> float:
        return (time.monotonic() if now is None else now) - self.taken_at

    def peers(self, namespace: str, job: str | None) -> tuple[str, ...]:
        if job is None:
            return ()
        return self.job_placements.get(f"{namespace}/{job}", ())
