"""Whom an agent probes: peers given by hand, peers found in the cluster, and data endpoints."""

from __future__ import annotations

import logging
import time

from kubernetes import client

from netsched.api.labels import whole_number
from netsched.api.pods import PodPhase

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


class PodDiscovery:
    """The other agents, from the API: running pods matching `selector` in `namespace`, by node.
    Listed at most every `refresh` seconds; on an API error the last list is kept."""

    def __init__(self, api: client.ApiClient, namespace: str, selector: str, probe_port: int, node: str,
                 refresh: float = 60.0):
        self.core = client.CoreV1Api(api)
        self.namespace, self.selector, self.probe_port, self.node = namespace, selector, probe_port, node
        self.refresh = refresh
        self._peers: dict[str, tuple[str, int]] = {}
        self._listed = -float("inf")

    def __call__(self) -> dict[str, tuple[str, int]]:
        if time.monotonic() - self._listed >= self.refresh:
            try:
                pods = self.core.list_namespaced_pod(self.namespace, label_selector=self.selector).items
            except client.ApiException as exc:
                log.warning("peer discovery failed (%s %s); keeping %d known peers", exc.status, exc.reason,
                            len(self._peers))
                return self._peers
            running = [p for p in pods if p.status.phase == PodPhase.RUNNING and p.status.pod_ip]
            self._peers = {p.spec.node_name: (p.status.pod_ip, self.probe_port) for p in running
                           if p.spec.node_name != self.node}
            self._listed = time.monotonic()
        return self._peers
