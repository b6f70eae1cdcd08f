"""`kubectl netsched whatif` and `why` for workloads that are not GPUJobs, on the real control plane: the
plugin run by the real kubectl as a subprocess, the Jobs made into pods by kube-controller-manager's Job
controller and released (or held) by the operator's gang controller.

The dev-cluster has 8 nodes of 8 GPUs in 4 racks of 2 nodes (16 GPUs a rack). JobSet's CRD is not
installed here: whatif says so, checks the Jobs it would make, and answers with netsched's own checks."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import timedelta

import pytest
import yaml
from kubernetes import client

from netsched.api.events import parse_rfc3339
from netsched.api.labels import (
    EXPECTED_SECONDS,
    MAX_PEER_DISTANCE,
    PREDICTED_FINISH,
    PREDICTED_START,
    RACK_LABEL,
)
from netsched.devcluster.binaries import ensure_binaries
from netsched.devcluster.pods import gated_job, gpu_pod
from netsched.devcluster.wait import poll
from netsched.foresight.whatif import NEVER_STARTS
from netsched.jobs.replica_pods import GANG_GATE
from netsched.operator.forecaster.patches import MIN_MOVE
from netsched.testing.plugin import install_plugin, path_with

JOB_NAME = "batch.kubernetes.io/job-name"


def job(name: str, pods: int, gpus: int, rack: bool = False, gate: bool = True) -> dict:
    """An indexed Job of `pods` pods of `gpus` GPUs, scheduled by netsched, as a user writes it."""
    pod = gpu_pod("x", gpus, duration="600s", annotations={MAX_PEER_DISTANCE: "rack"} if rack else None)
    spec = {**pod["spec"], **({"schedulingGates": [{"name": GANG_GATE}]} if gate else {})}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed", "backoffLimit": 0,
                     "template": {"metadata": {"annotations": pod["metadata"]["annotations"]}, "spec": spec}}}


@pytest.fixture(scope="module")
def batch(dev_cluster) -> client.BatchV1Api:
    return client.BatchV1Api(dev_cluster.api_client())


@pytest.fixture
def kubectl(dev_cluster, tmp_path):
    """`kubectl ARGS` as a user runs it: kubectl and the plugin on PATH, the dev-cluster's kubeconfig."""
    plugin = install_plugin(tmp_path / "bin")
    env = {**os.environ, "KUBECONFIG": str(dev_cluster.kubeconfig), "HOME": str(tmp_path),
           "PATH": path_with(plugin.parent, ensure_binaries(quiet=True))}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["kubectl", *args], env=env, cwd=tmp_path, text=True, capture_output=True,
                              timeout=180)
    return run


def every_node_empty(core) -> None:
    def empty():
        return not [p for p in core.list_pod_for_all_namespaces().items
                    if p.spec.node_name and p.status.phase not in ("Succeeded", "Failed")]
    poll(empty, 180, "every node empty")


def test_whatif_on_job_manifests_answers_each_and_refuses_a_deployment_in_one_line(
        kubectl, core, batch, namespace, tmp_path):
    every_node_empty(core)
    web = {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                  "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": web}}
    docs = [job("fits", 4, 4, rack=True), job("huge", 3, 8, rack=True), job("loose", 2, 1, gate=False),
            deployment]
    (tmp_path / "jobs.yaml").write_text(yaml.safe_dump_all(docs))

    out = kubectl("netsched", "whatif", "-f", "jobs.yaml", "-n", namespace, "-o", "json")
    assert out.returncode == 2, out.stderr
    assert out.stderr == ("netsched: error: whatif: Deployment/web (document 4 of jobs.yaml): kind "
                          "Deployment: netsched does not gang its pods; whatif answers only for GPUJob "
                          "(netsched.io/v1alpha1), JAXJob, MPIJob, PaddleJob, PyTorchJob, TFJob, XGBoostJob "
                          "(kubeflow.org/v1), Job (batch/v1), JobSet (jobset.x-k8s.io/v1alpha2), "
                          "LeaderWorkerSet (leaderworkerset.x-k8s.io/v1)\n")
    fits, huge, loose = json.loads(out.stdout)

    [g] = fits["gangs"]
    assert fits["workload"] == f"Job {namespace}/fits" and g["gated"] is True
    assert g["schedulable"]["fits"] is True and sum(p["replicas"] for p in g["placement"]) == 4
    racks = {n.metadata.name: n.metadata.labels[RACK_LABEL] for n in core.list_node().items}
    assert len({racks[p["node"]] for p in g["placement"]}) == 1 and {p["rack"] for p in g["placement"]} == {
        racks[g["placement"][0]["node"]]}

    [g] = huge["gangs"]
    assert (g["schedulable"]["fits"], g["schedulable"]["reason"]) == (False, "NeverFits")
    assert "never fits: needs 3 replica(s) of 8 GPUs" in g["schedulable"]["message"]
    assert "within one rack, the largest rack holds 2" in g["schedulable"]["message"]

    [g] = loose["gangs"]
    assert g["gated"] is False and g["gating"].startswith(f"not gated: namespace {namespace} is not opted in")
    assert not batch.list_namespaced_job(namespace).items  # nothing was created

    text = kubectl("netsched", "whatif", "-f", "jobs.yaml", "-n", namespace)
    assert text.returncode == 2 and text.stderr.count("\n") == 1
    assert f"Job {namespace}/huge: 1 gang of 3 pod(s) × 8 GPU(s), priority 0 (spec.template)" in text.stdout
    assert "  Fits now: no (NeverFits): never fits: needs 3 replica(s)" in text.stdout


