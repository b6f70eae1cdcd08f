"""Several `netsched operator` replicas on one dev-cluster (started with run_operator=False), electing
their leader through a Lease as the chart's replicas do: the operator's RBAC and the Lease's, the Lease
made beforehand (the chart makes it; a replica may only read and renew it), one webhook certificate
for all, each replica on ports of its own, its /metrics, its admission answers and its log."""

from __future__ import annotations

import base64
import functools
import json
import os
import signal
import ssl
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from netsched.devcluster import pki as pkilib
from netsched.devcluster import processes
from netsched.devcluster.devcluster import OPERATOR, DevCluster
from netsched.devcluster.rbac import OPERATOR_ROLE, OPERATOR_RULES, grant
from netsched.devcluster.wait import poll
from netsched.operator.webhook.configurations import HANDLER_ID

LEASE_NAMESPACE = "default"


@dataclass
class Replica:
    name: str  # r0, r1, ...
    process: processes.Process
    metrics_port: int
    webhook_port: int
    ca: Path  # trusts the webhook's certificate

    @property
    def identity(self) -> str:
        """Its holder name in the Lease (netsched.operator.leadership.replica_identity)."""
        return f"{os.uname().nodename}_{self.process.pid}"

    def metric(self, name: str) -> float | None:
        """The value of a sample of /metrics whose name and labels start with `name`, else None."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        found = [line.rsplit(" ", 1)[1] for line in text.splitlines() if line.startswith(name)]
        return float(found[0]) if found else None

    def leads(self) -> bool:
        return self.metric("netsched_operator_leader") == 1.0

    def admit(self, pod: dict[str, Any]) -> dict[str, Any]:
        """The AdmissionReview response its webhook gives for creating `pod`."""
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": str(uuid.uuid4()), "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"}, "operation": "CREATE",
            "namespace": pod["metadata"].get("namespace", "default"), "object": pod,
            "userInfo": {"username": "test"}, "dryRun": False}}
        request = urllib.request.Request(f"https://127.0.0.1:{self.webhook_port}/{HANDLER_ID}",
                                         data=json.dumps(review).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        context = ssl.create_default_context(cafile=str(self.ca))
        with urllib.request.urlopen(request, timeout=10, context=context) as resp:
            answer: dict[str, Any] = json.loads(resp.read())["response"]
        if answer.get("patch"):
            answer["patch"] = json.loads(base64.b64decode(answer["patch"]))
        return answer

    def log(self) -> str:
        return self.process.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no goodbye, the Lease is left as it was."""
        os.kill(self.process.pid, signal.SIGKILL)
        poll(lambda: not self.process.alive(), 30, f"operator replica {self.name} to die")

    def pause(self) -> None:
        """SIGSTOP: the process is frozen as a hung node or a long GC pause freezes it; its clock runs on."""
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)


def lease_holder(cluster: DevCluster, name: str) -> str | None:
    lease = client.CoordinationV1Api(cluster.api_client()).read_namespaced_lease(name, LEASE_NAMESPACE)
    return lease.spec.holder_identity


@dataclass
class Replicas:
    """The replicas started so far, and how to start one more (as a rolling update does)."""
    cluster: DevCluster
    args: tuple[str, ...]
    files: Path  # the webhook's certificate, its key and their CA
    all: list[Replica] = field(default_factory=list)

    def add(self) -> Replica:
        """One more replica, once it serves /healthz."""
        i = len(self.all)
        health, metrics, webhook = (processes.free_port() for _ in range(3))
        kubeconfig = self.cluster.directory / pkilib.kubeconfig_name(pkilib.User(OPERATOR))
        argv = [sys.executable, "-m", "netsched", "operator", f"--kubeconfig={kubeconfig}",
                "--host=127.0.0.1", f"--health-port={health}", f"--metrics-port={metrics}",
                f"--records={self.cluster.records_file}", f"--webhook-port={webhook}",
                f"--webhook-cert-file={self.files / 'webhook.crt'}",
                f"--webhook-key-file={self.files / 'webhook.key'}", *self.args]
        with processes.signals_deferred():
            proc = processes.start(f"operator-r{i}", argv, self.cluster.log_dir / f"operator-r{i}.log",
                                   cwd=self.cluster.directory)
            replica = Replica(f"r{i}", proc, metrics, webhook, self.files / "webhook-ca.crt")
            self.all.append(replica)
        processes.wait_until(proc, functools.partial(_serves, f"http://127.0.0.1:{health}/healthz"), 60,
                             port=health)
        return replica


@contextmanager
def operator_replicas(cluster: DevCluster, count: int, *args: str, lease: str = "netsched-operator",
                      ) -> Iterator[Replicas]:
    """`count` replicas electing through Lease default/`lease`, each with `args` besides; all
    stopped afterwards (and the Lease, its Role and binding deleted, so the next test can make its own)."""
    api = cluster.api_client()
    _authorise(api, lease)
    ca, cert, key = pkilib.serving_certificate("127.0.0.1", ["localhost"], ip_addresses=("127.0.0.1",))
    files = cluster.directory / "replicas"
    files.mkdir(exist_ok=True)
    for path, pem in (("webhook-ca.crt", ca), ("webhook.crt", cert), ("webhook.key", key)):
        (files / path).write_bytes(pem)
    replicas = Replicas(cluster, (f"--leader-lease={LEASE_NAMESPACE}/{lease}", *args), files)
    try:
        for _ in range(count):
            replicas.add()
        yield replicas
    finally:
        for replica in replicas.all:
            processes.stop(replica.process.pid)
        client.CoordinationV1Api(api).delete_namespaced_lease(lease, LEASE_NAMESPACE)
        rbac = client.RbacAuthorizationV1Api(api)
        rbac.delete_namespaced_role_binding(f"{lease}-election", LEASE_NAMESPACE)
        rbac.delete_namespaced_role(f"{lease}-election", LEASE_NAMESPACE)


def _authorise(api: client.ApiClient, lease: str) -> None:
    """The operator's rules, and on the Lease what the chart grants: read and renew it, not create."""
    rbac = client.RbacAuthorizationV1Api(api)
    if not rbac.list_cluster_role(field_selector=f"metadata.name={OPERATOR_ROLE}").items:
        grant(api, OPERATOR_ROLE, OPERATOR_RULES, OPERATOR)
    role = f"{lease}-election"
    meta = {"name": role, "namespace": LEASE_NAMESPACE}
    rbac.create_namespaced_role(LEASE_NAMESPACE, {"metadata": meta, "rules": [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [lease],
         "verbs": ["get", "update"]}]})
    rbac.create_namespaced_role_binding(LEASE_NAMESPACE, {
        "metadata": meta, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": OPERATOR}]})
    client.CoordinationV1Api(api).create_namespaced_lease(LEASE_NAMESPACE, {"metadata": {"name": lease}})


def _serves(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return bool(resp.status == 200)
