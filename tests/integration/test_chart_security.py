"""The chart's NetworkPolicies and Pod Security: rendered as the values say, refused when the values are
wrong, and accepted by the real API server, whose Pod Security admission (level "restricted") admits every
netsched pod but the agent, and the agent only for the host network it measures (docs/security-policies.md).
No network plugin runs here, so the policies are checked as objects, not as traffic refused."""

from __future__ import annotations

import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from netsched.devcluster.binaries import ensure_binaries

CHART = Path(__file__).parents[2] / "charts" / "netsched"
# every workload on: the retrain CronJob needs records on shared storage
EVERYTHING = {"retrain": {"enabled": True},
              "operator": {"records": {"persistence": {"accessModes": ["ReadWriteMany"]}}}}
SELECTOR = "app.kubernetes.io/component"
COMPONENTS = {"extender", "operator", "scheduler", "agent", "retrain"}  # every one with pods


def helm_template(values: dict, namespace: str = "netsched-system") -> subprocess.CompletedProcess:
    return subprocess.run([str(ensure_binaries(quiet=True) / "helm"), "template", "netsched", str(CHART),
                           "-n", namespace, "-f", "-"], input=yaml.safe_dump(values), capture_output=True,
                          text=True)


def objects(values: dict, namespace: str = "netsched-system") -> list[dict]:
    done = helm_template(values, namespace)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def policies(values: dict) -> dict[str, dict]:
    """component -> its NetworkPolicy's spec."""
    return {d["metadata"]["labels"][SELECTOR]: d["spec"] for d in objects(values)
            if d["kind"] == "NetworkPolicy"}


def allowed(spec: dict) -> dict[int, list[dict] | None]:
    """port -> the peers allowed to reach it (None: any source)."""
    return {rule["ports"][0]["port"]: rule.get("from") for rule in spec["ingress"]}


def pod_of(component: str) -> dict:
    return {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "netsched",
                                            "app.kubernetes.io/instance": "netsched", SELECTOR: component}}}


MONITORING = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}


# ---- rendered ---------------------------------------------------------------------------------------

def test_by_default_each_port_admits_only_its_callers():
    got = policies(EVERYTHING)
    assert set(got) == COMPONENTS
    for component, spec in got.items():
        assert spec["podSelector"] == pod_of(component)["podSelector"] and spec["policyTypes"] == ["Ingress"]
    # the extender's scheduling port from the chart's scheduler alone; its debug and metrics port from
    # monitoring alone
    assert allowed(got["extender"]) == {8888: [pod_of("scheduler"), pod_of("operator")], 8889: [MONITORING]}
    # the webhook from any source (the API server's host address), on that port only
    assert allowed(got["operator"]) == {9443: None, 9090: [MONITORING]}
    assert allowed(got["scheduler"]) == {10259: [MONITORING]}
    assert allowed(got["agent"]) == {9101: [MONITORING, pod_of("extender"), pod_of("operator")], 9102: None}
    assert got["retrain"]["ingress"] == []  # it serves nothing


def test_the_callers_given_in_values_are_the_ones_allowed():
    control_plane = [{"ipBlock": {"cidr": "10.0.0.0/28"}}]
    nodes = [{"ipBlock": {"cidr": "10.1.0.0/16"}}, {"ipBlock": {"cidr": "fd00:1::/64"}}]
    prometheus = {"namespaceSelector": {"matchLabels": {"team": "observability"}},
                  "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}
    got = policies(EVERYTHING | {
        "networkPolicy": {"schedulerPeers": control_plane, "apiServerPeers": control_plane,
                          "nodePeers": nodes, "monitoringPeers": [prometheus]},
        "agent": {"port": 19101, "probePort": 19102}})
    assert allowed(got["extender"]) == {8888: [pod_of("scheduler"), pod_of("operator"), *control_plane],
                                       8889: [prometheus]}
    assert allowed(got["operator"]) == {9443: control_plane, 9090: [prometheus]}
    assert allowed(got["agent"]) == {19101: [prometheus, pod_of("extender"), pod_of("operator"), *nodes],
                                     19102: nodes}


@pytest.mark.parametrize("values, gone", [
    ({"networkPolicy": {"enabled": False}}, COMPONENTS),
    ({"agent": {"enabled": False}}, {"agent"}),
    ({}, {"retrain"}),  # retraining is off by default
], ids=["switched-off", "no-agents", "no-retrain"])
def test_a_component_switched_off_has_no_policy(values, gone):
    got = policies((EVERYTHING if values else {}) | values)
    assert not set(got) & gone and set(got) | gone == COMPONENTS


def test_without_the_webhook_the_operator_admits_only_monitoring():
    without = policies({"operator": {"webhook": {"enabled": False}}})
    assert allowed(without["operator"]) == {9090: [MONITORING]}


@pytest.mark.parametrize("values, message", [
    ({"networkPolicy": {"enabled": "yes"}}, "at '/networkPolicy/enabled': got string, want boolean"),
    ({"networkPolicy": {"schedulerPeers": [{"ipBlock": {"cidr": "10.0.0.0"}}]}},
     "at '/networkPolicy/schedulerPeers/0/ipBlock/cidr': '10.0.0.0' does not match pattern"),
    ({"networkPolicy": {"nodePeers": [{"namespace": "kube-system"}]}},
     "at '/networkPolicy/nodePeers/0': additional properties 'namespace' not allowed"),
    ({"networkPolicy": {"apiServerPeers": [{}]}}, "at '/networkPolicy/apiServerPeers/0': minProperties"),
    ({"networkPolicy": {"monitoringPeers": [{"namespaceSelector": {"matchLabels": {"team": 7}}}]}},
     "at '/networkPolicy/monitoringPeers/0/namespaceSelector/matchLabels/team': got number, want string"),
    ({"networkPolicy": {"monitoringPeers": [{"podSelector": {"matchExpressions": [{"key": "app",
                                                                                  "operator": "Is"}]}}]}},
     "at '/networkPolicy/monitoringPeers/0/podSelector/matchExpressions/0/operator'"),
], ids=["switch-not-boolean", "cidr-without-prefix", "peer-with-unknown-field", "empty-peer",
        "label-value-not-string", "unknown-operator"])
def test_the_schema_refuses_bad_policy_values(values, message):
    done = helm_template(values)
    assert done.returncode != 0 and message in done.stderr, done.stderr


# ---- on the API server -------------------------------------------------------------------------------

def kubectl(dev_cluster, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    argv = [str(ensure_binaries(quiet=True) / "kubectl"), f"--kubeconfig={dev_cluster.kubeconfig}", *args]
    return subprocess.run(argv, input=stdin, capture_output=True, text=True)


@pytest.fixture(scope="module")
def restricted(dev_cluster) -> Iterator[str]:
    """A namespace of its own where Pod Security "restricted" is enforced."""
    core = client.CoreV1Api(dev_cluster.api_client())
    name = f"netsched-psa-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name, "labels": {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest"}}})
    yield name
    core.delete_namespace(name)