def test_whatif_on_a_jobset_whose_crd_is_not_served_says_so_and_answers(kubectl, namespace, tmp_path):
    # completions too: JobSet's webhook makes its Jobs Indexed, and an Indexed Job without them is refused
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "llm"},
              "spec": {"replicatedJobs": [{"name": "workers", "replicas": 2, "template": {
                  "spec": {"parallelism": 2, "completions": 2,
                           "template": job("x", 2, 8)["spec"]["template"]}}}]}}
    (tmp_path / "jobset.yaml").write_text(yaml.safe_dump(jobset))
    out = kubectl("netsched", "whatif", "-f", "jobset.yaml", "-n", namespace)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"JobSet {namespace}/llm:\nNote: JobSet is not installed (the API server "
                                 "does not serve jobset.x-k8s.io/v1alpha2)")
    assert (f"JobSet {namespace}/llm-workers-0 (and 1 more like it): 2 gangs of 2 pod(s) × 8 GPU(s)"
            in out.stdout)

    # what the JobSet controller would make of it is still checked: a Job the API server refuses
    jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    (tmp_path / "jobset.yaml").write_text(yaml.safe_dump(jobset))
    bad = kubectl("netsched", "whatif", "-f", "jobset.yaml", "-n", namespace)
    assert (bad.returncode, bad.stdout) == (2, ""), bad.stderr
    assert bad.stderr.startswith("netsched: error: whatif: JobSet/llm (document 1 of jobset.yaml): "
                                 "spec.replicatedJobs[0].template: the API server would refuse the Job made "
                                 "from it: Job.batch \"whatif-") and bad.stderr.count("\n") == 1
    said = 'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"\n'
    assert bad.stderr.endswith(said), bad.stderr


