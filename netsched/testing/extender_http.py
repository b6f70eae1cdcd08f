"""The dev-cluster's extender over HTTP as its callers reach it: kube-scheduler on the scheduling port
(with the client certificate the dev-cluster gave it, when the extender asks for one) and people or
Prometheus on the metrics port (with a bearer token: the dev-cluster's admin by default)."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any

from netsched.devcluster.devcluster import DevCluster
from netsched.devcluster.pki import read_tokens


def scheduler_tls(cluster: DevCluster, certificate: bool = True) -> ssl.SSLContext | None:
    """A TLS context that trusts the extender's CA and, with `certificate`, presents kube-scheduler's
    client certificate; None when the extender serves plain HTTP."""
    if not (cluster.extender_url or "").startswith("https"):
        return None
    pki = cluster.pki
    context = ssl.create_default_context(cafile=str(pki.extender_ca_cert))
    if certificate:
        context.load_cert_chain(str(pki.scheduler_client_cert), str(pki.scheduler_client_key))
    return context


def admin_token(cluster: DevCluster) -> str:
    return read_tokens(cluster.pki)["admin"]


def _decoded(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode()


def request(url: str, body: Any = None, token: str | None = None, context: ssl.SSLContext | None = None,
            timeout: float = 10) -> tuple[int, Any]:
    """GET (or POST `body` as JSON) `url`: status and the decoded answer, errors included."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
            return resp.status, _decoded(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, _decoded(err.read())


def metrics_port_get(cluster: DevCluster, path: str, token: str | None = "admin") -> tuple[int, Any]:
    """GET `path` on the extender's metrics port with `token` ("admin": the dev-cluster admin's; None:
    no token), trusting the extender's CA."""
    url = cluster.extender_metrics_url
    assert url, "the dev-cluster runs no extender of its own"
    context = scheduler_tls(cluster, certificate=False)
    return request(f"{url}{path}", token=admin_token(cluster) if token == "admin" else token, context=context)


def metrics_text(cluster: DevCluster) -> str:
    """The extender's /metrics, read as the dev-cluster's admin."""
    status, text = metrics_port_get(cluster, "/metrics")
    assert status == 200, (status, text)
    return str(text)


def decision(cluster: DevCluster, namespace: str, pod: str) -> tuple[int, Any]:
    """/debug/decisions/<namespace>/<pod> as the dev-cluster's admin."""
    return metrics_port_get(cluster, f"/debug/decisions/{namespace}/{pod}")


def scheduling_post(cluster: DevCluster, verb: str, body: Any, url: str | None = None) -> tuple[int, Any]:
    """POST a verb to the extender (or another replica at `url`) as kube-scheduler does."""
    return request(f"{url or cluster.extender_url}/{verb}", body, context=scheduler_tls(cluster))
