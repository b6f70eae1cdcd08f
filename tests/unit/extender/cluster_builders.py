"""Plain Node and Pod dicts, as the watch delivers them, and caches and requests built from them."""

from __future__ import annotations

import asyncio
import itertools

import orjson

from netsched.api.labels import GPU_RESOURCE, JOB_LABEL
from netsched.devcluster.topology import GPUNode
from netsched.extender.cache import ClusterCache
from netsched.extender.protocol import ExtenderArgs, parse_args

_uids = itertools.count()


def node(name: str, zone: str = "zone-a", rack: str = "rack-a1", gpus: int = 8) -> dict:
    return GPUNode(name, zone, rack, "NVIDIA-H100-80GB-HBM3", gpus).manifest()


def pod(name: str = "p", node_name: str | None = None, gpus: int = 2, job: str | None = None,
        ns: str = "ml", annotations: dict | None = None, phase: str = "Pending") -> dict:
    labels = {JOB_LABEL: job} if job else {}
    spec: dict = {"schedulerName": "netsched",
                  "containers": [{"name": "c", "resources": {"limits": {GPU_RESOURCE: str(gpus)}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}-{next(_uids)}",
                         "labels": labels, "annotations": annotations or {}},
            "spec": spec, "status": {"phase": phase}}


def cache_of(nodes: list[dict], pods: list[dict] = (), clock=None, plans: list[dict] = (),
             **kwargs) -> ClusterCache:
    cache = ClusterCache(clock=clock, **kwargs) if clock else ClusterCache(**kwargs)
    cache.replace("nodes", nodes)
    cache.replace("pods", list(pods))
    cache.replace("packingplans", list(plans))
    return cache


def args(p: dict, names: list[str]) -> ExtenderArgs:
    return parse_args({"Pod": p, "Nodes": None, "NodeNames": names})


# a small two-zone cluster: rack-a1 (a1-0, a1-1), rack-a2 (a2-0), rack-b1 (b1-0)
CLUSTER = [node("a1-0"), node("a1-1"), node("a2-0", rack="rack-a2"), node("b1-0", "zone-b", "rack-b1")]
NAMES = [n["metadata"]["name"] for n in CLUSTER]


def call(app, method: str, path: str, body: bytes = b"") -> tuple[int, object]:
    """One request through an ASGI app, as uvicorn would make it; returns status and decoded body."""
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(app({"type": "http", "method": method, "path": path}, receive, send))
    status = sent[0]["status"]
    raw = sent[1]["body"]
    try:
        return status, orjson.loads(raw)
    except orjson.JSONDecodeError:
        return status, raw.decode()
