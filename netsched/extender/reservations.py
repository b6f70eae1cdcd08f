"""The extender's reservations ledger: what the request path adds to the watched cluster.

When the filter hands kube-scheduler exactly one node, the extender *assumes* the pod lands there
(as kube-scheduler's own cache does) until the watch confirms the binding or `assume_ttl` passes,
so the next replica of a job, scheduled milliseconds later, already sees its peer.

When a job's first pod is placed (assumed or bound), the rest of the room on its node is *held*
for the job's other replicas for `hold_ttl` seconds (or until they are all there): snapshots for
other pods show those GPUs as held, so scoring steers single pods and other jobs elsewhere
(netsched.extender.plugins.gang_hold). The job's size comes from its pods' annotations
(netsched.extender.plugins.job_room.annotation.job_size); unknown, the hold is all the node's free
room. A hold never outlives its TTL, so no node is blocked for long by a job that never sends its
other replicas.

Written by a filter's post-step (`settle`) and by the read model as the watch reports pods
(netsched.extender.read_model, which reads it into each snapshot); every method takes the ledger's
own lock, after the read model's where both are held.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

HOLD_SECONDS = 15.0  # how long a job's first node keeps its room for the job's other replicas
JOB_SIZES = 10_000  # jobs whose size the ledger remembers (the newest)


@dataclass(frozen=True)
class Placement:
    """A pod bound (or assumed bound) to a node, with what it requests."""

    job: str | None  # "<namespace>/<job>" or None
    node: str
    gpus: int
    cpu: float = 0.0  # cores
    memory: float = 0.0  # bytes


@dataclass
class Hold:
    """Room on a job's first node kept for its other replicas until `until`."""

    node: str
    until: float
    size: int | None  # GPUs of the whole job; None: unknown, hold all the node's free room


@dataclass(frozen=True)
class Reserved:
    """The ledger as one snapshot reads it: live assumed placements and holds."""

    assumed: tuple[Placement, ...]
    holds: dict[str, Hold]

    def of_job(self, job: str) -> Iterable[Placement]:
        return (p for p in self.assumed if p.job == job)


class Reservations:
    def __init__(self, clock: Callable[[], float] = time.monotonic, assume_ttl: float = 30.0,
                 hold_ttl: float = HOLD_SECONDS):
        self.clock = clock
        self.assume_ttl = assume_ttl
        self.hold_ttl = hold_ttl
        self._lock = threading.Lock()
        self._assumed: dict[str, tuple[Placement, float]] = {}  # pod uid -> placement, when to forget it
        self._holds: dict[str, Hold] = {}  # job -> room held on its first node
        self._sizes: OrderedDict[str, int] = OrderedDict()  # job -> GPUs of the whole job, from its pods

    # ---- the request path: a filter's post-step ---------------------------------
    def settle(self, uid: str, placement: Placement | None, first_of_job: bool = False) -> None:
        """After a filter of pod `uid`: assumed at `placement` (holding the room of its node when it is
        its job's first pod), or, with none, no longer assumed anywhere (kube-scheduler did not bind
        it where an earlier filter put it)."""
        with self._lock:
            self._assumed.pop(uid, None)
            if placement is None:
                return
            if first_of_job and placement.job:
                self._hold(placement)
            self._assumed[uid] = (placement, self.clock() + self.assume_ttl)

    # ---- the watch path (the read model, holding its lock) ----------------------
    def learn_size(self, job: str, size: int) -> None:
        with self._lock:
            self._sizes[job] = size
            self._sizes.move_to_end(job)
            while len(self._sizes) > JOB_SIZES:
                self._sizes.popitem(last=False)

    def is_assumed(self, uid: str) -> bool:
        with self._lock:
            return uid in self._assumed

    def has_job(self, job: str) -> bool:
        with self._lock:
            return any(p.job == job for p, _ in self._assumed.values())

    def forget(self, uid: str) -> Placement | None:
        """The watch knows better now (the pod is bound, gone or done): its assumption ends."""
        with self._lock:
            found = self._assumed.pop(uid, None)
        return None if found is None else found[0]

    def hold(self, placement: Placement) -> None:
        with self._lock:
            self._hold(placement)

    def release(self, job: str) -> None:
        """No pod of the job is left to send its other replicas."""
        with self._lock:
            self._holds.pop(job, None)

    def _hold(self, p: Placement) -> None:
        assert p.job is not None
        self._holds[p.job] = Hold(p.node, self.clock() + self.hold_ttl, self._sizes.get(p.job))

    # ---- read into a snapshot ---------------------------------------------------
    def reserved(self, now: float, leave_out: str = "") -> Reserved:
        """What is live at `now` (expired entries go), without pod `leave_out`'s own assumption: a pod
        being filtered again must not count its GPUs against the nodes it is choosing among."""
        with self._lock:
            for uid in [u for u, (_, expiry) in self._assumed.items() if expiry < now]:
                del self._assumed[uid]
            for job in [j for j, hold in self._holds.items() if hold.until < now]:
                del self._holds[job]
            return Reserved(tuple(p for uid, (p, _) in self._assumed.items() if uid != leave_out),
                            dict(self._holds))


def count_by_node(placements: Iterable[Placement]) -> tuple[Counter[str], Counter[str]]:
    """Pods and GPUs per node of these placements."""
    pods: Counter[str] = Counter()
    gpus: Counter[str] = Counter()
    for p in placements:
        pods[p.node] += 1
        gpus[p.node] += p.gpus
    return pods, gpus
