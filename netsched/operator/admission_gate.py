"""Gang admission across the operator's loops: one gang admitted at a time, GPUJob or pod gang, and the
room of a released GPUJob gang reserved until its pods show up as pending in the ClusterIndex, so two
gangs never count on the same GPUs. The manager makes one and gives it to both controllers."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from types import TracebackType

from netsched.api.pods import DONE
from netsched.api.resources import Resources, add_usage
from netsched.operator.cluster_index import Indices, JobKey

RESERVATION_SECONDS = 15.0


class AdmissionGate:
    """`with gate:` admits one gang; `reserve` and `reserved` are used under it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # a released gang's room until its pods show up as pending: (expiry, request per pod, the node
        # each pod was pinned to by name)
        self._reserved: dict[JobKey, tuple[float, Resources, Mapping[str, str]]] = {}

    def __enter__(self) -> AdmissionGate:
        self._lock.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._lock.release()

    def reserve(self, key: JobKey, request: Resources, nodes: Mapping[str, str] | None = None) -> None:
        """The gang of job `key` was just released: each of its gated pods holds `request` (on the node
        `nodes` pinned it to, by pod name, if it was) until it shows up as pending, or
        RESERVATION_SECONDS pass."""
        self._reserved[key] = (time.monotonic() + RESERVATION_SECONDS, request, dict(nodes or {}))

    def reserved(self, indices: Indices, but: JobKey | None = None) -> tuple[dict[str, Resources],
                                                                             list[Resources]]:
        """The room of pods of gangs released but shown gated by the index still (in neither `used`,
        `pinned` nor `pending` yet), but those of the job `but`: per node for the pinned ones, and the
        requests of the others."""
        pinned: dict[str, Resources] = {}
        loose: list[Resources] = []
        for key, (expiry, req, nodes) in list(self._reserved.items()):
            waiting = [p.name for p in indices.pods_of(key) if p.gated and p.phase not in DONE]
            if not waiting or expiry < time.monotonic():
                del self._reserved[key]
            elif key != but:
                loose += [req for name in waiting if name not in nodes]
                pinned = add_usage(pinned, *({nodes[name]: req} for name in waiting if name in nodes))
        return pinned, loose
