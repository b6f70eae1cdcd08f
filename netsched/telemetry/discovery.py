"""Whom an agent probes: peers given by hand, peers and their domains found in the cluster, and the
links placement will ask about (this node's gangs, their data, the PackingPlans that name it)."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

import urllib3
from kubernetes import client

from netsched.api import plans
from netsched.api.annotations import data_source_as_written
from netsched.api.connect import METADATA_ONLY, api_message, call
from netsched.api.labels import DATA_SOURCE, JOB_LABEL, whole_number
from netsched.api.pods import DONE, PodPhase
from netsched.api.topology import NODE
from netsched.telemetry.targets import Endpoint, Found

log = logging.getLogger(__name__)


class BadTarget(ValueError):
    pass


def parse_endpoint(text: str, flag: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    number = whole_number(port)
    if not sep or not host or number is None or not 0 < number < 65536:
        raise BadTarget(f"{flag} {text!r}: expected HOST:PORT, e.g. 10.0.0.7:9102")
    return host, number


def static_targets(peers: list[str], data: list[str]) -> dict[str, tuple[str, int]]:
    """`--peer NODE=HOST:PORT` and `--data HOST:PORT` flags. A data endpoint is named by its
    HOST:PORT, the same string a pod's `netsched.io/data-source: endpoint:HOST:PORT` names."""
    out = {}
    for item in peers:
        name, sep, endpoint = item.partition("=")
        if not sep or not name:
            raise BadTarget(f"--peer {item!r}: expected NODE=HOST:PORT, e.g. gpu-a1-0=10.0.0.7:9102")
        out[name] = parse_endpoint(endpoint, "--peer")
    for item in data:
        out[item] = parse_endpoint(item, "--data")
    return out


def with_static(found: Callable[[], Found] | None, peers: dict[str, Endpoint],
                data: list[str]) -> Callable[[], Found]:
    """Discovery's findings plus the `--peer` and `--data` flags; a data endpoint given by hand is
    demand: someone means to read from it."""
    static = frozenset(data)

    def targets() -> Found:
        got = found() if found else Found({})
        return Found({**got.endpoints, **peers}, got.labels, got.demand | static)
    return targets


class ClusterDiscovery:
    """What an agent probes, from the API, cheap enough for thousands of agents: every list is read
    with resourceVersion=0 (the API server answers from its watch cache, not etcd), and on an error
    the last answer is kept (the agent probes what it knew).

    - peers, every `peer_refresh` s (x1..1.5 jitter): the running agent pods matching `selector` in
      `namespace` (where each answers probes) and the nodes (the topology labels of theirs);
    - demand, every `refresh` s (x1..1.5 jitter): the pods on this node (fieldSelector
      spec.nodeName), for each gang among them its members' nodes (labelSelector netsched.io/job),
      the node or endpoint their `netsched.io/data-source` names, and the other nodes of the active
      PackingPlans that place a pod on this node."""

    def __init__(self, api: client.ApiClient, namespace: str, selector: str, probe_port: int, node: str,
                 refresh: float = 60.0, peer_refresh: float = 300.0,
                 clock: Callable[[], float] = time.monotonic, jitter: Callable[[], float] = random.random):
        self.api, self.namespace, self.selector, self.probe_port, self.node = api, namespace, selector, \
            probe_port, node
        self.refresh, self.peer_refresh, self.clock, self.jitter = refresh, peer_refresh, clock, jitter
        self._peers: dict[str, Endpoint] = {}
        self._labels: Mapping[str, Mapping[str, str]] = {}
        self._demand: frozenset[str] = frozenset()
        self._data: dict[str, Endpoint] = {}
        self._next_peers = self._next_demand = -float("inf")

    def __call__(self) -> Found:
        now = self.clock()
        if now >= self._next_peers and self._read("peers", self._read_peers):
            self._next_peers = now + self.peer_refresh * (1 + self.jitter() / 2)
        if now >= self._next_demand and self._read("demand", self._read_demand):
            self._next_demand = now + self.refresh * (1 + self.jitter() / 2)
        return Found({**self._data, **self._peers}, self._labels, self._demand)

    def _read(self, what: str, read: Callable[[], None]) -> bool:
        try:
            read()
            return True
        except (client.ApiException, OSError, urllib3.exceptions.HTTPError) as exc:
            message = api_message(exc) if isinstance(exc, client.ApiException) else str(exc)
            log.warning("agent discovery: listing %s failed (%s); keeping the last list", what, message)
            return False

    def _list(self, path: str, accept: str = "application/json", **query: str) -> list[dict[str, Any]]:
        answer = call(self.api, "GET", path, [*query.items(), ("resourceVersion", "0")],  # the watch cache
                      accept=accept)
        found: list[dict[str, Any]] = answer["items"]
        return found

    def _read_peers(self) -> None:
        pods = self._list(f"/api/v1/namespaces/{self.namespace}/pods", labelSelector=self.selector)
        nodes = self._list("/api/v1/nodes", METADATA_ONLY)  # labels only: a node's status is most of it
        running = [p for p in pods if p.get("status", {}).get("phase") == PodPhase.RUNNING
                   and p["status"].get("podIP") and p.get("spec", {}).get("nodeName")]
        agents = {p["spec"]["nodeName"]: (p["status"]["podIP"], self.probe_port) for p in running}
        self._peers = {name: at for name, at in agents.items() if name != self.node}
        self._labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in nodes
                        if n["metadata"]["name"] in agents or n["metadata"]["name"] == self.node}

    def _read_demand(self) -> None:
        pods = [p for p in self._list("/api/v1/pods", fieldSelector=f"spec.nodeName={self.node}")
                if p.get("status", {}).get("phase") not in DONE]
        wanted: set[str] = set()
        data: dict[str, Endpoint] = {}
        gangs = sorted({(p["metadata"]["namespace"], (p["metadata"].get("labels") or {})[JOB_LABEL])
                        for p in pods if JOB_LABEL in (p["metadata"].get("labels") or {})})
        for namespace, job in gangs:
            members = self._list(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"{JOB_LABEL}={job}")
            wanted |= {m["spec"]["nodeName"] for m in members if (m.get("spec") or {}).get("nodeName")}
        for pod in pods:
            kind, where = data_source_as_written(pod["metadata"].get("annotations") or {}) or ("", "")
            if kind == NODE and where:
                wanted.add(where)
            elif kind == "endpoint":
                try:
                    data[where] = parse_endpoint(where, DATA_SOURCE)
                except BadTarget as exc:  # the extender refuses such a pod; nothing to probe here
                    log.info("pod %s/%s: %s", pod["metadata"]["namespace"], pod["metadata"]["name"], exc)
                    continue
                wanted.add(where)
        for plan in self._list(f"/apis/{plans.GROUP}/{plans.VERSION}/{plans.PLURAL}"):
            if plans.is_active(plan):
                nodes = {a.node for a in plans.arrivals(plan)}
                if self.node in nodes:
                    wanted |= nodes
        wanted.discard(self.node)
        self._demand, self._data = frozenset(wanted), data
