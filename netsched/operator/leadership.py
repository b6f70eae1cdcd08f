"""Which operator replica leads: one election through a coordination.k8s.io Lease, as kube-scheduler and
kube-controller-manager elect theirs, answering "do I lead now?" for every loop that must run once.

A replica takes the Lease when nobody holds it, or when the holder has not renewed it for the Lease's
`leaseDurationSeconds` as this replica's own clock counts from the last change it saw (clocks of
different machines are never compared). The holder renews it every `duration / 7.5` seconds and leads
only while its last renewal started less than `2/3 duration` ago: a leader paused or cut off stops
acting before anyone else may take over. A new replica never takes a Lease that is being renewed, so
the incumbent keeps leading through a rolling update until it stops; a replica that stops gracefully
gives the Lease up, and the next takes it within one retry. Writes carry the resourceVersion read,
so two replicas that try at once cannot both win.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from kubernetes import client

from netsched.api.connect import api_message, call

log = logging.getLogger(__name__)
RENEW_SHARE = 2 / 3  # of the lease duration: the leader stops acting this long after its last renewal began
RETRY_SHARE = 1 / 7.5  # of the lease duration: how often each replica reads (and the leader renews) the Lease


class Move(Enum):
    CREATE = "create"  # no Lease: make it, held by this replica
    RENEW = "renew"  # this replica holds it
    TAKE = "take"  # free, or its holder stopped renewing it
    WAIT = "wait"  # another replica holds it and renews it


@dataclass(frozen=True)
class LeaseView:
    holder: str  # "" when given up
    duration: float  # leaseDurationSeconds, as its holder wrote it
    version: str  # metadata.resourceVersion: changes with every renewal
    transitions: int = 0
    acquired: str | None = None  # spec.acquireTime

    @classmethod
    def of(cls, body: dict[str, Any]) -> LeaseView:
        spec = body.get("spec") or {}
        return cls(spec.get("holderIdentity") or "", float(spec.get("leaseDurationSeconds") or 0),
                   body["metadata"]["resourceVersion"], int(spec.get("leaseTransitions") or 0),
                   spec.get("acquireTime"))


def next_move(lease: LeaseView | None, me: str, unchanged_for: float) -> Move:
    """What a replica named `me` does with the Lease it read, which it has seen unchanged for
    `unchanged_for` seconds of its own clock."""
    if lease is None:
        return Move.CREATE
    if lease.holder == me:
        return Move.RENEW
    if not lease.holder or unchanged_for >= lease.duration:
        return Move.TAKE
    return Move.WAIT


def replica_identity() -> str:
    """This replica's name in the Lease: its pod (the chart passes POD_NAME) and process, unique on one
    machine too."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{os.getpid()}"


class Alone:
    """A single replica (no Lease): it always leads."""

    def leads(self) -> bool:
        return True

    def on_change(self, callback: Callable[[bool], None]) -> None:
        pass  # it never changes

    def start(self) -> None:
        pass

    def release(self) -> None:
        pass


