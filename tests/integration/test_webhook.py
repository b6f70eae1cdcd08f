"""The operator's admission webhook on the real control plane: the API server calls it for pods created
in an opted-in namespace, the real Job controller's pods carry the gang gate from their creation, other
namespaces are untouched, and with the webhook down (failurePolicy Fail) gang pods are refused, the Job
controller creates them again once it is back, gated, none lost or doubled."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from netsched.api.labels import GANG_OPT_IN_LABEL, GANG_OPT_IN_VALUE, GPU_RESOURCE, SCHEDULER_NAME
from netsched.devcluster.devcluster import OPERATOR, WEBHOOK_CONFIGURATION
from netsched.devcluster.wait import poll
from netsched.jobs.replica_pods import GANG_GATE
from netsched.operator.webhook.configurations import HANDLER_ID
from netsched.testing.cluster import operator_metric, scratch_namespace

# the compatibility lane (make test-compat) runs it on the older Kubernetes too: admission webhooks and
# scheduling gates, as each API server version applies them
pytestmark = pytest.mark.compat

WEBHOOK = f"{HANDLER_ID}.netsched.io"
TRAIN_EVENTS = "involvedObject.name=train"
# More GPUs per pod than any dev-cluster node has: such a gang never fits, so the gang controller
# keeps its gate and a test sees what the webhook did, not what the operator did next.
NEVER_FITS = 64


@pytest.fixture(scope="module")
def webhook(dev_cluster) -> None:
    """The dev-cluster's operator serves the webhook on 127.0.0.1 with a certificate of its own; its
    configuration is the one the chart renders, with a url instead of a Service."""
    admission = client.AdmissionregistrationV1Api(dev_cluster.api_client())
    config = admission.read_mutating_webhook_configuration(WEBHOOK_CONFIGURATION)
    [hook] = config.webhooks
    assert hook.client_config.url.startswith("https://127.0.0.1:") and hook.failure_policy == "Fail"


@contextlib.contextmanager
def namespace(core: client.CoreV1Api, opted_in: bool) -> Iterator[str]:
    with scratch_namespace(core, "wh") as name:
        if opted_in:
            core.patch_namespace(name, {"metadata": {"labels": {GANG_OPT_IN_LABEL: GANG_OPT_IN_VALUE}}})
        yield name


def job(name: str, parallelism: int, scheduler: str = SCHEDULER_NAME, gpus: int = 0) -> dict:
    """An indexed batch/v1 Job whose pods name `scheduler`."""
    resources = {"requests": {"cpu": "100m"}, "limits": {GPU_RESOURCE: str(gpus)} if gpus else {}}
    container = {"name": "main", "image": "busybox", "resources": resources}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"parallelism": parallelism, "completions": parallelism, "completionMode": "Indexed",
                     "backoffLimit": 0, "template": {"spec": {
                         "schedulerName": scheduler, "restartPolicy": "Never", "containers": [container]}}}}


def job_pods(core: client.CoreV1Api, namespace: str, name: str) -> list[client.V1Pod]:
    return core.list_namespaced_pod(namespace, label_selector=f"batch.kubernetes.io/job-name={name}").items


def gates(pod: client.V1Pod) -> list[str]:
    return [g.name for g in pod.spec.scheduling_gates or []]


def gang_pod(name: str, scheduler: str = SCHEDULER_NAME) -> dict:
    """A pod as a JobSet controller labels it (no JobSet controller runs here: its documented labels)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"jobset.sigs.k8s.io/jobset-name": "js",
                                                  "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                                                  "jobset.sigs.k8s.io/job-index": "0"}},
            "spec": {"schedulerName": scheduler, "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "busybox"}]}}


def webhook_requests(dev_cluster, outcome: str) -> float:
    return operator_metric(dev_cluster, "netsched_webhook_requests_total", outcome=outcome)


def apiserver_rejections(dev_cluster) -> float:
    """The API server's own count of pods refused because it could not call the webhook."""
    api = dev_cluster.api_client()
    response = api.call_api(*api.param_serialize("GET", "/metrics", auth_settings=["BearerToken"]))
    response.read()
    text = response.data.decode()
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if f.name == "apiserver_admission_webhook_rejection_count"  # the parser names samples _total
               and s.labels.get("name") == WEBHOOK and s.labels.get("error_type") == "calling_webhook_error")