def test_the_api_server_accepts_the_policies_as_rendered(dev_cluster, restricted):
    values = EVERYTHING | {"networkPolicy": {"schedulerPeers": [{"ipBlock": {"cidr": "10.0.0.0/28"}}],
                                             "nodePeers": [{"ipBlock": {"cidr": "fd00:1::/64"}}]}}
    docs = [d for d in objects(values, restricted) if d["kind"] == "NetworkPolicy"]
    done = kubectl(dev_cluster, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(docs))
    assert done.returncode == 0, done.stderr
    stored = client.NetworkingV1Api(dev_cluster.api_client()).list_namespaced_network_policy(restricted).items
    assert sorted(p.metadata.name for p in stored) == sorted(d["metadata"]["name"] for d in docs)
    [extender] = [p for p in stored if p.metadata.name == "netsched-extender"]
    assert [peer.ip_block.cidr for peer in extender.spec.ingress[0]._from if peer.ip_block] == ["10.0.0.0/28"]


def pod_templates(docs: list[dict]) -> dict[str, dict]:
    """component -> the pod its workload (Deployment, DaemonSet, CronJob) would make."""
    pods = {}
    for d in docs:
        spec = d.get("spec", {})
        template = spec.get("jobTemplate", {}).get("spec", {}).get("template") or spec.get("template")
        if d["kind"] in ("Deployment", "DaemonSet", "CronJob"):
            component = d["metadata"]["labels"][SELECTOR]
            metadata = {"name": f"psa-{component}", "labels": template["metadata"]["labels"]}
            pods[component] = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
                               "spec": template["spec"]}
    return pods


# PSA names each check it fails; the agent's documented exemption is exactly these two
AGENT_EXEMPTION = {"host namespaces", "hostPort"}
CHECK = re.compile(r"(?:^|, )([A-Za-z ]+?) \(")


def test_pod_security_restricted_admits_every_pod_but_the_agent_and_it_only_for_the_host_network(
        dev_cluster, restricted):
    docs = objects(EVERYTHING, restricted)
    # the pods' ServiceAccounts must exist for the ServiceAccount admission to let them through
    accounts = [d for d in docs if d["kind"] == "ServiceAccount"]
    done = kubectl(dev_cluster, "apply", "-f", "-", stdin=yaml.safe_dump_all(accounts))
    assert done.returncode == 0, done.stderr
    pods = pod_templates(docs)
    assert set(pods) == COMPONENTS
    # Pod Security enforces on pods (on workloads it only warns): each template as a pod, created as a
    # server-side dry run
    answers = {component: kubectl(dev_cluster, "create", "--dry-run=server", "-n", restricted, "-f", "-",
                                  stdin=yaml.safe_dump(pod))
               for component, pod in pods.items()}
    for component in ("extender", "operator", "scheduler", "retrain"):
        assert answers[component].returncode == 0, (component, answers[component].stderr)
        assert "(server dry run)" in answers[component].stdout
    refused = answers["agent"]
    marker = 'violates PodSecurity "restricted:latest": '
    assert refused.returncode != 0 and marker in refused.stderr, refused.stderr
    violations = refused.stderr.split(marker, 1)[1]
    assert set(CHECK.findall(violations)) == AGENT_EXEMPTION, violations
    assert "hostNetwork=true" in violations
