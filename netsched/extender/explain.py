"""Why a pod went where it went: the extender's last decision per pod, and pod events.

Requests only append a small record (top candidates with their scores and factors)
to a bounded log. When the pod watch later shows the pod bound, the decision is
queued and a background thread writes one Event on the pod (reason
NetworkPlacement), so `kubectl describe pod` says why without slowing requests.
The full record is on the extender's /debug/decisions endpoint.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from netsched.api.events import event
from netsched.api.objects import KubeObject

log = logging.getLogger(__name__)
EVENT_REASON = "NetworkPlacement"
COMPONENT = "netsched-extender"


@dataclass(frozen=True)
class Candidate:
    node: str
    score: int
    factors: dict[str, float]
    links: list[str] = field(default_factory=list)  # the links its score read, and where each value came from


PINNED = "pinned"  # the scorer of a pod whose node its gang's placement chose (netsched.extender.gang)


@dataclass
class Decision:
    namespace: str
    pod: str
    uid: str
    job: str | None
    scorer: str
    candidates: int
    rejected: dict[str, str]  # a few example reasons, node -> why
    rejected_count: int
    top: list[Candidate]
    at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="milliseconds"))
    node: str | None = None  # where the pod was bound, once the watch saw it
    room: str = ""  # a job's first pod: how many candidates had room for the whole job, in words

    def summary(self) -> str:
        chosen = next((c for c in self.top if c.node == self.node), None)
        head = f"netsched placed the pod on {self.node}"
        if self.scorer == PINNED:
            head += " with its gang: its node was decided when the gang was released, chosen for every member"
            return "; ".join([head, *([self.room] if self.room else [])])
        if chosen:
            head += f" (score {chosen.score}/10: {_factors(chosen.factors)})"
            if chosen.links:
                head += "; " + "; ".join(chosen.links)
        others = [f"{c.node} ({c.score})" for c in self.top if c.node != self.node][:3]
        parts = [head, f"{self.candidates} candidates"]
        if others:
            parts.append("next best " + ", ".join(others))
        if self.room:
            parts.append(self.room)
        if self.rejected_count:
            parts.append(f"{self.rejected_count} rejected, e.g. {next(iter(self.rejected.values()))}")
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _factors(factors: dict[str, float]) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {v:.2f}" for k, v in factors.items())


class DecisionLog:
    """The latest decision per pod uid, bounded; thread-safe."""

    def __init__(self, size: int = 10_000):
        self.size = size
        self._by_uid: OrderedDict[str, Decision] = OrderedDict()
        self._lock = threading.Lock()

    def record(self, decision: Decision) -> None:
        with self._lock:
            self._by_uid[decision.uid] = decision
            self._by_uid.move_to_end(decision.uid)
            while len(self._by_uid) > self.size:
                self._by_uid.popitem(last=False)

    def bound(self, uid: str, node: str) -> Decision | None:
        """Note that the pod was bound; returns its decision the first time only."""
        with self._lock:
            decision = self._by_uid.get(uid)
            if decision is None or decision.node is not None:
                return None
            decision.node = node
            return decision

    def find(self, namespace: str, name: str) -> Decision | None:
        with self._lock:
            return next((d for d in reversed(self._by_uid.values())
                         if d.namespace == namespace and d.pod == name), None)

    def recent(self, n: int = 50) -> list[Decision]:
        with self._lock:
            return list(self._by_uid.values())[-n:]


# Threads writing explanations. A write waits tens of milliseconds on a busy API server, so a burst
# of bindings needs many in flight: with 4, a burst of 1,000 bindings at 1,000 nodes (about 100 a
# second) left explanations 6.1 s (p50) behind their pods, 5.9 s of it queued in the writer; with 16,
# 0.95 s (docs/benchmarks.md, "Extender throughput").
WRITERS = 16


class EventWriter:
    """Writes explanation events from a queue on `writers` threads; drops them when the queue is full.
    The answer is read, never decoded into the client's model classes: decoding every created Event
    on one thread left explanations 12 s (p50) to 21 s (p95) behind in the same burst."""

    def __init__(self, api: client.ApiClient, on_outcome: Callable[[str], object] = lambda outcome: None,
                 capacity: int = 10_000, writers: int = WRITERS,
                 on_written: Callable[[float], object] = lambda seconds: None):
        self.core = client.CoreV1Api(api)
        self.on_outcome, self.on_written = on_outcome, on_written
        self.queue: queue.Queue[tuple[float, Decision]] = queue.Queue(capacity)
        for i in range(writers):
            threading.Thread(target=self._run, name=f"explain-events-{i}", daemon=True).start()

    def submit(self, decision: Decision) -> None:
        try:
            self.queue.put_nowait((time.monotonic(), decision))
        except queue.Full:
            self.on_outcome("dropped")

    def _run(self) -> None:
        while True:
            submitted, decision = self.queue.get()
            try:
                answer = self.core.create_namespaced_event(decision.namespace, self._event(decision),
                                                           _preload_content=False)
                answer.read()  # read, never decoded: the connection goes back to the pool clean
                answer.release_conn()
                self.on_outcome("written")
                self.on_written(time.monotonic() - submitted)
            except Exception as exc:  # the pod may be gone; an explanation is never worth a crash
                log.info("could not write the placement event for %s/%s: %s",
                         decision.namespace, decision.pod, exc)
                self.on_outcome("failed")

    @staticmethod
    def _event(d: Decision) -> KubeObject:
        pod = {"apiVersion": "v1", "kind": "Pod", "namespace": d.namespace, "name": d.pod, "uid": d.uid}
        return event(pod, EVENT_REASON, d.summary(), COMPONENT)
