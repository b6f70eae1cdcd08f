"""The extender's reservations ledger: what the request path adds to the watched cluster.

When the filter hands kube-scheduler exactly one node, the extender *assumes* the pod lands there
(as kube-scheduler's own cache does) until the watch confirms the binding or `assume_ttl` passes,
so the next replica of a job, scheduled milliseconds later, already sees its peer. An assumption is
the one thing a replica knows that the others do not (it made the filter's answer); the room held
for a job's other replicas follows from its first placement, assumed or bound
(netsched.extender.holds).

Written by a filter's post-step (`settle`) and by the read model as the watch reports pods
(netsched.extender.read_model, which reads it into each snapshot); every method takes the ledger's
own lock, after the read model's where both are held.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Placement:
    """A pod bound (or assumed bound) to a node, with what it requests."""

    job: str | None  # "<namespace>/<job>" or None
    node: str
    gpus: int
    cpu: float = 0.0  # cores
    memory: float = 0.0  # bytes
    since: float = 0.0  # when it was bound (or assumed), on the read model's clock


@dataclass(frozen=True)
class Reserved:
    """The ledger as one snapshot reads it: live assumed placements."""

    assumed: tuple[Placement, ...]

    def of_job(self, job: str) -> Iterable[Placement]:
        return (p for p in self.assumed if p.job == job)


class Reservations:
    def __init__(self, clock: Callable[[], float] = time.monotonic, assume_ttl: float = 30.0):
        self.clock = clock
        self.assume_ttl = assume_ttl
        self._lock = threading.Lock()
        self._assumed: dict[str, tuple[Placement, float]] = {}  # pod uid -> placement, when to forget it

    # ---- the request path: a filter's post-step ---------------------------------
    def settle(self, uid: str, placement: Placement | None) -> None:
        """After a filter of pod `uid`: assumed at `placement` from now, or, with none, no longer
        assumed anywhere (kube-scheduler did not bind it where an earlier filter put it)."""
        with self._lock:
            self._assumed.pop(uid, None)
            if placement is not None:
                now = self.clock()
                self._assumed[uid] = (replace(placement, since=now), now + self.assume_ttl)

    # ---- the watch path (the read model, holding its lock) ----------------------
    def is_assumed(self, uid: str) -> bool:
        with self._lock:
            return uid in self._assumed

    def forget(self, uid: str) -> Placement | None:
        """The watch knows better now (the pod is bound, gone or done): its assumption ends."""
        with self._lock:
            found = self._assumed.pop(uid, None)
        return None if found is None else found[0]

    # ---- read into a snapshot ---------------------------------------------------
    def reserved(self, now: float, leave_out: Collection[str] = ()) -> Reserved:
        """What is live at `now` (expired entries go), without the own assumptions of the pods `leave_out`
        (uids): a pod being filtered again, or a gang placed again (its release was cut short), must not
        count its GPUs against the nodes it is choosing among."""
        with self._lock:
            for uid in [u for u, (_, expiry) in self._assumed.items() if expiry < now]:
                del self._assumed[uid]
            return Reserved(tuple(p for uid, (p, _) in self._assumed.items() if uid not in leave_out))


def count_by_node(placements: Iterable[Placement]) -> tuple[Counter[str], Counter[str]]:
    """Pods and GPUs per node of these placements."""
    pods: Counter[str] = Counter()
    gpus: Counter[str] = Counter()
    for p in placements:
        pods[p.node] += 1
        gpus[p.node] += p.gpus
    return pods, gpus