def test_whatif_on_a_job_that_must_wait_predicts_its_start_after_the_running_job_gang_finishes(
        kubectl, core, batch, namespace, tmp_path):
    every_node_empty(core)
    nodes = len(core.list_node().items)
    # whole-node pods: `first` takes every node for 300 s, as its hint says
    batch.create_namespaced_job(namespace, gated_job("first", nodes, 8, "300s", {EXPECTED_SECONDS: "300"}))
    poll(lambda: len(pods := core.list_namespaced_pod(namespace).items) == nodes
         and all(p.status.start_time for p in pods), 120, "Job first's pods to start")
    finish = poll(lambda: (batch.read_namespaced_job("first", namespace).metadata.annotations or {}).get(
        PREDICTED_FINISH), 60, "the operator's predicted finish on the running Job first")
    (tmp_path / "second.yaml").write_text(yaml.safe_dump(
        gated_job("second", nodes // 2, 8, "10s", {EXPECTED_SECONDS: "10"})))

    out = kubectl("netsched", "whatif", "-f", "second.yaml", "-n", namespace, "-o", "json")
    assert out.returncode == 0, out.stderr
    [g] = json.loads(out.stdout)["gangs"]
    assert g["schedulable"]["fits"] is False and g["waitsFor"] == [f"Job {namespace}/first"]
    start, done = parse_rfc3339(g["predictedStartTime"]), parse_rfc3339(g["predictedCompletionTime"])
    # the operator rewrites first's finish only once it moves by MIN_MOVE
    assert start >= parse_rfc3339(finish) - timedelta(seconds=MIN_MOVE + 1), (start, finish)
    assert (done - start).total_seconds() == g["estimate"]["seconds"] > 0

    text = kubectl("netsched", "whatif", "-f", "second.yaml", "-n", namespace)
    assert text.returncode == 0, text.stderr
    assert f"  Predicted start: {g['predictedStartTime']} (in " in text.stdout
    assert f"), when Job {namespace}/first is predicted to finish\n" in text.stdout
    assert f"  Predicted completion: {g['predictedCompletionTime']} (in " in text.stdout
    assert [j.metadata.name for j in batch.list_namespaced_job(namespace).items] == ["first"]  # none made


def test_why_on_a_gated_and_a_released_job_and_one_line_for_a_typo_or_a_missing_one(
        kubectl, core, batch, namespace):
    batch.create_namespaced_job(namespace, job("huge", 3, 8, rack=True))
    released = job("small", 2, 1)
    released["spec"]["template"]["metadata"]["annotations"][EXPECTED_SECONDS] = "600"  # so it gets a finish
    batch.create_namespaced_job(namespace, released)
    for name, reason in (("huge", "NeverFits"), ("small", "GangReleased")):
        poll(lambda n=name, r=reason: any(e.reason == r for e in core.list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={n}").items), 120,
             f"a {reason} Event on Job {name}")
    poll(lambda: all(p.spec.node_name for p in core.list_namespaced_pod(
        namespace, label_selector=f"{JOB_NAME}=small").items), 120, "the pods of Job small to be bound")

    held = kubectl("netsched", "why", "job/huge", "-n", namespace)
    assert held.returncode == 0, held.stderr
    lines = held.stdout.splitlines()
    assert lines[:2] == [f"Job {namespace}/huge: 3 pod(s), 3 gated",
                         f"Gang Job {namespace}/huge (size 3): 3 pod(s), 3 gated"]
    assert lines[2].startswith("  NeverFits (Warning, ")  # Blocked, as a GPUJob that never fits
    assert f"Job {namespace}/huge is Blocked, its pods stay gated: never fits" in lines[2]
    assert NEVER_STARTS in lines and "Room per rack now" in held.stdout

    ran = kubectl("netsched", "why", "jobs.batch/small", "-n", namespace, "-o", "json")
    assert ran.returncode == 0, ran.stderr
    answer = json.loads(ran.stdout)
    [g] = answer["gangs"]
    assert (g["size"], g["pods"], g["gated"], g["event"]["reason"]) == (2, 2, 0, "GangReleased")
    assert sum(r["replicas"] for r in g["runsOn"]) == 2
    # the operator's forecaster writes a running Job's finish (no start) on it; why reads it back
    def finish_only() -> str | None:  # a start written while its pods were bound, not yet running, goes
        notes = batch.read_namespaced_job("small", namespace).metadata.annotations or {}
        return notes.get(PREDICTED_FINISH) if PREDICTED_START not in notes else None
    finish = poll(finish_only, 120, "the forecaster to write Job small's predicted finish, and no start")
    answer = json.loads(kubectl("netsched", "why", "jobs.batch/small", "-n", namespace, "-o", "json").stdout)
    assert (answer["predictedStartTime"], answer["predictedCompletionTime"]) == (None, finish)

    typo = kubectl("netsched", "why", "jbo/small", "-n", namespace)
    assert (typo.returncode, typo.stdout) == (2, "")
    assert typo.stderr == ("netsched: error: why: 'jbo/small': unknown kind 'jbo'; write KIND/NAME (KIND: "
                           "jaxjob, job, jobset, lws, mpijob, paddlejob, pytorchjob, tfjob, xgboostjob) or a "
                           "GPUJob's NAME\n")
    missing = kubectl("netsched", "why", "job/nope", "-n", namespace)
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == (f"netsched: error: why: Job {namespace}/nope not found "
                              f"(kubectl get jobs -n {namespace})\n")


def test_why_finds_a_jobset_whose_crd_is_not_served_by_its_pods_labels(kubectl, core, batch, namespace):
    labels = {"jobset.sigs.k8s.io/jobset-name": "llm", "jobset.sigs.k8s.io/replicatedjob-name": "workers",
              "jobset.sigs.k8s.io/replicatedjob-replicas": "1", "jobset.sigs.k8s.io/job-index": "0"}
    made = job("llm-workers-0", 2, 1)  # the Job the JobSet controller would make, with its labels
    made["spec"]["template"]["metadata"]["labels"] = labels
    batch.create_namespaced_job(namespace, made)
    poll(lambda: any(e.reason == "GangReleased" for e in core.list_namespaced_event(
        namespace, field_selector="involvedObject.name=llm-workers-0").items), 120,
        "a GangReleased Event on Job llm-workers-0")

    out = kubectl("netsched", "why", "jobset/llm", "-n", namespace)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == (f"JobSet {namespace}/llm: 2 pod(s), 0 gated (the object itself was not found: its "
                        "pods were)")
    assert lines[1] == f"Gang JobSet {namespace}/llm-workers-0 (size 2): 2 pod(s), 0 gated"
    assert lines[2].startswith("  GangReleased (Normal, ")
    missing = kubectl("netsched", "why", "lws/llm", "-n", namespace)
    assert (missing.returncode, missing.stderr) == (1, (
        f"netsched: error: why: LeaderWorkerSet {namespace}/llm not found, and no pod in {namespace} is "
        "labelled leaderworkerset.sigs.k8s.io/name=llm "
        f"(kubectl get leaderworkersets,pods -n {namespace})\n"))