class Election:
    """This replica's side of the election through Lease `namespace/name`; `leads()` is the answer the
    acting loops ask for."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str, duration: float = 15.0,
                 identity: str | None = None, clock: Callable[[], float] = time.monotonic,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)):
        self.api, self.namespace, self.name, self.duration = api, namespace, name, duration
        self.identity = identity or replica_identity()
        self.clock, self.now = clock, now
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self._renewed: float | None = None  # when the last renewal that succeeded began (clock)
        self._seen: tuple[str, float] | None = None  # (resourceVersion, when this replica first saw it)
        self._holder = ""  # as last read
        self._leading: bool | None = None  # as last told to the callbacks (None: not yet)
        self._callbacks: list[Callable[[bool], None]] = []
        self._stop = threading.Event()
        self._said: str | None = None  # the last failure logged

    @property
    def lease(self) -> str:
        return f"Lease {self.namespace}/{self.name}"

    def leads(self) -> bool:
        renewed = self._renewed
        return renewed is not None and self.clock() - renewed < RENEW_SHARE * self.duration

    def on_change(self, callback: Callable[[bool], None]) -> None:
        """Call `callback(leading)` after the first round and at each change (on the election's thread)."""
        self._callbacks.append(callback)

    def start(self) -> None:
        threading.Thread(target=self._loop, name="election", daemon=True).start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.round()
            self._stop.wait(RETRY_SHARE * self.duration)

    def round(self) -> None:
        """Read the Lease, take or renew it if this replica may, and tell the callbacks of a change."""
        began = self.clock()
        try:
            self._try(began)
        except (client.ApiException, OSError) as exc:  # the next round tries again; leads() runs out
            said = api_message(exc) if isinstance(exc, client.ApiException) else str(exc)
            if said != self._said:
                log.warning("leader election: %s: %s; trying again every %g s", self.lease, said,
                            RETRY_SHARE * self.duration)
            self._said = said
        else:
            self._said = None
        self._tell()

    def _try(self, began: float) -> None:
        try:
            lease = LeaseView.of(call(self.api, "GET", self.path, timeout=self.duration / 3))
        except client.ApiException as exc:
            if exc.status != 404:
                raise
            lease = None
        if lease is not None:
            self._holder = lease.holder
            if self._seen is None or self._seen[0] != lease.version:
                self._seen = (lease.version, began)
        unchanged_for = began - self._seen[1] if self._seen else 0.0
        move = next_move(lease, self.identity, unchanged_for)
        if move is Move.WAIT:
            self._renewed = None
            return
        body = self._body(lease, move)
        try:
            if lease is None:
                call(self.api, "POST", self.path.rsplit("/", 1)[0], body=body, timeout=self.duration / 3)
            else:
                call(self.api, "PUT", self.path, body=body, timeout=self.duration / 3)
        except client.ApiException as exc:
            if exc.status != 409:  # 409: another replica wrote first; it leads, this one waits
                raise
            self._renewed = None
            return
        self._renewed, self._holder = began, self.identity

    def _body(self, lease: LeaseView | None, move: Move) -> dict[str, Any]:
        stamp = self.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # MicroTime
        # as client-go counts them: each time a replica takes the Lease it did not hold
        transitions = 0 if lease is None else lease.transitions + (1 if move is Move.TAKE else 0)
        spec = {"holderIdentity": self.identity, "leaseDurationSeconds": max(1, round(self.duration)),
                "renewTime": stamp, "acquireTime": stamp if move is not Move.RENEW or lease is None
                else lease.acquired, "leaseTransitions": transitions}
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if lease is not None:
            metadata["resourceVersion"] = lease.version
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}

    def _tell(self) -> None:
        leading = self.leads()
        if leading == self._leading:
            return
        self._leading = leading
        if leading:
            why = "the acting loops run here"
        elif self._stop.is_set():
            why = "it is stopping"
        elif self._holder and self._holder != self.identity:
            why = f"{self._holder} leads"
        else:
            why = "it has not renewed the Lease in time"
        log.info("leader election (%s): this replica, %s, %s: %s", self.lease, self.identity,
                 "leads" if leading else "stands by", why)
        for callback in self._callbacks:
            callback(leading)

    def release(self) -> None:
        """Stop, and give the Lease up if this replica holds it, so the next takes it at once."""
        self._stop.set()
        held = self.leads()
        self._renewed = None  # the loops stop acting before the Lease is free
        self._tell()
        if not held:
            return
        try:
            lease = LeaseView.of(call(self.api, "GET", self.path, timeout=5))
            if lease.holder == self.identity:
                body = self._body(lease, Move.RENEW)
                body["spec"].update(holderIdentity=None, leaseDurationSeconds=1)
                call(self.api, "PUT", self.path, body=body, timeout=5)
                log.info("leader election: %s given up", self.lease)
        except (client.ApiException, OSError) as exc:
            log.warning("leader election: %s not given up (%s): the next replica takes it when it expires",
                        self.lease, api_message(exc) if isinstance(exc, client.ApiException) else exc)
