"""The Helm chart (charts/netsched) and the manifests rendered from it, against the real dev-cluster."""

from __future__ import annotations

import argparse
import base64
import json
import re
import ssl
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from netsched.api.topology import Topology
from netsched.cli import build_parser
from netsched.devcluster import processes
from netsched.devcluster.binaries import default_minor, ensure_binaries, read_versions
from netsched.devcluster.pki import client_certificate, serving_certificate
from netsched.devcluster.rbac import EXTENDER_RULES, OPERATOR_RULES
from netsched.devcluster.scheduler_config import PACK_GPUS, ExtenderSettings, ExtenderTLS
from netsched.devcluster.wait import poll
from netsched.extender.metrics import Metrics
from netsched.models.gpus import GpuCapability, parse_table
from netsched.operator.metrics import OperatorMetrics
from netsched.operator.webhook.configurations import hard_limits_configuration, webhook_configuration
from netsched.packing.policy import DisruptionPolicy, read_policy
from netsched.telemetry.agent import AgentMetrics

ROOT = Path(__file__).parents[2]
CHART = ROOT / "charts" / "netsched"
RBAC_KINDS = {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
LEASE_RULE = {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
              "resourceNames": ["netsched-operator"], "verbs": ["get", "update"]}
# Everything but the defaults: HA operator (a leader elected), more extenders, telemetry, monitoring.
CUSTOM_VALUES = {
    "operator": {"replicas": 2, "records": {"persistence": {"accessModes": ["ReadWriteMany"],
                                                            "storageClassName": "shared"}},
                 "packer": {"enabled": False},
                 "webhook": {"namespaces": "all", "excludeNamespaces": ["batch-infra"],
                             "failurePolicy": "Ignore", "timeoutSeconds": 3,
                             "objectSelector": {"matchLabels": {"team": "ml"}}}},
    "extender": {"replicas": 3, "shortlist": 0, "tls": {"enabled": True},
                 "telemetry": {"prometheusUrl": "http://prometheus.monitoring.svc:9090"},
                 "model": {"source": "pvc", "claimName": "netsched-models", "path": "current.json"}},
    # Its own schedulerName: the scheduler started below must not take the dev-cluster's pods.
    "scheduler": {"name": "netsched-chart-test", "extender": {"weight": 3, "ignorable": False}},
    "agent": {"interval": 10, "budgetBytesPerMinute": 1048576},
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    "retrain": {"enabled": True, "schedule": "30 2 * * 0", "holdout": 0.25, "threads": 2},
}


@pytest.fixture(scope="module")
def bin_dir() -> Path:
    return ensure_binaries(quiet=True)


def run(argv: list, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], input=stdin, capture_output=True, text=True)


def ok(argv: list, stdin: str | None = None) -> str:
    done = run(argv, stdin)
    assert done.returncode == 0, f"{' '.join(map(str, argv))} failed:\n{done.stderr}"
    return done.stdout


def render(bin_dir: Path, values: dict | None = None, release: str = "netsched",
           namespace: str = "netsched-system") -> list[dict]:
    out = ok([bin_dir / "helm", "template", release, CHART, "-n", namespace, "-f", "-"],
             stdin=yaml.safe_dump(values or {}))
    return [doc for doc in yaml.safe_load_all(out) if doc]


def find(docs: list[dict], kind: str, name: str) -> dict:
    [doc] = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def container(docs: list[dict], kind: str, name: str) -> dict:
    [c] = find(docs, kind, name)["spec"]["template"]["spec"]["containers"]
    return c


def scheduler_yaml(docs: list[dict], fullname: str) -> dict:
    return yaml.safe_load(find(docs, "ConfigMap", f"{fullname}-scheduler")["data"]["scheduler.yaml"])


def kubectl(bin_dir: Path, dev_cluster, *args) -> list:
    """argv of kubectl as the dev-cluster's admin."""
    return [bin_dir / "kubectl", f"--kubeconfig={dev_cluster.kubeconfig}", *args]


# ---- the chart on its own -------------------------------------------------------------------------

@pytest.mark.parametrize("values", [{}, CUSTOM_VALUES], ids=["defaults", "custom"])
def test_helm_lint_strict_passes(bin_dir, values):
    out = ok([bin_dir / "helm", "lint", "--strict", CHART, "-f", "-"], stdin=yaml.safe_dump(values))
    assert "1 chart(s) linted, 0 chart(s) failed" in out


