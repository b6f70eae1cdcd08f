import base64
from pathlib import Path

from netsched.devcluster.kueue import argv, configuration, conversion, webhook_configurations

PORTS = {"kueue-health": 1001, "kueue-metrics": 1002, "kueue-webhook": 1003}


def _webhook(name: str, group: str, path: str) -> dict:
    return {"name": name, "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": path}},
            "rules": [{"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["x"]}]}


MANIFESTS = [
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
     "metadata": {"name": "mutating-webhook-configuration"},
     "webhooks": [_webhook("mjob.kb.io", "batch", "/mutate-batch-v1-job"),
                  _webhook("mpod.kb.io", "", "/mutate--v1-pod"),
                  _webhook("mdeployment.kb.io", "apps", "/mutate-apps-v1-deployment"),
                  _webhook("mclusterqueue.kb.io", "kueue.x-k8s.io", "/mutate-kueue-x-k8s-io-v1beta2-cq")]},
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
     "metadata": {"name": "validating-webhook-configuration"},
     "webhooks": [_webhook("vjob.kb.io", "batch", "/validate-batch-v1-job"),
                  _webhook("vpod.kb.io", "", "/validate--v1-pod")]},
]


def test_kueue_serves_on_loopback_with_its_own_certificates_off_and_only_queued_jobs():
    config = configuration(PORTS, Path("/d/certs"))
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2" and config["kind"] == "Configuration"
    assert config["webhook"] == {"host": "127.0.0.1", "port": 1003, "certDir": "/d/certs"}
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:1001"
    assert config["metrics"]["bindAddress"] == "127.0.0.1:1002"
    assert config["internalCertManagement"] == {"enable": False}
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["manageJobsWithoutQueueName"] is False
    assert config["integrations"]["frameworks"] == ["batch/job"]


def test_only_the_webhooks_of_kueue_objects_and_jobs_are_registered_and_they_call_loopback():
    mutating, validating = webhook_configurations(MANIFESTS, 1003, b"CA PEM")
    assert mutating["metadata"]["name"] == "kueue-mutating-webhook-configuration"
    assert validating["metadata"]["name"] == "kueue-validating-webhook-configuration"
    assert [w["name"] for w in mutating["webhooks"]] == ["mjob.kb.io", "mclusterqueue.kb.io"]
    assert [w["name"] for w in validating["webhooks"]] == ["vjob.kb.io"]
    job = mutating["webhooks"][0]
    assert job["clientConfig"] == {"url": "https://127.0.0.1:1003/mutate-batch-v1-job",
                                   "caBundle": base64.b64encode(b"CA PEM").decode()}
    assert job["failurePolicy"] == "Fail"  # Kueue's own choice, kept
    assert MANIFESTS[0]["metadata"]["name"] == "mutating-webhook-configuration"  # the input is not changed
    assert "service" in MANIFESTS[0]["webhooks"][0]["clientConfig"]


def test_kueue_runs_in_a_mount_namespace_that_adds_its_metrics_certificate_to_etc():
    args = argv(Path("/cache/kueue-v0.17.0"), Path("/d/kueue"), Path("/d/kueue/config.yaml"),
                Path("/d/admin"))
    assert args[:3] == ["unshare", "--mount", "--propagation=private"]
    script = args[args.index("-c") + 1]
    assert "lowerdir=$0:/etc" in script and 'exec "$@"' in script
    assert args[-4:] == ["/d/kueue/etc", "/cache/kueue-v0.17.0/kueue", "--config=/d/kueue/config.yaml",
                         "--kubeconfig=/d/admin"]


def test_kueue_converts_its_crd_versions_at_its_loopback_convert_endpoint():
    assert conversion(1003, b"CA PEM", ["v1"]) == {"strategy": "Webhook", "webhook": {
        "clientConfig": {"url": "https://127.0.0.1:1003/convert",
                         "caBundle": base64.b64encode(b"CA PEM").decode()},
        "conversionReviewVersions": ["v1"]}}