def test_the_pods_of_a_job_in_an_opted_in_namespace_are_gated_at_creation(dev_cluster, core, webhook):
    batch = client.BatchV1Api(dev_cluster.api_client())
    gated_before = webhook_requests(dev_cluster, "gated")
    with namespace(core, opted_in=True) as ns:
        batch.create_namespaced_job(ns, job("train", 3, gpus=NEVER_FITS))
        pods = poll(lambda: len(p := job_pods(core, ns, "train")) == 3 and p, 60, "the Job's 3 pods")
        assert [gates(p) for p in pods] == [[GANG_GATE]] * 3
        assert all(p.spec.node_name is None for p in pods)  # the gate holds them: none bound
        # another scheduler's pods and pods of no gang pass through as they are
        batch.create_namespaced_job(ns, job("elsewhere", 1, scheduler="default-scheduler"))
        other = poll(lambda: job_pods(core, ns, "elsewhere"), 60, "the other scheduler's pod")
        assert gates(other[0]) == []
        plain = core.create_namespaced_pod(ns, {**gang_pod("plain"), "metadata": {"name": "plain"}})
        assert gates(plain) == []
        assert gates(core.create_namespaced_pod(ns, gang_pod("member"))) == [GANG_GATE]
    assert webhook_requests(dev_cluster, "gated") >= gated_before + 4


def test_a_namespace_that_has_not_opted_in_is_untouched(dev_cluster, core, webhook):
    batch = client.BatchV1Api(dev_cluster.api_client())
    with namespace(core, opted_in=False) as ns:
        batch.create_namespaced_job(ns, job("train", 2))
        pods = poll(lambda: len(p := job_pods(core, ns, "train")) == 2 and p, 60, "the Job's 2 pods")
        assert [gates(p) for p in pods] == [[], []]
        assert gates(core.create_namespaced_pod(ns, gang_pod("member"))) == []


def test_with_the_webhook_down_gang_pods_are_refused_and_come_back_gated(dev_cluster, core, webhook):
    """Fail-closed: no gang pod is created ungated while the webhook is down; the Job controller keeps
    trying, and once the operator is back every pod the Job asks for exists, each once, gated."""
    batch = client.BatchV1Api(dev_cluster.api_client())
    with namespace(core, opted_in=True) as ns:
        refused_before = apiserver_rejections(dev_cluster)
        os.kill(dev_cluster.status()["components"][OPERATOR]["pid"], signal.SIGKILL)
        poll(lambda: OPERATOR not in dev_cluster.running_components(), 10, "the operator to die")
        try:
            with pytest.raises(client.ApiException) as refused:
                core.create_namespaced_pod(ns, gang_pod("member"))
            assert refused.value.status == 500 and WEBHOOK in refused.value.body
            # outside the webhook's match conditions nothing waits on it
            free = core.create_namespaced_pod(ns, gang_pod("free", scheduler="default-scheduler"))
            assert gates(free) == []
            batch.create_namespaced_job(ns, job("train", 3, gpus=NEVER_FITS))
            poll(lambda: any(e.reason == "FailedCreate" and WEBHOOK in (e.message or "")
                             for e in core.list_namespaced_event(ns, field_selector=TRAIN_EVENTS).items),
                 60, "the Job controller to be refused a pod")
            assert job_pods(core, ns, "train") == []
            assert apiserver_rejections(dev_cluster) >= refused_before + 2
        finally:
            dev_cluster.restart(OPERATOR)
        pods = poll(lambda: len(p := job_pods(core, ns, "train")) >= 3 and p, 180,
                    "the Job controller to create its pods once the webhook is back")
        assert sorted(p.metadata.annotations["batch.kubernetes.io/job-completion-index"] for p in pods) == [
            "0", "1", "2"]
        assert [gates(p) for p in pods] == [[GANG_GATE]] * 3
