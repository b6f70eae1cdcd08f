"""Who may talk to the extender, on the real control plane: kube-scheduler alone on the scheduling port
(mutual TLS), and on the metrics port whom the API server allows, seeing only their namespaces' pods."""

from __future__ import annotations

import ssl
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

from netsched.api.labels import JOB_GPUS, JOB_LABEL
from netsched.devcluster.pki import client_certificate
from netsched.devcluster.pods import gpu_pod
from netsched.devcluster.wait import poll
from netsched.testing import extender_http
from netsched.testing.cluster import scratch_namespace

PAIR = {JOB_GPUS: "8"}  # a job of two 4-GPU pods: its first pod's node holds room for the second
READER_RULES = [{"nonResourceURLs": ["/metrics", "/debug/decisions", "/debug/decisions/*"], "verbs": ["get"]}]


def _bound(core: client.CoreV1Api, namespace: str, name: str) -> str:
    return poll(lambda: core.read_namespaced_pod(name, namespace).spec.node_name, 60,
                f"{namespace}/{name} bound")


def _pair_pod(name: str, job: str) -> dict:
    return gpu_pod(name, 4, labels={JOB_LABEL: job}, annotations=PAIR)


def _made_up(namespace: str, name: str, job: str) -> dict:
    """A pod as kube-scheduler would send it, that no one created."""
    pod = _pair_pod(name, job)
    pod["metadata"] |= {"namespace": namespace, "uid": str(uuid.uuid4())}
    return {"Pod": pod, "Nodes": None, "NodeNames": None}


def _decided(cluster, namespace: str) -> set[tuple[str, str]]:
    """The pods of `namespace` the extender recorded a decision for, as the admin sees them."""
    status, decisions = extender_http.metrics_port_get(cluster, "/debug/decisions")
    assert status == 200, decisions
    return {(d["namespace"], d["pod"]) for d in decisions if d["namespace"] == namespace}


def _pair(core: client.CoreV1Api, cluster, namespace: str, job: str) -> tuple[str, tuple[str, int]]:
    """A job's two pods one after the other: the node of the first, and the second's best (node, score)."""
    core.create_namespaced_pod(namespace, _pair_pod(f"{job}-0", job))
    node = _bound(core, namespace, f"{job}-0")
    core.create_namespaced_pod(namespace, _pair_pod(f"{job}-1", job))
    _bound(core, namespace, f"{job}-1")
    status, decision = extender_http.decision(cluster, namespace, f"{job}-1")
    assert status == 200, decision
    return node, (decision["top"][0]["node"], decision["top"][0]["score"])


def _other_clients(cluster) -> dict[str, tuple[str, ssl.SSLContext | None]]:
    """Clients without kube-scheduler's certificate: none at all, one another CA signed, and plain HTTP."""
    pki = cluster.pki
    https, plain = cluster.extender_url, cluster.extender_url.replace("https://", "http://")
    no_certificate = ssl.create_default_context(cafile=str(pki.extender_ca_cert))
    stranger = ssl.create_default_context(cafile=str(pki.extender_ca_cert))
    ca, cert, key = client_certificate("system:kube-scheduler")  # the right name, signed by the wrong CA
    directory = cluster.directory / "stranger"
    directory.mkdir(exist_ok=True)
    (directory / "tls.crt").write_bytes(cert)
    (directory / "tls.key").write_bytes(key)
    stranger.load_cert_chain(str(directory / "tls.crt"), str(directory / "tls.key"))
    return {"no certificate": (https, no_certificate), "another CA's": (https, stranger),
            "plain HTTP": (plain, None)}


