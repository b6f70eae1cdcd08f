"""`netsched whatif` on manifests written the way the upstream projects' own examples are (JobSet's, the
Kubeflow training operator's, Kueue's), against the real control plane, as a user runs it: a process of
its own, no $NETSCHED_TOPOLOGY. The dev-cluster runs the GKE preset (`dev-cluster up --topology gke`):
nodes labelled block, subblock and host, the operator and extender run with it, and whatif reads the
levels the cluster publishes. No JobSet, Kubeflow or Kueue is installed here.

Answers: a JobSet with no restartPolicy is read as JobSet's webhook defaults it; a v1alpha1 JobSet is
"JobSet is not installed"; a PyTorchJob is one gang of its replicas; a suspended Kueue Job is never
admitted; a JobSet asking Kueue for its topology gets the gang controller's PlacedByKueueTopology; a level
the preset lacks is refused in the operator's own words."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
import yaml
from kubernetes import client

from netsched.api import conditions as c
from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.api.labels import MAX_PEER_DISTANCE
from netsched.devcluster.devcluster import DevCluster
from netsched.devcluster.wait import poll
from netsched.testing.builders import make_gpujob
from netsched.testing.cluster import running

GPU = {"limits": {"nvidia.com/gpu": "4"}}
LEVELS = "node, host, subblock, block"  # the GKE preset's, narrowest first


@pytest.fixture(scope="module")
def dev_cluster(tmp_path_factory) -> Iterator[DevCluster]:
    cluster = DevCluster(directory=tmp_path_factory.mktemp("whatif-upstream-cluster"), nodes=8,
                         topology="gke")
    with running(cluster):
        yield cluster


@pytest.fixture(scope="module")
def core(dev_cluster) -> client.CoreV1Api:
    return client.CoreV1Api(dev_cluster.api_client())


@pytest.fixture
def whatif(dev_cluster, namespace, tmp_path):
    def run(*docs: dict) -> subprocess.CompletedProcess:
        path = tmp_path / "manifests.yaml"
        path.write_text(yaml.safe_dump_all(docs))
        env = {k: v for k, v in os.environ.items() if k not in ("NETSCHED_TOPOLOGY", "NETSCHED_NAMESPACE")}
        return subprocess.run([sys.executable, "-m", "netsched", "whatif", "-f", str(path), "-n", namespace,
                               f"--kubeconfig={dev_cluster.kubeconfig}"], env=env, capture_output=True,
                              text=True, timeout=120)
    return run


def container(name: str, resources: dict | None = None) -> dict:
    return {"name": name, "image": f"example.com/{name}:latest", "command": ["python3", "train.py"],
            **({"resources": resources} if resources else {})}


def jobset(api_version: str = "jobset.x-k8s.io/v1alpha2", annotations: dict | None = None,
           labels: dict | None = None) -> dict:
    """Like JobSet's examples/pytorch: one replicated job of an indexed Job, no restartPolicy."""
    pod = {"spec": {"schedulerName": "netsched", "containers": [container("resnet", GPU)]}}
    if annotations:
        pod["metadata"] = {"annotations": annotations}
    return {"apiVersion": api_version, "kind": "JobSet",
            "metadata": {"name": "resnet", **({"labels": labels} if labels else {})},
            "spec": {"replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": {
                "parallelism": 2, "completions": 2, "backoffLimit": 0, "template": pod}}}]}}


def test_jobsets_as_the_jobset_webhook_reads_them(whatif):
    done = whatif(jobset())
    assert done.returncode == 0, done.stderr
    assert "JobSet is not installed" in done.stdout and "Fits now: yes" in done.stdout
    old = whatif(jobset("jobset.x-k8s.io/v1alpha1"))
    assert old.returncode == 2 and old.stdout == ""
    [line] = old.stderr.splitlines()
    assert "JobSet is not installed (the API server serves no jobset.x-k8s.io API)" in line, line


def test_a_pytorchjob_is_one_gang_of_its_replicas(whatif):
    replica = {"restartPolicy": "OnFailure", "template": {"spec": {
        "schedulerName": "netsched", "containers": [container("pytorch", GPU)]}}}
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "mnist"},
           "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, **replica},
                                            "Worker": {"replicas": 1, **replica}}}}
    done = whatif(job)
    assert done.returncode == 0, done.stderr
    assert "PyTorchJob" in done.stdout and "1 gang of 2 pod(s) × 4 GPU(s)" in done.stdout, done.stdout
    assert "Fits now: yes" in done.stdout


def test_a_suspended_kueue_job_with_no_kueue_is_never_admitted(whatif):
    """Like Kueue's sample-job.yaml: a generated name, a queue label, suspended, CPU only."""
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"generateName": "sample-job-", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
           "spec": {"parallelism": 3, "completions": 3, "suspend": True, "template": {"spec": {
               "restartPolicy": "Never", "containers": [container("dummy-job", {
                   "requests": {"cpu": "1", "memory": "200Mi"}})]}}}}
    done = whatif(job)
    assert done.returncode == 0, done.stderr
    assert "waits for Kueue to admit it (queue user-queue), but Kueue is not installed" in done.stdout
    assert "nothing will admit it" in done.stdout and "Predicted start: never" in done.stdout


def test_a_jobset_asking_kueue_for_its_topology_gets_the_gang_controllers_answer(whatif):
    asks = {"kueue.x-k8s.io/podset-required-topology": "cloud.google.com/gce-topology-block"}
    body = jobset(annotations=asks, labels={"kueue.x-k8s.io/queue-name": "tas-user-queue"})
    done = whatif(body)
    assert done.returncode == 0, done.stderr
    assert "PlacedByKueueTopology" in done.stdout and "Would run on" not in done.stdout, done.stdout


def test_the_published_preset_is_the_operators(whatif, dev_cluster, namespace):
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "near"}, "spec": {
        "parallelism": 2, "template": {"metadata": {"annotations": {MAX_PEER_DISTANCE: "subblock"}}, "spec": {
            "schedulerName": "netsched", "restartPolicy": "Never", "containers": [container("t", GPU)]}}}}
    done = whatif(job)
    assert done.returncode == 0 and "Room per subblock" in done.stdout, done.stdout + done.stderr
    said = f"'rack' is not a topology level of this cluster: write one of {LEVELS}"
    far = make_gpujob("far", replicas=2, gpus=1, manifest=True, network={"maxPeerDistance": "rack"})
    refused = whatif(far)
    assert refused.returncode == 2 and said in refused.stderr, refused.stderr
    jobs = client.CustomObjectsApi(dev_cluster.api_client())
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, far)

    def invalid():
        status = jobs.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "far").get("status")
        status = status or {}
        found = c.find(status.get("conditions") or [], c.PODS_READY)
        return found and found["reason"] == c.INVALID_SPEC and found
    assert said in poll(invalid, 60, "far's InvalidSpec condition")["message"]
