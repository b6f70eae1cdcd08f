"""The Helm chart installed on a dev-cluster's real node (tests/e2e): commands run on the host, the
release's pods by component, their logs and metrics read on the node, and their containers killed
there as a crash or an OOM kill would end them."""

from __future__ import annotations

import ssl
import subprocess
import time
import urllib.request
from pathlib import Path

from kubernetes import client

from netsched.devcluster.binaries import ensure_binaries
from netsched.devcluster.devcluster import DevCluster
from netsched.devcluster.nodenet import in_netns
from netsched.devcluster.realnode import RealNode

RELEASE, NAMESPACE = "netsched", "netsched-system"
SCHEDULER_NAME = "netsched-chart"  # tests/e2e/values.yaml: the dev-cluster's own scheduler has `netsched`
COMPONENT = "app.kubernetes.io/component"


def timed(what: str, since: float) -> float:
    """Prints how long `what` took since `since` (a monotonic time) as an `[e2e]` line; returns now."""
    now = time.monotonic()
    print(f"[e2e] {what}: {now - since:.1f} s", flush=True)
    return now


def sh(*argv: str | Path) -> str:
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True)
    command = " ".join(map(str, argv))
    assert proc.returncode == 0, f"{command} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def helm(cluster: DevCluster, *args: str | Path) -> str:
    return sh(ensure_binaries(quiet=True) / "helm", "--kubeconfig", cluster.kubeconfig, *args)


def kubectl(cluster: DevCluster, *args: str | Path) -> str:
    return sh(ensure_binaries(quiet=True) / "kubectl", "--kubeconfig", cluster.kubeconfig, *args)


def component_pods(core: client.CoreV1Api, component: str) -> list[client.V1Pod]:
    """The component's pods that are not on their way out."""
    pods = core.list_namespaced_pod(NAMESPACE, label_selector=f"{COMPONENT}={component}").items
    return [p for p in pods if not p.metadata.deletion_timestamp]


def all_pods_ready(core: client.CoreV1Api, expected: dict[str, int]) -> bool:
    """Exactly `expected` pods per component in the namespace, each Ready."""
    pods = core.list_namespaced_pod(NAMESPACE).items
    counts: dict[str, int] = {}
    for pod in pods:
        statuses = pod.status.container_statuses or []
        if pod.metadata.deletion_timestamp or not statuses or not all(s.ready for s in statuses):
            return False
        component = pod.metadata.labels.get(COMPONENT)
        counts[component] = counts.get(component, 0) + 1
    return counts == expected


def real_node(cluster: DevCluster) -> RealNode:
    """The cluster's real node, to reach its network namespace and containerd (no binary needed)."""
    return RealNode(cluster.directory / "node", Path())


def scrape(cluster: DevCluster, pod: client.V1Pod, port: int, https: bool = False,
           token: str | None = None) -> str:
    """A pod's /metrics, read from the node's network namespace where pod IPs answer, with `token` as
    bearer token (the extender's metrics port wants one). The extender's certificate is for its
    Service's names, not pod IPs: not verified here."""
    context = ssl._create_unverified_context() if https else None
    request = urllib.request.Request(f"{'https' if https else 'http'}://{pod.status.pod_ip}:{port}/metrics")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with in_netns(real_node(cluster).netns):
        return urllib.request.urlopen(request, timeout=5, context=context).read().decode()


def metric_sum(exposition: str, name: str, **labels: str) -> float:
    """The sum of the samples of `name` whose labels include `labels`, in a Prometheus exposition."""
    total = 0.0
    wanted = [f'{k}="{v}"' for k, v in labels.items()]
    for line in exposition.splitlines():
        series, _, value = line.rpartition(" ")
        if (series == name or series.startswith(name + "{")) and all(w in series for w in wanted):
            total += float(value)
    return total


def kill_container(cluster: DevCluster, pod: client.V1Pod) -> str:
    """SIGKILLs the pod's one container on the real node through its containerd (no chance to clean
    up: no Lease released, no connection closed in order); the kubelet then restarts it. Returns the
    killed container's id."""
    [status] = pod.status.container_statuses
    container = status.container_id.split("://", 1)[1]
    real_node(cluster).ctr("tasks", "kill", "--signal", "SIGKILL", container)
    return container
