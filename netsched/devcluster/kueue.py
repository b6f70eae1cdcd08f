"""Kueue's manager as a dev-cluster process (`dev-cluster up --kueue`), outside the cluster.

Kueue normally runs in a pod behind a Service and issues its own webhook certificate. Here it
runs on 127.0.0.1 with the admin kubeconfig, so: its internal certificate management is off, it
serves a certificate for 127.0.0.1 that pki.py makes, and its webhook configurations and the
conversion of its CRDs' versions (from the same module as the binary) call
`https://127.0.0.1:<port>/<path>` with that CA instead of a Service. Only the webhooks for
Kueue's own objects and batch/v1 Jobs are registered: the module's file also holds webhooks for
pods, Deployments and the other integrations, which would send every pod creation of the cluster
through Kueue with failurePolicy Fail although Kueue manages none of them here.
"""

from __future__ import annotations

import base64
import copy
import os
from pathlib import Path

import yaml
from kubernetes import client

from netsched.devcluster.crds import install_crds
from netsched.devcluster.pki import serving_certificate

KUEUE = "kueue"
KUEUE_GROUP = "kueue.x-k8s.io"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # a Job with this label is queued (and suspended) by Kueue
FRAMEWORKS = ("batch/job",)  # the integrations Kueue manages here
WEBHOOK_GROUPS = {KUEUE_GROUP, "batch"}  # the API groups of Kueue's own objects and of FRAMEWORKS
NAME_PREFIX = "kueue-"  # as Kueue's kustomization names the webhook configurations
# Kueue reads its metrics certificate from this fixed path when its internal certificate
# management is off; a private mount namespace puts the dev-cluster's certificate there.
METRICS_CERT_DIR = "etc/kueue/metrics/certs"


def configuration(ports: dict[str, int], cert_dir: Path) -> dict:
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2) for a process on 127.0.0.1."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['kueue-health']}"},
        "metrics": {"bindAddress": f"127.0.0.1:{ports['kueue-metrics']}"},
        "webhook": {"host": "127.0.0.1", "port": ports["kueue-webhook"], "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,  # only Jobs that name a LocalQueue are Kueue's
        "integrations": {"frameworks": list(FRAMEWORKS)},
        # on-demand visibility is an aggregated API served from inside the cluster: nothing here
        # registers it, and its server would only take another fixed port
        "featureGates": {"VisibilityOnDemand": False},
    }


def webhook_configurations(manifests: list[dict], port: int, ca_bundle: bytes) -> list[dict]:
    """The module's webhook configurations, pointed at 127.0.0.1:`port` and trusting `ca_bundle`,
    keeping only the webhooks for WEBHOOK_GROUPS."""
    result = []
    for manifest in manifests:
        config = copy.deepcopy(manifest)
        config["metadata"]["name"] = NAME_PREFIX + config["metadata"]["name"]
        config["webhooks"] = [_local(w, port, ca_bundle) for w in config["webhooks"] if _kept(w)]
        result.append(config)
    return result


def _kept(webhook: dict) -> bool:
    return all(set(rule["apiGroups"]) <= WEBHOOK_GROUPS for rule in webhook["rules"])


def _local(webhook: dict, port: int, ca_bundle: bytes) -> dict:
    path = webhook["clientConfig"]["service"]["path"]
    webhook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}",
                               "caBundle": base64.b64encode(ca_bundle).decode()}
    return webhook


def conversion(port: int, ca_bundle: bytes, review_versions: list[str]) -> dict:
    """A CRD's spec.conversion: Kueue's /convert at 127.0.0.1:`port`, trusting `ca_bundle`."""
    return {"strategy": "Webhook", "webhook": {
        "clientConfig": {"url": f"https://127.0.0.1:{port}/convert",
                         "caBundle": base64.b64encode(ca_bundle).decode()},
        "conversionReviewVersions": review_versions}}


def argv(kueue_dir: Path, workdir: Path, config: Path, kubeconfig: Path) -> list[str]:
    """Kueue's manager in a private mount namespace where /etc also shows `workdir`/etc (its metrics
    certificate); the host's /etc is untouched. Unprivileged users get a user namespace for it."""
    user_ns = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    mount = 'mount -t overlay kueue-etc -o "lowerdir=$0:/etc" /etc && exec "$@"'
    return ["unshare", "--mount", "--propagation=private", *user_ns, "sh", "-c", mount,
            str(workdir / "etc"), str(kueue_dir / "kueue"), f"--config={config}",
            f"--kubeconfig={kubeconfig}"]


def prepare(api: client.ApiClient, kueue_dir: Path, workdir: Path, ports: dict[str, int]) -> Path:
    """Install Kueue's CRDs and write its certificates and Configuration under `workdir`.
    Returns the Configuration file."""
    install_crds(api, [yaml.safe_load(p.read_text()) for p in sorted((kueue_dir / "crds").glob("*.yaml"))])
    ca, cert, key = serving_certificate("kueue-webhook", ["localhost"], ip_addresses=("127.0.0.1",))
    for cert_dir in (workdir / "certs", workdir / METRICS_CERT_DIR):
        cert_dir.mkdir(parents=True, exist_ok=True)
        (cert_dir / "tls.crt").write_bytes(cert)
        (cert_dir / "tls.key").write_bytes(key)
        (cert_dir / "tls.key").chmod(0o600)
    (workdir / "certs" / "ca.crt").write_bytes(ca)
    config = workdir / "config.yaml"
    config.write_text(yaml.safe_dump(configuration(ports, workdir / "certs"), sort_keys=False))
    return config


def register_webhooks(api: client.ApiClient, kueue_dir: Path, workdir: Path, port: int) -> list[str]:
    """Create Kueue's webhook configurations and point its CRDs' version conversion at it; call once
    Kueue serves. Returns the names of the configurations and CRDs."""
    manifests = list(yaml.safe_load_all((kueue_dir / "webhooks.yaml").read_text()))
    ca = (workdir / "certs" / "ca.crt").read_bytes()
    admission = client.AdmissionregistrationV1Api(api)
    create = {"MutatingWebhookConfiguration": admission.create_mutating_webhook_configuration,
              "ValidatingWebhookConfiguration": admission.create_validating_webhook_configuration}
    configs = webhook_configurations(manifests, port, ca)
    for config in configs:
        create[config["kind"]](config)
    # Kueue's kustomization patches these CRDs the same way, with its Service instead of a URL
    ext = client.ApiextensionsV1Api(api)
    crds = []
    for path in sorted((kueue_dir / "conversion").glob("*.yaml")):
        patch = yaml.safe_load(path.read_text())
        versions = patch["spec"]["conversion"]["webhook"]["conversionReviewVersions"]
        ext.patch_custom_resource_definition(patch["metadata"]["name"], [
            {"op": "add", "path": "/spec/conversion", "value": conversion(port, ca, versions)}])
        crds.append(patch["metadata"]["name"])
    return [config["metadata"]["name"] for config in configs] + crds
