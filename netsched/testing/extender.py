"""Extender test tools: read models and requests built from the builders' nodes and pods, and one
request through the ASGI app as uvicorn would make it."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import orjson

from netsched.api.events import rfc3339
from netsched.api.topology import DEFAULT, Topology
from netsched.extender.access import Caller
from netsched.extender.plugin import Request
from netsched.extender.protocol import ExtenderArgs, parse_args
from netsched.extender.read_model import ReadModel
from netsched.extender.reservations import Placement
from netsched.telemetry.store import TelemetryStore
from netsched.testing.builders import CLUSTER, make_node, make_pod

__all__ = ["CLUSTER", "NAMES", "FakeReviewer", "args", "assume", "cache_of", "call", "node", "plugin_request",
           "pod"]

NAMES = [n["metadata"]["name"] for n in CLUSTER]
node = make_node
_uids = itertools.count()


def pod(name: str = "p", node_name: str | None = None, gpus: int = 2, job: str | None = None,
        ns: str = "ml", annotations: dict | None = None, phase: str = "Pending",
        bound_at: float | None = None) -> dict:
    """A pod as the watch delivers it, with a uid of its own even where a test reuses a name;
    `bound_at` (Unix seconds) is when the API server bound it (its PodScheduled condition)."""
    made = make_pod(name, node_name, namespace=ns, gpus=gpus, job=job, annotations=annotations, phase=phase,
                    uid=f"uid-{name}-{next(_uids)}")
    if bound_at is not None:
        at = rfc3339(datetime.fromtimestamp(bound_at, UTC))
        made["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": at}]
    return made


def cache_of(nodes: list[dict], pods: Sequence[dict] = (), clock: Callable[[], float] | None = None,
             plans: Sequence[dict] = (), **kwargs: Any) -> ReadModel:
    cache = ReadModel(clock=clock, **kwargs) if clock else ReadModel(**kwargs)
    cache.replace("nodes", nodes)
    cache.replace("pods", list(pods))
    cache.replace("packingplans", list(plans))
    return cache


def assume(cluster: ReadModel, uid: str, placement: Placement) -> None:
    """Record pod `uid` at `placement` as a filter's post-step does (holding the room of its node
    when it is its job's first pod)."""
    cluster.settle(uid, placement)


def plugin_request(annotations: dict | None = None, pods: Sequence[dict] = (), job: str | None = "train",
                   gpus: int = 2, nodes: list[dict] = CLUSTER, plans: Sequence[dict] = (),
                   telemetry: TelemetryStore | None = None, preempting: bool = False,
                   topology: Topology = DEFAULT) -> tuple[Request, np.ndarray, list[str]]:
    """What one plugin reads for pod ml/p (of `job`, with `annotations`) among every node of `nodes`
    with `pods` bound, placed by `topology`: the request, the candidates' table indices and their names."""
    cache = cache_of(nodes, pods, plans=plans, topology=topology)
    snap = cache.snapshot("ml", job, telemetry=telemetry or TelemetryStore())
    names = [n["metadata"]["name"] for n in nodes]
    ref = args(pod("p", job=job, gpus=gpus, annotations=annotations), names).pod
    return Request(ref, snap, preempting), snap.table.positions(names)[0], names


def args(p: dict, names: list[str]) -> ExtenderArgs:
    return parse_args({"Pod": p, "Nodes": None, "NodeNames": names})


def call(app: Callable, method: str, path: str, body: bytes = b"",
         token: str | None = None) -> tuple[int, object]:
    """One request through an ASGI app, as uvicorn would make it (with `token` as its bearer token);
    returns status and decoded body."""
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    headers = [(b"authorization", f"Bearer {token}".encode())] if token is not None else []
    asyncio.run(app({"type": "http", "method": method, "path": path, "headers": headers}, receive, send))
    status = sent[0]["status"]
    raw = sent[1]["body"]
    try:
        return status, orjson.loads(raw)
    except orjson.JSONDecodeError:
        return status, raw.decode()


@dataclass
class FakeReviewer:
    """The API server's answers to TokenReview and SubjectAccessReview, from tables: `tokens` (token ->
    user name), `paths` (user -> non-resource URLs it may get) and `pods` (user -> namespaces it may
    read pods in; "" for all). Counts the reviews asked, so tests see what the cache saves."""

    tokens: dict[str, str] = field(default_factory=dict)
    paths: dict[str, set[str]] = field(default_factory=dict)
    pods: dict[str, set[str]] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    def review_token(self, token: str) -> Caller | None:
        self.asked.append("token")
        name = self.tokens.get(token)
        return Caller(name, uid=f"uid-{name}", groups=("system:authenticated",)) if name else None

    def allowed(self, caller: Caller, attributes: dict[str, Any]) -> bool:
        self.asked.append(repr(attributes))
        if "nonResourceAttributes" in attributes:
            path = attributes["nonResourceAttributes"]["path"]  # RBAC's rule: a trailing * matches a prefix
            return any(path == rule or rule.endswith("*") and path.startswith(rule[:-1])
                       for rule in self.paths.get(caller.name, set()))
        namespaces = self.pods.get(caller.name, set())
        return "" in namespaces or attributes["resourceAttributes"]["namespace"] in namespaces
