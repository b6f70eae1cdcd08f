"""Real clusters for tests: a dev-cluster that is up for a test session or module, and a namespace
of one's own on it, made ready, then deleted with its pods."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from kubernetes import client

from netsched.api.labels import GPU_RESOURCE
from netsched.devcluster.devcluster import DevCluster
from netsched.devcluster.processes import pid_alive
from netsched.devcluster.wait import poll


@contextmanager
def running(cluster: DevCluster) -> Iterator[DevCluster]:
    """The cluster up while inside; afterwards down, with no process of it left."""
    cluster.up()
    try:
        yield cluster
    finally:
        cluster.down(quiet=True)
    assert not cluster.running_components(), "dev-cluster processes survived `down`"


@contextmanager
def scratch_namespace(core: client.CoreV1Api, prefix: str = "t") -> Iterator[str]:
    """A fresh namespace, usable once its default ServiceAccount exists (pods are refused before);
    afterwards deleted, and waited for until its pods are gone, so their GPUs are free for the next."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    poll(lambda: core.read_namespaced_service_account("default", name), 60,
         f"the default ServiceAccount in {name}")
    try:
        yield name
    finally:
        core.delete_namespace(name)
        poll(lambda: not core.list_namespaced_pod(name).items, 120, f"the pods of {name} to go")


def free_gpus(core: client.CoreV1Api) -> dict[str, int]:
    """Node -> GPUs no live pod holds (their limits), as kube-scheduler counts them."""
    free = {n.metadata.name: int(n.status.allocatable[GPU_RESOURCE]) for n in core.list_node().items}
    for p in core.list_pod_for_all_namespaces().items:
        if p.spec.node_name in free and p.status.phase not in ("Succeeded", "Failed"):
            free[p.spec.node_name] -= sum(int((c.resources.limits or {}).get(GPU_RESOURCE, 0))
                                          for c in p.spec.containers)
    return free


def kill(cluster: DevCluster, component: str) -> None:
    """SIGKILL one of the cluster's components (no chance to clean up), and wait until it is gone."""
    pid = cluster.status()["components"][component]["pid"]
    os.kill(pid, signal.SIGKILL)
    poll(lambda: not pid_alive(pid), 30, f"{component} to die")
