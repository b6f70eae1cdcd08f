"""Room held on a job's first node for its other replicas, derived from the watched pods.

When a job's first pod is bound, the room on its node that the job's other replicas still need (its
GPUs less those of its pods bound or assumed anywhere: a pod placed elsewhere awaits nothing more) is
*held* for them for `hold_ttl` seconds (or until they are all there): snapshots for other pods show those
GPUs as held, so scoring steers single pods and other jobs elsewhere
(netsched.extender.plugins.gang_hold). A hold never outlives its TTL, so no node is blocked for long
by a job that never sends its other replicas.

Every extender replica watches the same pods, so a hold is derived from them alone and is the same on
each replica: its node is that of the job's pod bound first, its end `hold_ttl` seconds after that
binding by the time the API server wrote on the pod (netsched.extender.read_model.bound_at), and the
job's size is read from its live pods' annotations, pending ones too
(netsched.extender.plugins.job_room.annotation.job_size; unknown, the hold is all the node's free
room). A replica that starts mid-hold lists the same pods and holds the same room until the same
moment, whatever order the pods arrive in.

A job none of whose pods the watch shows bound may still hold room on one replica: the one whose
filter sent its first pod to a single node assumed it there (netsched.extender.reservations), and
that assumption holds like a binding until the binding is watched.

Kept by the read model under its lock (netsched.extender.read_model).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from netsched.extender.reservations import Placement

HOLD_SECONDS = 15.0  # how long a job's first node keeps its room for the job's other replicas


@dataclass(frozen=True)
class Hold:
    """Room on a job's first node kept for its other replicas until `until`."""

    node: str
    until: float
    size: int | None  # GPUs of the whole job; None: unknown, hold all the node's free room


class JobPods:
    """Each job's bound pods and size, as the watched pods say, and the holds that follow from them."""

    def __init__(self, hold_ttl: float = HOLD_SECONDS):
        self.hold_ttl = hold_ttl
        self._bound: dict[str, dict[str, Placement]] = {}  # job -> pod uid -> placement of its bound pods
        self._nodes: dict[str, Counter[str]] = {}  # job -> nodes holding its bound pods, with counts
        self._sizes: dict[str, Counter[int]] = {}  # job -> the sizes its live pods give, with counts
        self._size_of: dict[str, tuple[str, int]] = {}  # pod uid -> its job and the size it gives
        self._first: dict[str, Placement] = {}  # job -> its pod bound first
        self._live: dict[str, Placement] = {}  # the same, for the jobs whose hold was not yet seen to end

    # ---- the watch path ---------------------------------------------------------
    def sized(self, uid: str, job: str | None, size: int | None) -> None:
        """Pod `uid` of `job` (live: pending or bound) says its job needs `size` GPUs; None for either:
        it says nothing (any more)."""
        old = self._size_of.pop(uid, None)
        if old is not None:
            sizes = self._sizes[old[0]]
            sizes[old[1]] -= 1
            if sizes[old[1]] <= 0:
                del sizes[old[1]]
            if not sizes:
                del self._sizes[old[0]]
        if job and size:
            self._size_of[uid] = (job, size)
            self._sizes.setdefault(job, Counter())[size] += 1

    def bind(self, uid: str, p: Placement) -> None:
        assert p.job is not None
        self._bound.setdefault(p.job, {})[uid] = p
        self._count(p.job, p, +1)
        first = self._first.get(p.job)
        if first is None or _order(p) < _order(first):
            self._hold_from(p.job, p)

    def unbind(self, uid: str, job: str) -> None:
        pods = self._bound.get(job, {})
        p = pods.pop(uid, None)
        if p is None:
            return
        self._count(job, p, -1)
        if not pods:
            del self._bound[job], self._first[job]
            self._live.pop(job, None)
        elif self._first[job] is p:  # the next one bound holds, from its own binding
            self._hold_from(job, min(pods.values(), key=_order))

    def _hold_from(self, job: str, first: Placement) -> None:
        self._first[job] = self._live[job] = first

    def _count(self, job: str, p: Placement, sign: int) -> None:
        nodes = self._nodes.setdefault(job, Counter())
        nodes[p.node] += sign
        if nodes[p.node] <= 0:
            del nodes[p.node]
        if not nodes:
            del self._nodes[job]

    # ---- read into a snapshot ---------------------------------------------------
    def nodes(self, job: str) -> Counter[str]:
        """Nodes holding the job's bound pods, with counts."""
        return self._nodes.get(job) or Counter()

    def gpus(self, job: str) -> int:
        """GPUs the job's bound pods hold, on every node."""
        return sum(p.gpus for p in self._bound.get(job, {}).values())

    def size(self, job: str) -> int | None:
        """GPUs of the whole job, the largest its live pods give (they agree unless edited by hand)."""
        sizes = self._sizes.get(job)
        return max(sizes) if sizes else None

    def holds(self, now: float, assumed: Iterable[Placement]) -> dict[str, Hold]:
        """Holds live at `now`: from each job's first bound pod, or, for a job none of whose pods is
        bound, from its first `assumed` placement (expired ones go)."""
        for job in [j for j, p in self._live.items() if p.since + self.hold_ttl < now]:
            del self._live[job]
        firsts = dict(self._live)
        unbound: dict[str, list[Placement]] = {}
        for p in assumed:
            if p.job and p.job not in self._bound:
                unbound.setdefault(p.job, []).append(p)
        for job, placements in unbound.items():
            first = min(placements, key=_order)
            if first.since + self.hold_ttl >= now:
                firsts[job] = first
        return {job: Hold(p.node, p.since + self.hold_ttl, self.size(job)) for job, p in firsts.items()}


def _order(p: Placement) -> tuple[float, str]:
    """Which of a job's placements came first: by time, then node (the same on every replica, whatever
    order the watch delivered them in)."""
    return p.since, p.node