def test_defaults_render_the_documented_components(bin_dir):
    docs = render(bin_dir)
    operator = container(docs, "Deployment", "netsched-operator")
    assert operator["image"] == "netsched:0.1.0"
    assert operator["args"] == ["operator", "--host=0.0.0.0", "--health-port=8080", "--metrics-port=9090",
                                "--records=/var/lib/netsched/job-records.jsonl", "--interval=1",
                                "--forecast-interval=15", "--never-fits-timeout=0", "--telemetry-max-age=120",
                                "--scheduler-name=netsched", "--topology=netsched",
                                "--model=/opt/netsched/models/current.json",
                                "--pack-budget=1", "--pack-after=5",
                                "--pack-cooldown=10", "--plan-deadline=120",
                                "--pack-policy=/etc/netsched/packer/policy.yaml", "--webhook-port=9443",
                                "--webhook-cert-file=/etc/netsched/webhook/tls.crt",
                                "--webhook-key-file=/etc/netsched/webhook/tls.key"]
    assert {"name": "packer-policy", "mountPath": "/etc/netsched/packer", "readOnly": True} \
        in operator["volumeMounts"]
    assert operator["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    op_spec = find(docs, "Deployment", "netsched-operator")["spec"]
    assert op_spec["replicas"] == 1 and op_spec["strategy"]["type"] == "Recreate"
    [records] = [v for v in op_spec["template"]["spec"]["volumes"] if v["name"] == "records"]
    assert records["persistentVolumeClaim"]["claimName"] == "netsched-operator-records"
    pvc = find(docs, "PersistentVolumeClaim", "netsched-operator-records")
    assert pvc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"

    extender = find(docs, "Deployment", "netsched-extender")
    assert extender["spec"]["replicas"] == 2
    ext = container(docs, "Deployment", "netsched-extender")
    # mutual TLS by default: the certificates the chart makes (test_mutual_tls_... below)
    assert ext["args"] == ["extender", "--host=0.0.0.0", "--port=8888", "--metrics-port=8889",
                           "--tls-cert-file=/etc/netsched/tls/tls.crt",
                           "--tls-private-key-file=/etc/netsched/tls/tls.key",
                           "--client-ca-file=/etc/netsched/client-ca/ca.crt", "--shortlist=1",
                           "--max-cache-age=30",
                           "--hold-seconds=15", "--telemetry-max-age=120", "--topology=netsched",
                           "--model=/opt/netsched/models/current.json", "--model-reload-seconds=30"]
    assert ext["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert ext["livenessProbe"]["httpGet"]["path"] == "/healthz"
    # Ready about a second after it serves, and never killed for starting slowly (2 minutes)
    assert ext["startupProbe"]["httpGet"]["path"] == "/healthz" and ext["startupProbe"]["periodSeconds"] == 1
    assert ext["startupProbe"]["periodSeconds"] * ext["startupProbe"]["failureThreshold"] >= 120
    assert find(docs, "Service", "netsched-extender")["spec"]["ports"] == [
        {"name": "https", "port": 8888, "targetPort": "https"},
        {"name": "metrics", "port": 8889, "targetPort": "metrics"}]
    assert find(docs, "PodDisruptionBudget", "netsched-extender")["spec"]["minAvailable"] == 1

    sched = container(docs, "Deployment", "netsched-scheduler")
    assert sched["image"] == f"registry.k8s.io/kube-scheduler:{TESTED}"
    assert sched["args"] == ["--config=/etc/netsched/scheduler.yaml"]

    agent = container(docs, "DaemonSet", "netsched-agent")
    assert agent["args"] == [
        "agent", "--node-name=$(NODE_NAME)", "--host=0.0.0.0", "--port=9101", "--probe-port=9102",
        "--interval=30", "--budget-bytes-per-minute=67108864", "--max-age=120", "--max-links=16",
        "--topology=netsched", "--discover-namespace=$(POD_NAMESPACE)",
        "--discover-selector=app.kubernetes.io/component=agent"]
    assert {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in agent["env"]} == {
        "NODE_NAME": "spec.nodeName", "POD_NAMESPACE": "metadata.namespace"}
    assert [p["containerPort"] for p in agent["ports"]] == [9101, 9102]
    assert agent["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert agent["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}  # Ready once it serves
    assert not any(d["kind"] in ("ServiceMonitor", "Lease") for d in docs)


def test_every_pod_runs_non_root_with_a_read_only_root_and_no_capabilities(bin_dir):
    workloads = [d for d in render(bin_dir) if d["kind"] in ("Deployment", "DaemonSet")]
    assert len(workloads) == 4
    for w in workloads:
        pod = w["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 65532
        assert pod.get("hostNetwork", False) is (w["kind"] == "DaemonSet"), w["metadata"]["name"]
        assert not pod.get("hostPID") and not any("hostPath" in v for v in pod.get("volumes", []))
        for c in pod["containers"]:
            assert c["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                             "capabilities": {"drop": ["ALL"]}}, c["name"]
            assert c["resources"]["requests"]["cpu"] and c["resources"]["limits"]["memory"]


def test_custom_values_reach_the_components(bin_dir):
    docs = render(bin_dir, CUSTOM_VALUES)
    operator = find(docs, "Deployment", "netsched-operator")
    assert operator["spec"]["replicas"] == 2 and operator["spec"]["strategy"]["type"] == "RollingUpdate"
    args = operator["spec"]["template"]["spec"]["containers"][0]["args"]
    assert [a for a in args if not a.startswith("--extender-")][-9:] == [
        "--scheduler-name=netsched-chart-test", "--topology=netsched",
        "--model=/var/lib/netsched-models/current.json",
        "--no-packer",
        "--webhook-port=9443",
        "--webhook-cert-file=/etc/netsched/webhook/tls.crt",
        "--webhook-key-file=/etc/netsched/webhook/tls.key",
        "--leader-lease=netsched-system/netsched-operator", "--lease-duration=15"]
    assert container(docs, "Deployment", "netsched-operator")["env"] == [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    assert find(docs, "Lease", "netsched-operator")["metadata"]["namespace"] == "netsched-system"
    assert find(docs, "ClusterRole", "netsched-operator")["rules"] == OPERATOR_RULES
    assert find(docs, "Role", "netsched-operator")["rules"] == [LEASE_RULE]
    pvc = find(docs, "PersistentVolumeClaim", "netsched-operator-records")["spec"]
    assert pvc["accessModes"] == ["ReadWriteMany"] and pvc["storageClassName"] == "shared"

    assert find(docs, "Deployment", "netsched-extender")["spec"]["replicas"] == 3
    ext = container(docs, "Deployment", "netsched-extender")
    assert ext["args"][-8:] == [
        "--shortlist=0", "--max-cache-age=30", "--hold-seconds=15",
        "--prometheus-url=http://prometheus.monitoring.svc:9090",
        "--telemetry-max-age=120", "--topology=netsched", "--model=/var/lib/netsched-models/current.json",
        "--model-reload-seconds=30"]
    mount = {"name": "models", "mountPath": "/var/lib/netsched-models", "readOnly": True}
    assert mount in ext["volumeMounts"]
    volumes = find(docs, "Deployment", "netsched-extender")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "models", "persistentVolumeClaim": {"claimName": "netsched-models", "readOnly": True}} \
        in volumes
    config = scheduler_yaml(docs, "netsched")
    assert config["profiles"][0]["schedulerName"] == "netsched-chart-test"
    assert (config["extenders"][0]["weight"], config["extenders"][0]["ignorable"]) == (3, False)
    assert "--interval=10" in container(docs, "DaemonSet", "netsched-agent")["args"]
    assert "--budget-bytes-per-minute=1048576" in container(docs, "DaemonSet", "netsched-agent")["args"]


def test_gpu_capabilities_reach_the_extender_and_the_retrain_job_as_a_table_file(bin_dir):
    table = {"NVIDIA-RTX-PRO-6000": {"tflops16": 500, "tflopsFp32": 120, "memoryBandwidthGBps": 1790,
                                     "memoryGiB": 96}}
    docs = render(bin_dir, {"gpuCapabilities": table, "retrain": {"enabled": True}})
    configmap = find(docs, "ConfigMap", "netsched-gpus")
    assert parse_table(configmap["data"]["gpus.json"], "chart") == {
        "NVIDIA-RTX-PRO-6000": GpuCapability(500, 120, 1790, 96)}
    ext = container(docs, "Deployment", "netsched-extender")
    assert "--gpu-table=/etc/netsched/gpus/gpus.json" in ext["args"]
    assert {"name": "gpus", "mountPath": "/etc/netsched/gpus", "readOnly": True} in ext["volumeMounts"]
    [job] = find(docs, "CronJob", "netsched-retrain")["spec"]["jobTemplate"]["spec"]["template"]["spec"][
        "containers"]
    assert "--gpu-table=/etc/netsched/gpus/gpus.json" in job["args"]
    assert not [d for d in render(bin_dir) if d["metadata"]["name"] == "netsched-gpus"]  # nothing by default
    bad = {"gpuCapabilities": {"X1": {"tflops": 5}}}
    failed = subprocess.run([bin_dir / "helm", "template", "x", CHART, "-f", "-"], input=yaml.safe_dump(bad),
                            capture_output=True, text=True)
    assert failed.returncode != 0 and "tflops" in failed.stderr


@pytest.mark.parametrize("topology, expected", [
    ({}, "netsched"),
    ({"preset": "gke"}, "gke"),
    ({"preset": "gke", "levels": [{"name": "block", "label": "example.com/block"},
                                  {"name": "rack", "label": "example.com/rack"}]},
     "block=example.com/block,rack=example.com/rack"),
], ids=["default", "preset", "levels-override-the-preset"])
def test_the_topology_reaches_the_extender_and_the_operator_as_levels_they_parse(bin_dir, topology, expected):
    docs = render(bin_dir, {"topology": topology})
    for component in ("netsched-extender", "netsched-operator"):
        args = container(docs, "Deployment", component)["args"]
        assert f"--topology={expected}" in args
        assert build_parser().parse_args(args).topology == Topology.parse(expected)


def test_dra_drivers_reach_the_extender_and_the_operator_and_their_resource_names_the_scheduler(bin_dir):
    default = render(bin_dir)
    [block] = scheduler_yaml(default, "netsched")["extenders"]
    assert block["managedResources"] == [{"name": "nvidia.com/gpu", "ignoredByScheduler": False}]
    extender_args = container(default, "Deployment", "netsched-extender")["args"]
    assert not any(a.startswith("--dra-gpu-driver") for a in extender_args)
    docs = render(bin_dir, {"dra": {"gpuDrivers": ["gpu.nvidia.com", "gpu.example.com"],
                                    "extendedResourceNames": ["nvidia.com/gpu", "example.com/gpu"]}})
    for component in ("netsched-extender", "netsched-operator"):
        args = container(docs, "Deployment", component)["args"]
        assert list(build_parser().parse_args(args).dra_gpu_drivers) == ["gpu.nvidia.com", "gpu.example.com"]
    [block] = scheduler_yaml(docs, "netsched")["extenders"]
    assert block["managedResources"] == [{"name": "nvidia.com/gpu", "ignoredByScheduler": False},
                                         {"name": "example.com/gpu", "ignoredByScheduler": False}]
    refused = run([bin_dir / "helm", "template", "x", CHART, "-f", "-"],
                  stdin=yaml.safe_dump({"dra": {"gpuDrivers": ["Not A Driver"]}}))
    assert refused.returncode != 0 and "/dra/gpuDrivers/0" in refused.stderr


def test_the_disruption_policy_reaches_the_operator_as_a_file_it_reads(bin_dir, tmp_path):
    priced = {"mode": "priced", "minGain": 5,
              "classes": [{"priorityClassName": "prod", "moveForLower": False}]}
    # the chart's default is the operator's own without a policy file; strict is one value away
    for values, expected in (({}, DisruptionPolicy()), ({"mode": "strict"}, DisruptionPolicy(mode="strict")),
                             (priced, DisruptionPolicy.from_doc(priced))):
        docs = render(bin_dir, {"operator": {"packer": {"policy": values}}} if values else {})
        written = tmp_path / "policy.yaml"
        written.write_text(find(docs, "ConfigMap", "netsched-packer-policy")["data"]["policy.yaml"])
        assert read_policy(written) == expected
        volumes = find(docs, "Deployment", "netsched-operator")["spec"]["template"]["spec"]["volumes"]
        assert {"name": "packer-policy", "configMap": {"name": "netsched-packer-policy"}} in volumes
    annotations = [find(render(bin_dir, v), "Deployment", "netsched-operator")["spec"]["template"]["metadata"]
                   ["annotations"]["checksum/packer-policy"]
                   for v in ({}, {"operator": {"packer": {"policy": priced}}})]
    assert annotations[0] != annotations[1]  # a new policy rolls the operator, which reads it at start


def test_records_on_an_empty_dir_without_persistence_and_no_pdb_for_a_single_extender(bin_dir):
    docs = render(bin_dir, {"operator": {"records": {"persistence": {"enabled": False}}},
                            "extender": {"replicas": 1}, "agent": {"enabled": False}})
    volumes = find(docs, "Deployment", "netsched-operator")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "records", "emptyDir": {}} in volumes
    kinds = {d["kind"] for d in docs}
    assert not kinds & {"PersistentVolumeClaim", "PodDisruptionBudget", "DaemonSet"}
    assert not [d for d in docs if d["metadata"]["name"] == "netsched-agent"]


@pytest.mark.parametrize("values, seconds", [
    pytest.param({}, "0", id="default-waits"),
    pytest.param({"operator": {"neverFitsTimeout": 3600}}, "3600", id="an-hour"),
    pytest.param({"operator": {"neverFitsTimeout": 0.5}}, "0.5", id="a-decimal"),
])
def test_the_never_fits_timeout_reaches_the_operator_and_a_negative_one_is_refused(bin_dir, values, seconds):
    args = container(render(bin_dir, values), "Deployment", "netsched-operator")["args"]
    assert f"--never-fits-timeout={seconds}" in args
    assert build_parser().parse_args(args).never_fits_timeout == float(seconds)
    ok([bin_dir / "helm", "lint", "--strict", CHART, "-f", "-"], stdin=yaml.safe_dump(values))
    refused = run([bin_dir / "helm", "template", "x", CHART, "-f", "-"],
                  stdin=yaml.safe_dump({"operator": {"neverFitsTimeout": -1}}))
    assert refused.returncode != 0
    assert "operator.neverFitsTimeout is -1; it must be at least 0" in refused.stderr


@pytest.mark.parametrize("values", [{}, CUSTOM_VALUES], ids=["defaults", "custom"])
def test_rendered_netsched_args_parse_with_the_real_cli(bin_dir, values):
    docs = render(bin_dir, values)
    parsed = {}
    for kind, name in (("Deployment", "operator"), ("Deployment", "extender"), ("DaemonSet", "agent")):
        parsed[name] = build_parser().parse_args(container(docs, kind, f"netsched-{name}")["args"])
    if values:
        cron = find(docs, "CronJob", "netsched-retrain")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        parsed["retrain"] = build_parser().parse_args(cron["containers"][0]["args"])
        retrain = parsed["retrain"]
        assert (retrain.data, retrain.models, retrain.holdout, retrain.threads) == (
            [Path("/var/lib/netsched/job-records.jsonl")], "/var/lib/netsched-models", 0.25, 2)
    assert parsed["operator"].records == Path("/var/lib/netsched/job-records.jsonl")
    assert parsed["operator"].leader_lease == ("netsched-system/netsched-operator" if values else None)
    expected_url = values["extender"]["telemetry"]["prometheusUrl"] if values else None
    assert parsed["extender"].prometheus_url == expected_url
    assert (parsed["agent"].port, parsed["agent"].probe_port) == (9101, 9102)


def test_scheduler_config_calls_the_extender_as_the_dev_cluster_does(bin_dir):
    docs = render(bin_dir, release="netsched", namespace="gpu-sched")
    config = scheduler_yaml(docs, "netsched")
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["profiles"] == [{"schedulerName": "netsched", "percentageOfNodesToScore": 100,
                                   "pluginConfig": [PACK_GPUS]}]
    assert config["leaderElection"] == {"leaderElect": True, "resourceNamespace": "gpu-sched",
                                        "resourceName": "netsched-scheduler"}
    # both over mutual TLS: the dev-cluster names its CA file, the chart carries the CA itself
    client = Path("/etc/netsched-client")
    tls = ExtenderTLS(Path("ca.crt"), client / "tls.crt", client / "tls.key")
    url = "https://netsched-extender.gpu-sched.svc:8888"
    dev_cluster_block = ExtenderSettings(url_prefix=url, tls=tls).block()
    [block] = config["extenders"]
    ca = find(docs, "ConfigMap", "netsched-extender-ca")["data"]["ca.crt"]
    assert block["tlsConfig"].pop("caData") == base64.b64encode(ca.encode()).decode()
    files = dev_cluster_block.pop("tlsConfig")
    assert block["tlsConfig"] == {k: v for k, v in files.items() if k != "caFile"}
    assert block | {"tlsConfig": None} == dev_cluster_block | {"tlsConfig": None}
    plain = scheduler_yaml(render(bin_dir, {"extender": {"tls": {"enabled": False}}}, namespace="gpu-sched"),
                           "netsched")
    assert plain["extenders"] == [ExtenderSettings(url_prefix=url.replace("https", "http")).block()]


def _decoded(data: str) -> bytes:
    return base64.b64decode(data)


def test_tls_with_the_certificate_the_chart_makes_gives_the_scheduler_its_ca(bin_dir):
    docs = render(bin_dir, {"extender": {"tls": {"enabled": True}}}, namespace="gpu-sched")
    secret = find(docs, "Secret", "netsched-extender-tls")
    assert secret["type"] == "kubernetes.io/tls"
    ca = x509.load_pem_x509_certificate(_decoded(secret["data"]["ca.crt"]))
    cert = x509.load_pem_x509_certificate(_decoded(secret["data"]["tls.crt"]))
    cert.verify_directly_issued_by(ca)
    key = serialization.load_pem_private_key(_decoded(secret["data"]["tls.key"]), password=None)
    assert key.public_key() == cert.public_key()
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(names.get_values_for_type(x509.DNSName)) == {
        "netsched-extender", "netsched-extender.gpu-sched", "netsched-extender.gpu-sched.svc",
        "netsched-extender.gpu-sched.svc.cluster.local"}

    [block] = scheduler_yaml(docs, "netsched")["extenders"]
    assert block["urlPrefix"] == "https://netsched-extender.gpu-sched.svc:8888"
    # enableHTTPS without a CA would skip verification
    assert block["enableHTTPS"] is True and _decoded(block["tlsConfig"]["caData"]) == ca.public_bytes(
        serialization.Encoding.PEM)
    assert find(docs, "ConfigMap", "netsched-extender-ca")["data"]["ca.crt"].strip() == \
        _decoded(secret["data"]["ca.crt"]).decode().strip()

    deployment = find(docs, "Deployment", "netsched-extender")
    ext = container(docs, "Deployment", "netsched-extender")
    parsed = build_parser().parse_args(ext["args"])
    assert (parsed.tls_cert_file, parsed.tls_private_key_file) == (
        Path("/etc/netsched/tls/tls.crt"), Path("/etc/netsched/tls/tls.key"))
    assert {"name": "tls", "mountPath": "/etc/netsched/tls", "readOnly": True} in ext["volumeMounts"]
    [volume] = [v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "tls"]
    assert volume["secret"]["secretName"] == "netsched-extender-tls"
    assert volume["secret"]["defaultMode"] == 0o440
    probes = [ext[p]["httpGet"] for p in ("startupProbe", "readinessProbe", "livenessProbe")]
    assert all(p["scheme"] == "HTTPS" and p["port"] == "metrics" for p in probes)  # no client certificate
    assert find(docs, "Service", "netsched-extender")["spec"]["ports"] == [
        {"name": "https", "port": 8888, "targetPort": "https"},
        {"name": "metrics", "port": 8889, "targetPort": "metrics"}]
    assert "checksum/tls-ca" in deployment["spec"]["template"]["metadata"]["annotations"]


def test_tls_with_the_users_secret_trusts_the_given_ca_and_makes_no_secret(bin_dir):
    ca, _, _ = serving_certificate("netsched-extender.netsched-system.svc", ["netsched-extender"])
    tls = {"enabled": True, "secretName": "my-extender-tls", "caBundle": ca.decode()}
    values = {"extender": {"tls": tls}, "serviceMonitor": {"enabled": True}}
    docs = render(bin_dir, values)
    secrets = [d["metadata"]["name"] for d in docs if d["kind"] == "Secret"]
    assert secrets == ["netsched-scheduler-client-tls", "netsched-operator-tls"]  # not the extender's
    [block] = scheduler_yaml(docs, "netsched")["extenders"]
    assert _decoded(block["tlsConfig"]["caData"]) == ca
    volumes = find(docs, "Deployment", "netsched-extender")["spec"]["template"]["spec"]["volumes"]
    assert [v["secret"]["secretName"] for v in volumes if v["name"] == "tls"] == ["my-extender-tls"]
    [endpoint] = find(docs, "ServiceMonitor", "netsched-extender")["spec"]["endpoints"]
    assert endpoint["port"] == "metrics" and endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"] == {"ca": {"configMap": {"name": "netsched-extender-ca", "key": "ca.crt"}},
                                     "serverName": "netsched-extender.netsched-system.svc"}
    # the metrics port wants a bearer token the API server accepts: Prometheus' own ServiceAccount token
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    # a new CA restarts the extender, which reads its certificate once
    other, _, _ = serving_certificate("x", ["x"])
    annotations = [find(render(bin_dir, v), "Deployment", "netsched-extender")["spec"]["template"]["metadata"]
                   ["annotations"]["checksum/tls-ca"]
                   for v in (values, {"extender": {"tls": tls | {"caBundle": other.decode()}}})]
    assert annotations[0] != annotations[1]


def _pem(data: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(_decoded(data))


def test_mutual_tls_gives_the_scheduler_a_client_certificate_only_the_extender_trusts(bin_dir):
    docs = render(bin_dir, namespace="gpu-sched")  # the default
    secret = find(docs, "Secret", "netsched-scheduler-client-tls")
    ca, cert = _pem(secret["data"]["ca.crt"]), _pem(secret["data"]["tls.crt"])
    cert.verify_directly_issued_by(ca)
    key = serialization.load_pem_private_key(_decoded(secret["data"]["tls.key"]), password=None)
    assert key.public_key() == cert.public_key()
    trusted = find(docs, "ConfigMap", "netsched-extender-client-ca")["data"]["ca.crt"]
    assert x509.load_pem_x509_certificate(trusted.encode()) == ca
    # a CA of its own: the extender takes no serving certificate for a client's
    serving = find(docs, "ConfigMap", "netsched-extender-ca")["data"]["ca.crt"]
    assert x509.load_pem_x509_certificate(serving.encode()) != ca

    extender = find(docs, "Deployment", "netsched-extender")["spec"]["template"]
    client_ca = {"name": "client-ca", "configMap": {"name": "netsched-extender-client-ca"}}
    assert client_ca in extender["spec"]["volumes"]
    assert {"name": "client-ca", "mountPath": "/etc/netsched/client-ca", "readOnly": True} in \
        extender["spec"]["containers"][0]["volumeMounts"]
    assert "checksum/client-ca" in extender["metadata"]["annotations"]
    scheduler = find(docs, "Deployment", "netsched-scheduler")["spec"]["template"]
    [volume] = [v for v in scheduler["spec"]["volumes"] if v["name"] == "extender-client"]
    items = [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}]  # not the CA's
    assert volume["secret"] == {"secretName": "netsched-scheduler-client-tls", "defaultMode": 0o440,
                                "items": items}
    assert {"name": "extender-client", "mountPath": "/etc/netsched-client", "readOnly": True} in \
        scheduler["spec"]["containers"][0]["volumeMounts"]
    assert "checksum/client-tls" in scheduler["metadata"]["annotations"]  # a new certificate restarts it
    [block] = scheduler_yaml(docs, "netsched")["extenders"]
    assert (block["tlsConfig"]["certFile"], block["tlsConfig"]["keyFile"]) == (
        "/etc/netsched-client/tls.crt", "/etc/netsched-client/tls.key")


@pytest.mark.parametrize("tls, https, mutual", [
    pytest.param({"clientAuth": False}, True, False, id="https-any-client"),
    pytest.param({"enabled": False}, False, False, id="plain-http"),
])
def test_the_switch_turns_client_certificates_or_all_tls_off(bin_dir, tls, https, mutual):
    docs = render(bin_dir, {"extender": {"tls": tls}})
    args = container(docs, "Deployment", "netsched-extender")["args"]
    assert any(a.startswith("--tls-cert-file=") for a in args) == https
    assert not any(a.startswith("--client-ca-file=") for a in args)
    assert not [d for d in docs if d["metadata"]["name"] in ("netsched-scheduler-client-tls",
                                                              "netsched-extender-client-ca")]
    [block] = scheduler_yaml(docs, "netsched")["extenders"]
    assert block["enableHTTPS"] is https and "certFile" not in block.get("tlsConfig", {})
    assert "--metrics-port=8889" in args  # metrics and decisions stay apart, authorised, either way


def test_mutual_tls_with_the_users_client_certificate_trusts_the_given_ca_and_makes_none(bin_dir):
    ca, _, _ = client_certificate("netsched-scheduler")
    tls = {"clientSecretName": "my-client", "clientCABundle": ca.decode()}
    docs = render(bin_dir, {"extender": {"tls": tls}})
    secrets = {d["metadata"]["name"] for d in docs if d["kind"] == "Secret"}
    assert "netsched-scheduler-client-tls" not in secrets
    trusted = find(docs, "ConfigMap", "netsched-extender-client-ca")["data"]["ca.crt"]
    assert trusted.strip() == ca.decode().strip()
    volumes = find(docs, "Deployment", "netsched-scheduler")["spec"]["template"]["spec"]["volumes"]
    assert [v["secret"]["secretName"] for v in volumes if v["name"] == "extender-client"] == ["my-client"]


def test_the_webhook_is_the_operators_behind_its_service_with_a_certificate_the_api_server_trusts(bin_dir):
    docs = render(bin_dir, namespace="gpu-sched")
    config = find(docs, "MutatingWebhookConfiguration", "netsched-gang-gate")
    [hook] = config["webhooks"]
    # the same rules, scope and conditions as the configuration the dev-cluster's tests register
    [same] = webhook_configuration("netsched-gang-gate", {}, "netsched",
                                   exclude_namespaces=("kube-system", "gpu-sched"))["webhooks"]
    assert {k: v for k, v in hook.items() if k != "clientConfig"} == {
        k: v for k, v in same.items() if k != "clientConfig"}
    assert hook["clientConfig"]["service"] == {"name": "netsched-operator", "namespace": "gpu-sched",
                                               "path": "/gang-gate", "port": 443}
    secret = find(docs, "Secret", "netsched-operator-tls")
    ca = x509.load_pem_x509_certificate(_decoded(hook["clientConfig"]["caBundle"]))
    cert = x509.load_pem_x509_certificate(_decoded(secret["data"]["tls.crt"]))
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "netsched-operator.gpu-sched.svc" in names.get_values_for_type(x509.DNSName)

    operator = container(docs, "Deployment", "netsched-operator")
    parsed = build_parser().parse_args(operator["args"])
    assert (parsed.webhook_port, parsed.webhook_cert_file, parsed.webhook_key_file) == (
        9443, Path("/etc/netsched/webhook/tls.crt"), Path("/etc/netsched/webhook/tls.key"))
    assert {"name": "webhook", "containerPort": 9443} in operator["ports"]
    assert {"name": "webhook", "port": 443, "targetPort": "webhook"} in find(
        docs, "Service", "netsched-operator")["spec"]["ports"]
    volumes = find(docs, "Deployment", "netsched-operator")["spec"]["template"]["spec"]["volumes"]
    [tls] = [v["secret"] for v in volumes if v["name"] == "webhook-tls"]
    assert (tls["secretName"], tls["defaultMode"]) == ("netsched-operator-tls", 0o440)


def test_the_webhook_values_reach_its_configuration_and_disabled_it_leaves_nothing(bin_dir):
    ca, _, _ = serving_certificate("netsched-operator.netsched-system.svc", ["netsched-operator"])
    docs = render(bin_dir, {**CUSTOM_VALUES, "operator": {"webhook": CUSTOM_VALUES["operator"]["webhook"] | {
        "tls": {"secretName": "my-webhook-tls", "caBundle": ca.decode()}}}})
    [hook] = find(docs, "MutatingWebhookConfiguration", "netsched-gang-gate")["webhooks"]
    excluded = ("kube-system", "netsched-system", "batch-infra")
    [same] = webhook_configuration("x", {}, "netsched-chart-test", opt_in=False, failure_policy="Ignore",
                                   exclude_namespaces=excluded)["webhooks"]
    assert hook["namespaceSelector"] == same["namespaceSelector"]
    assert hook["matchConditions"] == same["matchConditions"]  # the chart's scheduler.name
    assert (hook["failurePolicy"], hook["timeoutSeconds"]) == ("Ignore", 3)
    assert hook["objectSelector"] == {"matchLabels": {"team": "ml"}}
    assert _decoded(hook["clientConfig"]["caBundle"]) == ca
    assert not [d for d in docs if d["kind"] == "Secret" and "operator" in d["metadata"]["name"]]

    off = render(bin_dir, {"operator": {"webhook": {"enabled": False}}})
    assert not [d for d in off if d["kind"] == "MutatingWebhookConfiguration"]
    assert not [a for a in container(off, "Deployment", "netsched-operator")["args"] if "webhook" in a]
    assert [p["name"] for p in find(off, "Service", "netsched-operator")["spec"]["ports"]] == ["metrics"]


def test_the_hard_limits_webhook_is_the_operators_for_pods_asking_for_a_data_limit(bin_dir):
    docs = render(bin_dir, {"operator": {"webhook": {"excludeNamespaces": ["batch-infra"],
                                                     "objectSelector": {"matchLabels": {"team": "ml"}}}}},
                  namespace="gpu-sched")
    [hook] = find(docs, "MutatingWebhookConfiguration", "netsched-hard-limits")["webhooks"]
    excluded = ("kube-system", "gpu-sched", "batch-infra")
    [same] = hard_limits_configuration("x", {}, "netsched", exclude_namespaces=excluded)["webhooks"]
    assert {k: v for k, v in hook.items() if k not in ("clientConfig", "objectSelector")} == {
        k: v for k, v in same.items() if k != "clientConfig"}
    assert hook["objectSelector"] == {"matchLabels": {"team": "ml"}}
    assert hook["clientConfig"]["service"] == {"name": "netsched-operator", "namespace": "gpu-sched",
                                               "path": "/hard-limits", "port": 443}
    [gate] = find(docs, "MutatingWebhookConfiguration", "netsched-gang-gate")["webhooks"]
    assert hook["clientConfig"]["caBundle"] == gate["clientConfig"]["caBundle"]


def test_rbac_is_the_cluster_rbac_module_and_grants_no_secrets(bin_dir):
    docs = render(bin_dir)
    assert find(docs, "ClusterRole", "netsched-extender")["rules"] == EXTENDER_RULES
    assert find(docs, "ClusterRole", "netsched-operator")["rules"] == OPERATOR_RULES
    assert find(docs, "ClusterRole", "netsched-agent")["rules"] == [  # lists only: discovery never watches
        {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["list"]},
        {"apiGroups": ["netsched.io"], "resources": ["packingplans"], "verbs": ["list"]}]
    assert not [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "netsched-agent"]
    rules = [r for d in docs if d["kind"] in ("Role", "ClusterRole") for r in d["rules"]]
    assert not [r for r in rules
                if "secrets" in r.get("resources", []) or "*" in r.get("resources", []) + r["verbs"]]
    # the extender's metrics port readers: bound to nobody by the chart, paths only
    assert find(docs, "ClusterRole", "netsched-extender-reader")["rules"] == [
        {"nonResourceURLs": ["/metrics", "/debug/decisions", "/debug/decisions/*"], "verbs": ["get"]}]
    assert "netsched-extender-reader" not in {d["roleRef"]["name"] for d in docs if "roleRef" in d}
    bound = {d["roleRef"]["name"] for d in docs if d["kind"] == "ClusterRoleBinding"}
    assert {"system:kube-scheduler", "system:volume-scheduler"} <= bound


def test_retraining_reads_the_records_claim_and_writes_a_models_claim_the_extender_can_serve(bin_dir):
    docs = render(bin_dir, CUSTOM_VALUES)  # its extender serves from the claim netsched-models
    cron = find(docs, "CronJob", "netsched-retrain")
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert cron["spec"]["schedule"] == "30 2 * * 0" and pod["restartPolicy"] == "Never"
    serving = find(docs, "Deployment", "netsched-extender")["spec"]["template"]["spec"]["containers"][0]
    assert pod["containers"][0]["image"] == serving["image"] + "-train"  # the image with scikit-learn
    claims = {v["name"]: v["persistentVolumeClaim"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
    assert claims == {"records": {"claimName": "netsched-operator-records", "readOnly": True},
                      "models": {"claimName": "netsched-models"}}
    assert find(docs, "PersistentVolumeClaim", "netsched-models")["spec"]["accessModes"] == ["ReadWriteMany"]
    assert find(docs, "ServiceAccount", "netsched-retrain")["automountServiceAccountToken"] is False
    assert not [d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")
                and any(s["name"] == "netsched-retrain" for s in d.get("subjects") or [])]
    extender = find(docs, "Deployment", "netsched-extender")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "models", "persistentVolumeClaim": {"claimName": "netsched-models", "readOnly": True}} \
        in extender


def test_servicemonitors_select_a_service_port_of_their_component(bin_dir):
    docs = render(bin_dir, CUSTOM_VALUES)
    monitors = [d for d in docs if d["kind"] == "ServiceMonitor"]
    assert sorted(m["metadata"]["name"] for m in monitors) == [
        "netsched-agent", "netsched-extender", "netsched-operator"]
    services = [d for d in docs if d["kind"] == "Service"]
    for monitor in monitors:
        assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
        assert monitor["metadata"]["labels"]["release"] == "prometheus"
        selector = monitor["spec"]["selector"]["matchLabels"]
        [service] = [s for s in services if selector.items() <= s["metadata"]["labels"].items()]
        [endpoint] = monitor["spec"]["endpoints"]
        assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
        assert endpoint["path"] == "/metrics"


def test_dashboard_queries_only_metrics_the_components_export(bin_dir):
    dashboard = find(render(bin_dir), "ConfigMap", "netsched-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    panels = json.loads(dashboard["data"]["netsched.json"])["panels"]
    used = {re.sub(r"_(bucket|total)$", "", name)
            for p in panels for t in p["targets"] for name in re.findall(r"netsched_\w+", t["expr"])}
    exported = {m.name for r in (Metrics().registry, OperatorMetrics().registry, AgentMetrics().registry)
                for m in r.collect()}
    assert used <= exported, f"not exported by any component: {used - exported}"
    assert {"netsched_extender_request_seconds", "netsched_gpujobs_finished",
            "netsched_link_bandwidth_bytes_per_second", "netsched_link_rtt_seconds",
            # waiting jobs, the packer, the extender's errors
            "netsched_gpujobs", "netsched_gpujob_queue_seconds", "netsched_gpujob_oldest_waiting_seconds",
            "netsched_gangs", "netsched_gang_oldest_waiting_seconds",  # waiting gangs of every kind
            "netsched_packing_plans_finished", "netsched_packer_evictions", "netsched_packer_solve_seconds",
            "netsched_extender_requests", "netsched_extender_model_fallbacks",
            # what netsched won this week (netsched report)
            "netsched_report_estimated_gain_ratio", "netsched_report_gpu_hours"} <= used
    assert len({p["id"] for p in panels}) == len(panels)
    cells = [(p["gridPos"]["x"] + dx, p["gridPos"]["y"] + dy) for p in panels
             for dx in range(p["gridPos"]["w"]) for dy in range(p["gridPos"]["h"])]
    assert len(cells) == len(set(cells)), "panels overlap"


@pytest.mark.parametrize("values, message", [
    pytest.param({"extender": {"replicas": "two"}}, "at '/extender/replicas': got string, want integer",
                 id="replicas-not-a-number"),
    pytest.param({"extendr": {"replicas": 2}}, "at '': additional properties 'extendr' not allowed",
                 id="unknown-top-level-key"),
    pytest.param({"operator": {"replicas": 0}}, "operator.replicas is 0; it must be at least 1",
                 id="no-operator"),
    pytest.param({"operator": {"packer": {"budgetSeconds": 0}}},
                 "operator.packer.budgetSeconds is 0; it must be more than 0 and at most 60",
                 id="packer-without-time"),
    pytest.param({"operator": {"packer": {"policy": {"mode": "lenient"}}}},
                 "at '/operator/packer/policy/mode': value must be one of 'strict', 'priced'",
                 id="unknown-policy-mode"),
    pytest.param({"operator": {"packer": {"policy": {"mode": "priced",
                                                     "classes": [{"moveForLower": False}]}}}},
                 "operator.packer.policy.classes[0] names no class; give priorityClassName (e.g. high) or "
                 "priority (e.g. 1000)", id="policy-rule-without-class"),
    pytest.param({"image": {"pullPolicy": "Sometimes"}},
                 "at '/image/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'",
                 id="bad-pull-policy"),
    pytest.param({"image": {"repository": None}}, "at '/image': missing property 'repository'",
                 id="image-without-repository"),
    pytest.param({"scheduler": {"extender": {"httpTimeout": "2 seconds"}}},
                 'scheduler.extender.httpTimeout is "2 seconds"; it must be a Go duration such as 2s, 500ms',
                 id="timeout-not-a-duration"),
    pytest.param({"agent": {"probePort": 9101}}, "agent.port and agent.probePort must differ",
                 id="agent-ports-clash"),
    pytest.param({"retrain": {"enabled": True}, "operator": {"records": {"persistence": {"enabled": False}}}},
                 "retrain.enabled needs operator.records.persistence.enabled", id="retrain-without-records"),
    pytest.param({"retrain": {"schedule": "nightly"}},
                 "at '/retrain/schedule': 'nightly' does not match pattern", id="retrain-schedule"),
    pytest.param({"extender": {"model": {"source": "pvc"}}},
                 "extender.model.source is pvc but extender.model.claimName is empty; name the "
                 "PersistentVolumeClaim", id="model-pvc-without-claim"),
    pytest.param({"extender": {"tls": {"enabled": True, "secretName": "mine"}}},
                 'extender.tls.secretName is "mine" but extender.tls.caBundle is empty; set caBundle',
                 id="tls-secret-without-ca"),
    pytest.param({"extender": {"tls": {"enabled": True, "secretName": "mine", "caBundle": "trust me"}}},
                 "at '/extender/tls/caBundle': 'trust me' does not match pattern", id="tls-ca-not-pem"),
    pytest.param({"extender": {"tls": {"clientSecretName": "mine"}}},
                 'extender.tls.clientSecretName is "mine" but extender.tls.clientCABundle is empty',
                 id="client-secret-without-ca"),
    pytest.param({"extender": {"tls": {"clientSecretName": "mine", "clientCABundle": "trust me"}}},
                 "at '/extender/tls/clientCABundle': 'trust me' does not match pattern",
                 id="client-ca-not-pem"),
    pytest.param({"operator": {"webhook": {"failurePolicy": "Open"}}},
                 "at '/operator/webhook/failurePolicy': value must be one of 'Fail', 'Ignore'",
                 id="webhook-failure-policy"),
    pytest.param({"operator": {"webhook": {"timeoutSeconds": 60}}},
                 "at '/operator/webhook/timeoutSeconds': maximum: got 60, want 30", id="webhook-timeout"),
    pytest.param({"operator": {"webhook": {"namespaces": "labelled"}}},
                 "at '/operator/webhook/namespaces': value must be one of 'opted-in', 'all'",
                 id="webhook-namespaces"),
    pytest.param({"operator": {"webhook": {"tls": {"secretName": "mine"}}}},
                 'operator.webhook.tls.secretName is "mine" but operator.webhook.tls.caBundle is empty',
                 id="webhook-secret-without-ca"),
    pytest.param({"extender": {"model": {"source": "s3"}}},
                 "at '/extender/model/source': value must be one of 'image', 'pvc', 'none'",
                 id="unknown-model-source"),
    pytest.param({"topology": {"preset": "aws"}},
                 "at '/topology/preset': value must be one of 'netsched', 'gke', 'eks', 'nvidia'",
                 id="unknown-topology-preset"),
    pytest.param({"topology": {"levels": [{"name": "Rack", "label": "example.com/rack"}]}},
                 "at '/topology/levels/0/name': 'Rack' does not match pattern", id="topology-level-name"),
    pytest.param({"topology": {"levels": [{"name": "rack", "label": "example.com/my rack"}]}},
                 "at '/topology/levels/0/label': 'example.com/my rack' does not match pattern",
                 id="topology-level-label"),
    pytest.param({"topology": {"levels": [{"name": "rack"}]}},
                 "at '/topology/levels/0': missing property 'label'", id="topology-level-without-label"),
    pytest.param({"topology": {"levels": [{"name": f"l{i}", "label": f"example.com/l{i}"}
                                          for i in range(7)]}},
                 "at '/topology/levels': maxItems: got 7, want 6", id="topology-too-deep"),
    pytest.param({"topology": {"levels": [{"name": "node", "label": "example.com/host"}]}},
                 'topology.levels[0].name is "node"; it must not be node, far or endpoint',
                 id="topology-level-named-node"),
    pytest.param({"topology": {"levels": [{"name": "a", "label": "example.com/x"},
                                          {"name": "b", "label": "example.com/x"}]}},
                 'topology.levels[1].label is "example.com/x", as is topology.levels[0].label; '
                 "each level needs its own", id="topology-label-twice"),
])
def test_bad_values_are_refused_with_a_message_naming_the_value(bin_dir, values, message):
    done = run([bin_dir / "helm", "template", "netsched", CHART, "-f", "-"], stdin=yaml.safe_dump(values))
    assert done.returncode != 0
    assert message in done.stderr


# What users set most, as they set it (--set), refused in words that say what the value is for.
PLAIN_MESSAGES = [
    ("operator.replicas=0", "operator.replicas is 0; it must be at least 1: how many operator pods run"),
    ("extender.replicas=0", "extender.replicas is 0; it must be at least 1: how many extender pods"),
    ("scheduler.replicas=-1", "scheduler.replicas is -1; it must be at least 1: how many netsched"),
    ("operator.packer.budgetSeconds=0", "operator.packer.budgetSeconds is 0; it must be more than 0 and "
     "at most 60: seconds each packer solve may take, e.g. 0.5"),
    ("operator.packer.budgetSeconds=90.5", "operator.packer.budgetSeconds is 90.5; it must be more than 0"),
    ("operator.packer.planDeadlineSeconds=2", "operator.packer.planDeadlineSeconds is 2; it must be at "
     "least 5 and at most 3600"),
    ("operator.intervalSeconds=-0.5", "operator.intervalSeconds is -0.5; it must be more than 0: seconds "
     "between two reconciles"),
    ("extender.maxCacheAge=0", "extender.maxCacheAge is 0; it must be more than 0"),
    ("extender.holdSeconds=0", "extender.holdSeconds is 0; it must be more than 0: seconds a job's first "
     "node keeps its room"),
    ("retrain.holdout=1", "retrain.holdout is 1; it must be more than 0 and less than 1: the share of the "
     "most recent jobs"),
    ("agent.port=70000", "agent.port is 70000; it must be at least 1 and at most 65535: a TCP port"),
    ("scheduler.extender.httpTimeout=2seconds", 'scheduler.extender.httpTimeout is "2seconds"; it must be '
     "a Go duration such as 2s, 500ms or 1m30s"),
    ("scheduler.image.tag=registry.k8s.io/kube-scheduler:v1.31.0", "scheduler.image.tag is "
     '"registry.k8s.io/kube-scheduler:v1.31.0"; it must be an image tag alone (letters, digits, '
     "'.', '_', '-'; the repository goes in scheduler.image.repository), such as v1.31.4"),
    ("image.tag=netsched:0.2.0", 'image.tag is "netsched:0.2.0"; it must be an image tag alone'),
    ("gpuCapabilities.NVIDIA-X.tflops16=0", "gpuCapabilities.NVIDIA-X.tflops16 is 0; it must be more than 0"),
    # what the schema said as "got number, want string", "minLength: got 0" and "'oneOf' failed"
    ("scheduler.extender.httpTimeout=2", 'scheduler.extender.httpTimeout is "2"; it must be a Go duration '
     "such as 2s"),
    ("image.repository=", "image.repository is empty; set it to the registry and name of the netsched image"),
    ("operator.packer.policy.classes[0].moveForLower=true",
     "operator.packer.policy.classes[0] names no class"),
]


@pytest.mark.parametrize("setting, message", PLAIN_MESSAGES, ids=[s.split("=")[0] for s, _ in PLAIN_MESSAGES])
def test_the_values_users_set_most_are_refused_in_plain_words(bin_dir, setting, message):
    done = run([bin_dir / "helm", "template", "netsched", CHART, "--set", setting])
    assert done.returncode == 1
    assert f"(netsched/templates/values-check.yaml:1:4): {message}" in done.stderr, done.stderr


# Every decimal of values.schema.json, as `--set` hands it over: the string "0.5".
DECIMALS = {"operator.intervalSeconds": "0.5", "operator.forecastIntervalSeconds": "7.5",
            "operator.neverFitsTimeout": "90.5", "operator.leaseDurationSeconds": "7.5",
            "operator.packer.budgetSeconds": "0.5", "operator.packer.waitSeconds": "2.5",
            "operator.packer.cooldownSeconds": "0.5", "operator.packer.policy.pointsPerMinute": "0.5",
            "extender.maxCacheAge": "12.5", "extender.holdSeconds": "7.5",
            "extender.telemetry.maxAgeSeconds": "60.5",
            "extender.model.reloadSeconds": "2.5", "retrain.holdout": "0.25", "agent.interval": "7.5",
            "gpuCapabilities.NVIDIA-X.tflops16": "989.5", "gpuCapabilities.NVIDIA-X.tflopsFp32": "60.5",
            "gpuCapabilities.NVIDIA-X.memoryBandwidthGBps": "3350.5",
            "gpuCapabilities.NVIDIA-X.memoryGiB": "79.5"}


def test_decimals_set_with_set_reach_every_component_as_numbers(bin_dir, tmp_path):
    schema = (CHART / "values.schema.json").read_text()
    assert schema.count('"$ref": "#/definitions/decimal"') == len(DECIMALS)  # none left out here
    sets = [arg for name, value in {**DECIMALS, "retrain.enabled": "true", "operator.replicas": "2"}.items()
            for arg in ("--set", f"{name}={value}")]
    assert "1 chart(s) linted, 0 chart(s) failed" in ok([bin_dir / "helm", "lint", "--strict", CHART, *sets])
    docs = [d for d in yaml.safe_load_all(ok([bin_dir / "helm", "template", "netsched", CHART, *sets])) if d]

    def args(kind: str, name: str) -> argparse.Namespace:
        return build_parser().parse_args(container(docs, kind, f"netsched-{name}")["args"])

    operator = vars(args("Deployment", "operator"))
    assert [operator[k] for k in ("interval", "forecast_interval", "never_fits_timeout", "packer.budget",
                                  "packer.wait", "packer.cooldown", "telemetry_max_age",
                                  "lease_duration")] == [
        0.5, 7.5, 90.5, 0.5, 2.5, 0.5, 60.5, 7.5]
    extender = args("Deployment", "extender")
    assert (extender.max_cache_age, extender.hold_seconds, extender.model_reload_seconds) == (12.5, 7.5, 2.5)
    assert args("DaemonSet", "agent").interval == 7.5
    cron = find(docs, "CronJob", "netsched-retrain")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert build_parser().parse_args(cron["containers"][0]["args"]).holdout == 0.25
    assert parse_table(find(docs, "ConfigMap", "netsched-gpus")["data"]["gpus.json"], "chart") == {
        "NVIDIA-X": GpuCapability(989.5, 60.5, 3350.5, 79.5)}
    policy = tmp_path / "policy.yaml"
    policy.write_text(find(docs, "ConfigMap", "netsched-packer-policy")["data"]["policy.yaml"])
    assert read_policy(policy).points_per_minute == 0.5


TESTED = read_versions(kubernetes=default_minor())["KUBERNETES_VERSION"]  # the chart's fallback tag


@pytest.mark.parametrize("args, tag", [
    pytest.param(["--kube-version", "1.30.2"], "v1.30.2", id="the-clusters-version"),
    pytest.param(["--kube-version", "v1.31.4+k3s1"], "v1.31.4", id="without-a-vendor-suffix"),
    pytest.param(["--kube-version", "1.30.2", "--set", "scheduler.image.tag=v1.31.0"], "v1.31.0",
                 id="overridden"),
    pytest.param(["--kube-version", "1.29.5"], TESTED, id="below-the-minimum"),
    pytest.param([], TESTED, id="no-cluster-version"),  # helm template says v1.20.0
])
def test_the_scheduler_image_follows_the_clusters_version_unless_set(bin_dir, args, tag):
    docs = [d for d in yaml.safe_load_all(ok([bin_dir / "helm", "template", "netsched", CHART, *args])) if d]
    image = container(docs, "Deployment", "netsched-scheduler")["image"]
    assert image == f"registry.k8s.io/kube-scheduler:{tag}"
    assert "0 chart(s) failed" in ok([bin_dir / "helm", "lint", "--strict", CHART, *args])


# ---- against the dev-cluster ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def release(bin_dir, dev_cluster):
    """A unique release name and namespace, so cluster-scoped names collide with nothing."""
    name = f"netsched-t{uuid.uuid4().hex[:6]}"
    ok(kubectl(bin_dir, dev_cluster, "create", "namespace", name))
    yield name
    run(kubectl(bin_dir, dev_cluster, "delete", "namespace", name, "--wait=false"))


def test_the_chart_crds_are_the_source_files_and_accepted(bin_dir, dev_cluster):
    for source in (ROOT / "netsched" / "crds").glob("*.yaml"):
        assert (CHART / "crds" / source.name).read_bytes() == source.read_bytes(), source.name
    out = ok(kubectl(bin_dir, dev_cluster, "apply", "--dry-run=server", "-f", CHART / "crds"))
    for crd in ("gpujobs.netsched.io", "packingplans.netsched.io"):
        assert f"customresourcedefinition.apiextensions.k8s.io/{crd}" in out


@pytest.mark.parametrize("values", [{}, CUSTOM_VALUES], ids=["defaults", "custom"])
def test_the_apiserver_accepts_every_rendered_object(bin_dir, dev_cluster, release, values):
    docs = render(bin_dir, values, release=release, namespace=release)
    # No ServiceMonitor CRD here (no Prometheus Operator): those are checked by their own test.
    docs = [d for d in docs if d["kind"] != "ServiceMonitor"]
    out = ok(kubectl(bin_dir, dev_cluster, "apply", "--dry-run=server", "-f", "-"), yaml.safe_dump_all(docs))
    assert out.count("(server dry run)") == len(docs)


RWX_RECORDS = {"records": {"persistence": {"accessModes": ["ReadWriteMany"]}}}
SERVED_MODELS = {"model": {"source": "pvc", "claimName": "{release}-models", "path": "current.json"}}


@pytest.mark.parametrize("values, notes, warnings", [
    ({}, ["The extender places by topology only", "pods use\n    schedulerName: netsched and",
          "you opt in:\n      kubectl label namespace <namespace> netsched.io/gang-scheduling=enabled"],
     []),
    (CUSTOM_VALUES, ["The operator runs 2 replicas; the one that holds Lease",
                     "pods use\n    schedulerName: netsched-chart-test and",
                     "gang-gated as they are, in every namespace but kube-system and"], []),
    ({"operator": {"replicas": 2}}, [],
     ["WARNING: operator.replicas is 2 but the job-records claim is ReadWriteOnce, not ReadWriteMany: "
      "replicas on different nodes cannot all mount it. Set operator.records.persistence.accessModes to "
      "[ReadWriteMany]"]),
    ({"retrain": {"enabled": True}}, [],
     ["WARNING: retrain.enabled: the retrain CronJob mounts the job-records claim beside the operator, but "
      "it is ReadWriteOnce, not ReadWriteMany"]),
    ({"retrain": {"enabled": True, "models": {"accessModes": ["ReadWriteOnce"]}}, "operator": RWX_RECORDS,
      "extender": SERVED_MODELS}, [],
     ["WARNING: the extender reads models from claim {release}-models, which the retrain CronJob writes, "
      "but it is ReadWriteOnce, not ReadWriteMany"]),
    ({"extender": {"tls": {"enabled": False}}}, [],
     ["WARNING: extender.tls.enabled is false: any pod that reaches port 8888 of {release}-extender can "
      "send scheduling requests that change netsched's placements, and bearer tokens to its metrics port "
      "travel in the clear."]),
    ({"extender": {"tls": {"clientAuth": False}}}, [],
     ["WARNING: extender.tls.clientAuth is false: any pod that reaches port 8888 of {release}-extender can "
      "send scheduling requests that change netsched's placements. Keep it only"]),
], ids=["defaults", "custom", "operator-replicas-on-rwo", "retrain-on-rwo-records", "served-models-on-rwo",
        "plain-http", "any-client"])
def test_helm_install_dry_run_succeeds_and_notes_fit_the_values(bin_dir, dev_cluster, release, values, notes,
                                                                warnings):
    # ServiceMonitor has no CRD here; everything else goes through helm's own install path.
    values = yaml.safe_load(yaml.safe_dump(values).replace("{release}", release))
    values = values | {"serviceMonitor": {"enabled": False}}
    out = ok([bin_dir / "helm", f"--kubeconfig={dev_cluster.kubeconfig}", "install", release, CHART,
              "-n", release, "--dry-run=server", "-f", "-"], stdin=yaml.safe_dump(values))
    assert "STATUS: pending-install" in out and all(note in out for note in notes), out
    flowed = " ".join(out.split())
    assert [w.replace("{release}", release) in flowed for w in warnings] == [True] * len(warnings), out
    assert flowed.count("WARNING") == len(warnings), out


@pytest.fixture(scope="module")
def applied_rbac(bin_dir, dev_cluster, release, tmp_path_factory):
    """The chart's ServiceAccounts and RBAC (custom values), really applied; removed afterwards."""
    docs = render(bin_dir, CUSTOM_VALUES, release=release, namespace=release)
    manifest = tmp_path_factory.mktemp("rbac") / "rbac.yaml"
    manifest.write_text(yaml.safe_dump_all([d for d in docs if d["kind"] in RBAC_KINDS]))
    ok(kubectl(bin_dir, dev_cluster, "apply", "-f", manifest))
    yield docs
    run(kubectl(bin_dir, dev_cluster, "delete", "-f", manifest, "--ignore-not-found", "--wait=false"))


CAN_I = [  # (component, kubectl auth can-i arguments, allowed)
    ("extender", "list pods -A", True),
    ("extender", "watch nodes", True),
    ("extender", "create events -n default", True),
    ("extender", "delete pods -n default", False),
    ("extender", "watch packingplans.netsched.io", True),
    ("extender", "create packingplans.netsched.io", False),
    ("extender", "get secrets -n {ns}", False),
    ("extender", "create tokenreviews.authentication.k8s.io", True),  # the metrics port's callers
    ("extender", "create subjectaccessreviews.authorization.k8s.io", True),
    ("operator", "create pods -n default", True),
    ("operator", "delete pods -n default", True),
    ("operator", "patch gpujobs.netsched.io --subresource=status -n default", True),
    ("operator", "update leases.coordination.k8s.io/{ns}-operator -n {ns}", True),
    ("operator", "update leases.coordination.k8s.io/{ns}-scheduler -n {ns}", False),
    ("operator", "create leases.coordination.k8s.io -n {ns}", False),
    ("operator", "create pods --subresource=eviction -n default", True),
    ("operator", "create packingplans.netsched.io", True),
    ("operator", "list poddisruptionbudgets.policy -A", True),
    ("operator", "delete poddisruptionbudgets.policy -n default", False),
    ("operator", "get secrets -n {ns}", False),
    ("agent", "list nodes", True),
    ("agent", "list pods -n default", True),  # this node's pods and their gangs, in any namespace
    ("agent", "list packingplans.netsched.io", True),
    ("agent", "watch pods -n {ns}", False),  # discovery lists, now and then, from the watch cache
    ("agent", "get nodes", False),
    ("agent", "create pods -n {ns}", False),
    ("agent", "get secrets -n {ns}", False),
    ("scheduler", "create pods --subresource=binding -n default", True),
    ("scheduler", "update leases.coordination.k8s.io/{ns}-scheduler -n {ns}", True),
    ("scheduler", "update leases.coordination.k8s.io/kube-controller-manager -n kube-system", False),
    ("scheduler", "get configmaps/extension-apiserver-authentication -n kube-system", True),
    ("scheduler", "get secrets -n {ns}", False),
]


@pytest.mark.parametrize("sa, check, allowed", [
    pytest.param(*case, id=f"{case[0]}-{'can' if case[2] else 'cannot'}-{'-'.join(case[1].split()[:2])}")
    for case in CAN_I])
def test_each_service_account_can_do_what_its_component_needs_and_no_more(
        bin_dir, dev_cluster, release, applied_rbac, sa, check, allowed):
    who = f"--as=system:serviceaccount:{release}:{release}-{sa}"
    done = run(kubectl(bin_dir, dev_cluster, "auth", "can-i", *check.format(ns=release).split(), who))
    assert done.stdout.strip() == ("yes" if allowed else "no"), done.stderr


def test_kube_scheduler_runs_the_rendered_config_with_the_rendered_rbac(bin_dir, dev_cluster, release,
                                                                       applied_rbac, tmp_path):
    """The real kube-scheduler, as the chart's ServiceAccount, with the chart's args and config:
    it starts, serves /healthz, wins the Lease the chart grants it and is never forbidden anything."""
    token = ok(kubectl(bin_dir, dev_cluster, "create", "token", f"{release}-scheduler", "-n", release))
    sa_kubeconfig = tmp_path / "sa.kubeconfig"
    kubeconfig = yaml.safe_load((dev_cluster.directory / "kube-scheduler.kubeconfig").read_text())
    kubeconfig["users"][0]["user"] = {"token": token.strip()}
    sa_kubeconfig.write_text(yaml.safe_dump(kubeconfig))
    config = scheduler_yaml(applied_rbac, release)
    config["clientConnection"] = {"kubeconfig": str(sa_kubeconfig)}
    # the client certificate for the extender that the chart makes, where the pod mounts it (read at start)
    client_tls = find(applied_rbac, "Secret", f"{release}-scheduler-client-tls")["data"]
    for name in ("tls.crt", "tls.key"):
        (tmp_path / name).write_bytes(base64.b64decode(client_tls[name]))
    for extender in config["extenders"]:
        extender["tlsConfig"] |= {"certFile": str(tmp_path / "tls.crt"), "keyFile": str(tmp_path / "tls.key")}
    (tmp_path / "scheduler.yaml").write_text(yaml.safe_dump(config))

    scheduler = container(applied_rbac, "Deployment", f"{release}-scheduler")
    assert scheduler["command"] == ["/usr/local/bin/kube-scheduler"]
    port = processes.free_port()
    args = [a.replace("/etc/netsched/", f"{tmp_path}/") for a in scheduler["args"]]
    argv = [bin_dir / "kube-scheduler", *args]
    # Off-cluster only: a free port, and the ServiceAccount for delegated authn/authz (a pod uses in-cluster
    # config). A failed lookup of kube-system's authentication ConfigMap is fatal: that tests its RoleBinding.
    argv += [f"--secure-port={port}", "--bind-address=127.0.0.1",
             "--authentication-tolerate-lookup-failure=false",
             f"--authentication-kubeconfig={sa_kubeconfig}", f"--authorization-kubeconfig={sa_kubeconfig}"]
    proc = processes.start("chart-kube-scheduler", [str(a) for a in argv], tmp_path / "scheduler.log",
                           cwd=tmp_path)
    try:
        processes.wait_until(proc, lambda: _https_ok(f"https://127.0.0.1:{port}/healthz"), timeout=30,
                             port=port)
        poll(lambda: _lease_holder(bin_dir, dev_cluster, release), 30,
             f"kube-scheduler to hold Lease {release}/{release}-scheduler")
    finally:
        processes.stop(proc.pid)
    forbidden = [line for line in proc.log.read_text().splitlines() if "forbidden" in line]
    assert not forbidden, "\n".join(forbidden[:5])


def _https_ok(url: str) -> bool:
    """kube-scheduler serves a self-signed certificate; only its status matters here."""
    with urllib.request.urlopen(url, timeout=2, context=ssl._create_unverified_context()) as resp:
        return resp.status == 200


def _lease_holder(bin_dir: Path, dev_cluster, release: str) -> str | None:
    done = run(kubectl(bin_dir, dev_cluster, "get", "lease", f"{release}-scheduler", "-n", release,
                       "-o", "jsonpath={.spec.holderIdentity}"))
    return done.stdout.strip() or None


# ---- manifests/ ---------------------------------------------------------------------------------------

def test_manifests_are_the_chart_rendered_by_the_documented_command(bin_dir, tmp_path):
    ok([sys.executable, ROOT / "hack" / "render-manifests.py", tmp_path])
    committed = ROOT / "manifests"
    fresh = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.yaml"))
    assert fresh == sorted(p.relative_to(committed) for p in [committed / "kustomization.yaml",
                                                               *(committed / "netsched").rglob("*.yaml")])
    stale = [str(p) for p in fresh if (tmp_path / p).read_text() != (committed / p).read_text()]
    assert not stale, f"manifests/ is out of date; run `.venv/bin/python hack/render-manifests.py`: {stale}"

    built = [d for d in yaml.safe_load_all(ok([bin_dir / "kubectl", "kustomize", committed])) if d]
    # no committed private key: no webhook, no TLS to the extender
    chart = render(bin_dir, {"operator": {"webhook": {"enabled": False}},
                             "extender": {"tls": {"enabled": False}}})
    assert sorted((d["kind"], d["metadata"]["name"]) for d in built) == sorted(
        [("Namespace", "netsched-system")] + [(d["kind"], d["metadata"]["name"]) for d in chart]
        + [("CustomResourceDefinition", n) for n in
           ("gpujobs.netsched.io", "packingplans.netsched.io")])
    assert (committed / "examples" / "single-gpu.yaml").exists()  # examples stay, outside the kustomization


def test_gang_placement_passes_the_extender_and_the_certificates_it_is_met_with(bin_dir):
    docs = render(bin_dir, {"operator": {"placeGangs": True}})
    operator = container(docs, "Deployment", "netsched-operator")
    assert [a for a in operator["args"] if a.startswith("--extender-")] == [
        "--extender-url=https://netsched-extender.netsched-system.svc:8888",
        "--extender-ca-file=/etc/netsched/extender-ca/ca.crt",
        "--extender-cert-file=/etc/netsched-client/tls.crt",
        "--extender-key-file=/etc/netsched-client/tls.key"]
    mounts = {m["name"]: m["mountPath"] for m in operator["volumeMounts"]}
    assert mounts["extender-ca"] == "/etc/netsched/extender-ca"
    assert mounts["extender-client"] == "/etc/netsched-client"
    off = render(bin_dir)  # off by default (values.yaml says why)
    assert not [a for a in container(off, "Deployment", "netsched-operator")["args"]
                if a.startswith("--extender-")]
    volumes = find(off, "Deployment", "netsched-operator")["spec"]["template"]["spec"]["volumes"]
    assert "extender-client" not in {v["name"] for v in volumes}