def test_a_client_without_the_schedulers_certificate_gets_no_answer_and_changes_nothing(dev_cluster, core,
                                                                                         namespace):
    assert dev_cluster.extender_url.startswith("https://")
    # before anyone else calls: a job's second pod scores its first pod's node (room held for it) so
    control_node, control = _pair(core, dev_cluster, namespace, "control")
    assert control[0] == control_node

    core.create_namespaced_pod(namespace, _pair_pod("first-0", "first"))
    node = _bound(core, namespace, "first-0")
    decided = _decided(dev_cluster, namespace)
    for who, (url, context) in _other_clients(dev_cluster).items():
        for i in range(3):  # made-up peers that would take the room held for the real one, if heard
            with pytest.raises(OSError):  # the TLS handshake fails (or the TLS server hangs up on HTTP)
                extender_http.request(f"{url}/filter", _made_up(namespace, f"fake-{i}", "first"),
                                      context=context)
            print(f"{who}: no answer")
    assert _decided(dev_cluster, namespace) == decided  # nothing recorded, nothing assumed

    # the real peer scores its first pod's node as the control's did
    core.create_namespaced_pod(namespace, _pair_pod("first-1", "first"))
    assert _bound(core, namespace, "first-1") == node
    status, decision = extender_http.decision(dev_cluster, namespace, "first-1")
    assert status == 200 and (decision["top"][0]["node"], decision["top"][0]["score"]) == (node, control[1])

    # what the certificate keeps out: the same made-up peer from kube-scheduler's side is heard, recorded
    # and assumed on the held node, and the real peer scores that node lower than the control's did
    core.create_namespaced_pod(namespace, _pair_pod("second-0", "second"))
    held = _bound(core, namespace, "second-0")
    names = [n.metadata.name for n in core.list_node().items]
    status, answer = extender_http.scheduling_post(
        dev_cluster, "filter", _made_up(namespace, "fake-9", "second") | {"NodeNames": names})
    assert status == 200 and answer["NodeNames"] == [held], answer
    assert (namespace, "fake-9") in _decided(dev_cluster, namespace)
    core.create_namespaced_pod(namespace, _pair_pod("second-1", "second"))
    decision = poll(lambda: (found := extender_http.decision(dev_cluster, namespace, "second-1"))[0] == 200
                    and found[1], 60, "the real peer's decision")
    assert [(c["node"], c["score"]) for c in decision["top"]][:1] != [(held, control[1])], decision


@pytest.fixture
def other_namespace(core) -> Iterator[str]:
    with scratch_namespace(core, "other") as name:
        yield name


@pytest.fixture
def reader_role(dev_cluster) -> Iterator[str]:
    """A ClusterRole with the chart's extender-reader rules (get on the metrics port's paths)."""
    rbac = client.RbacAuthorizationV1Api(dev_cluster.api_client())
    name = f"extender-reader-{uuid.uuid4().hex[:6]}"
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": READER_RULES})
    try:
        yield name
    finally:
        rbac.delete_cluster_role(name)
        for binding in rbac.list_cluster_role_binding().items:
            if binding.role_ref.name == name:
                rbac.delete_cluster_role_binding(binding.metadata.name)


def _service_account_token(core: client.CoreV1Api, namespace: str, name: str) -> str:
    core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    request = core.create_namespaced_service_account_token(name, namespace,
                                                           {"spec": {"expirationSeconds": 600}})
    return request.status.token


def test_the_metrics_port_answers_whom_the_api_server_allows_and_shows_only_their_namespaces(
        dev_cluster, core, namespace, other_namespace, reader_role):
    rbac = client.RbacAuthorizationV1Api(dev_cluster.api_client())
    for ns, pod in ((namespace, "mine"), (other_namespace, "theirs")):
        core.create_namespaced_pod(ns, gpu_pod(pod, 1))
        _bound(core, ns, pod)
    nobody = _service_account_token(core, namespace, "nobody")
    reader = _service_account_token(core, namespace, "reader")
    subject = {"kind": "ServiceAccount", "name": "reader", "namespace": namespace}
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": reader_role}
    rbac.create_cluster_role_binding({"metadata": {"name": f"{reader_role}-reader"}, "subjects": [subject],
                                      "roleRef": role_ref})
    rbac.create_namespaced_role(namespace, {"metadata": {"name": "pod-reader"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]})
    rbac.create_namespaced_role_binding(namespace, {"metadata": {"name": "pod-reader"}, "subjects": [subject],
                                                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                                "kind": "Role", "name": "pod-reader"}})

    def get(path: str, token: str | None) -> tuple[int, object]:
        return extender_http.metrics_port_get(dev_cluster, path, token=token)

    for path in ("/debug/decisions", f"/debug/decisions/{namespace}/mine", "/metrics"):
        assert get(path, None)[0] == 401, path  # no token
        assert get(path, "not-a-token")[0] == 401, path  # one the API server does not accept
        status, answer = get(path, nobody)  # a ServiceAccount with no rights
        assert status == 403 and "system:serviceaccount:" in answer["Error"], (path, answer)
    assert get("/readyz", None)[0] == 200  # the probes need nothing

    # the reader: its own namespace's placements only (the RoleBinding reaches the cache within seconds)
    status, shown = poll(lambda: (found := get("/debug/decisions", reader))[0] == 200 and found[1]
                         and found, 30, "the reader's decisions")
    assert {d["namespace"] for d in shown} == {namespace} and "mine" in {d["pod"] for d in shown}
    assert get(f"/debug/decisions/{namespace}/mine", reader)[0] == 200
    assert get(f"/debug/decisions/{other_namespace}/theirs", reader)[0] == 403
    # the admin may list pods everywhere: both
    everyone = {(d["namespace"], d["pod"]) for d in get("/debug/decisions", "admin")[1]}
    assert {(namespace, "mine"), (other_namespace, "theirs")} <= everyone
