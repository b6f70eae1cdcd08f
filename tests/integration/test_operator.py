"""The GPUJob operator against the real control plane, kube-scheduler, extender and KWOK."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest
from kubernetes import client

from netsched.api.conditions import find
from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.api.labels import JOB_LABEL, RACK_LABEL
from netsched.devcluster.binaries import ensure_binaries
from netsched.devcluster.devcluster import OPERATOR
from netsched.devcluster.pods import FAIL_AFTER_ANNOTATION, gpu_pod
from netsched.devcluster.wait import poll
from netsched.records.reader import read_rows
from netsched.testing.builders import make_gpujob

EXAMPLES = Path(__file__).parents[2] / "manifests" / "examples"


def _get(jobs, namespace: str, name: str) -> dict:
    return jobs.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)


def _phase(jobs, namespace: str, name: str, phase: str, timeout: float = 60) -> dict:
    def reached():
        job = _get(jobs, namespace, name)
        return job if job.get("status", {}).get("phase") == phase else None
    return poll(reached, timeout, f"GPUJob {namespace}/{name} to be {phase}")


def _reasons(core, namespace: str, name: str) -> list[str]:
    events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return [e.reason for e in sorted(events, key=lambda e: e.metadata.creation_timestamp)]


def _records(dev_cluster, uid: str) -> list[dict]:
    return [r for r in read_rows(dev_cluster.records_file) if r["uid"] == uid]


def _condition(job: dict, type_: str) -> dict:
    return find(job["status"]["conditions"], type_)


def test_a_gpujob_runs_then_succeeds_with_true_status_events_and_one_record(dev_cluster, core, jobs,
                                                                              namespace):
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "train", replicas=2, gpus=4, duration="4s", manifest=True,
        workload={"kind": "training", "inputSizeGB": 10}))
    running = _phase(jobs, namespace, "train", "Running")
    assert running["status"]["ready"] == "2/2" and running["status"]["gpus"] == 8
    assert {p["pod"] for p in running["status"]["placements"]} == {"train-0", "train-1"}
    assert all(p["zone"] and p["rack"] for p in running["status"]["placements"])
    pods = core.list_namespaced_pod(namespace, label_selector=f"{JOB_LABEL}=train").items
    assert len(pods) == 2 and all(p.spec.scheduler_name == "netsched" for p in pods)
    assert all(p.metadata.owner_references[0].uid == running["metadata"]["uid"] for p in pods)

    done = _phase(jobs, namespace, "train", "Succeeded")
    assert _condition(done, "Succeeded")["reason"] == "AllReplicasSucceeded"
    assert _condition(done, "Admitted")["reason"] == "GangReleased"
    assert done["status"]["startTime"] <= done["status"]["completionTime"]
    assert done["status"]["observedGeneration"] == done["metadata"]["generation"]
    # events follow the status patch that caused them, so the last one may land just after the phase;
    # timestamps have 1 s resolution, so order within one second is lost
    reasons = poll(lambda: (r := _reasons(core, namespace, "train")) and "AllReplicasSucceeded" in r and r,
                   10, "the AllReplicasSucceeded event")
    assert sorted(reasons) == sorted(["PodsCreated", "Pending", "GangReleased", "Scheduling", "Running",
                                      "AllReplicasSucceeded"])
    assert reasons[-1] == "AllReplicasSucceeded"
    poll(lambda: _condition(_get(jobs, namespace, "train"), "Recorded")["status"] == "True", 30,
         "the job to be recorded")
    [row] = _records(dev_cluster, done["metadata"]["uid"])
    assert row["outcome"] == "Succeeded" and row["gpus"] == 8 and row["input_size_gb"] == 10
    assert 3 <= row["duration_seconds"] <= 10 and sorted(row["nodes"]) == sorted(
        p["node"] for p in running["status"]["placements"])


def test_a_gang_that_cannot_fit_waits_gated_and_starts_when_capacity_frees(core, jobs, namespace):
    nodes = [n.metadata.name for n in core.list_node().items]
    for i, node in enumerate(nodes[:-1]):  # fill every node but one
        blocker = gpu_pod(f"blocker-{i}", 8, duration="600s")
        blocker["spec"]["nodeName"] = node
        core.create_namespaced_pod(namespace, blocker)
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL,
                                         make_gpujob("big", replicas=2, gpus=8, duration="3s", manifest=True))
    waiting = poll(lambda: (j := _get(jobs, namespace, "big")).get("status", {}).get("conditions")
                   and _condition(j, "Admitted")["status"] == "False" and j, 30, "the gang to wait")
    assert waiting["status"]["phase"] == "Pending"
    assert "needs 2 replica(s) of 8 GPUs; 1 fit now" in _condition(waiting, "Admitted")["message"]
    schedulable = _condition(waiting, "Schedulable")
    assert (schedulable["status"], schedulable["reason"]) == ("False", "InsufficientResources")
    pods = core.list_namespaced_pod(namespace, label_selector=f"{JOB_LABEL}=big").items
    assert len(pods) == 2 and all(p.spec.scheduling_gates and not p.spec.node_name for p in pods)

    core.delete_namespaced_pod("blocker-0", namespace, grace_period_seconds=0)
    running = _phase(jobs, namespace, "big", "Running", timeout=30)
    assert len({p["node"] for p in running["status"]["placements"]}) == 2
    assert "WaitingForCapacity" in _reasons(core, namespace, "big")


def test_a_gang_no_rack_can_hold_says_so_and_which_limit_would_let_it_run(core, jobs, namespace):
    racks = {}  # racks of 2 nodes x 8 GPUs, zones of 2 racks: one node of each rack is taken
    for node in core.list_node().items:
        racks.setdefault(node.metadata.labels[RACK_LABEL], node.metadata.name)
    for i, node in enumerate(racks.values()):
        blocker = gpu_pod(f"blocker-{i}", 8, duration="600s")
        blocker["spec"]["nodeName"] = node
        core.create_namespaced_pod(namespace, blocker)
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "wide", replicas=2, gpus=8, duration="600s", manifest=True, network={"maxPeerDistance": "rack"}))
    waiting = poll(lambda: (j := _get(jobs, namespace, "wide")).get("status", {}).get("conditions")
                   and _condition(j, "Schedulable") and j, 30, "the gang to say whether it is schedulable")
    schedulable = _condition(waiting, "Schedulable")
    assert (schedulable["status"], schedulable["reason"]) == ("False", "NoDomainLargeEnough")
    assert schedulable["message"].startswith("needs 2 replica(s) of 8 GPUs in one rack; ")
    assert schedulable["message"].endswith("all 2 would fit now with maxPeerDistance: zone")
    assert _condition(waiting, "Admitted")["message"] == schedulable["message"]


@pytest.mark.parametrize("change, message", [
    pytest.param({"gang": {"minAvailable": 3}}, "spec.gang.minAvailable must be at most spec.replicas",
                 id="gang-larger-than-job"),
    pytest.param({"dataSources": [{"name": "in", "kind": "endpoint", "location": "x"}]},
                 "a data source of kind endpoint needs `endpoint`", id="endpoint-without-address"),
    # any level name may be configured: the API server refuses only what is no name (a level the
    # cluster lacks is the operator's InvalidSpec, tests/integration/test_operator_topology_levels.py)
    pytest.param({"network": {"maxPeerDistance": "Rack"}},
                 "spec.network.maxPeerDistance in body should match", id="not-a-level-name"),
])
def test_an_invalid_gpujob_is_rejected_with_a_message_that_says_what_to_fix(jobs, namespace, change,
                                                                            message):
    body = make_gpujob("bad", replicas=2, gpus=2, duration="3s", manifest=True)
    body["spec"].update(change)
    with pytest.raises(client.ApiException) as err:
        jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    assert err.value.status == 422 and message in json.loads(err.value.body)["message"]


def test_gpus_in_the_template_and_changing_replicas_are_refused(jobs, namespace):
    body = make_gpujob("gpus-twice", gpus=2, duration="3s", manifest=True)
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 2}}
    with pytest.raises(client.ApiException) as err:
        jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    assert "the operator sets it from spec.gpusPerReplica" in json.loads(err.value.body)["message"]
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL,
                                         make_gpujob("fixed", gpus=2, duration="3s", manifest=True))
    with pytest.raises(client.ApiException) as err:
        jobs.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "fixed",
                                            {"spec": {"replicas": 3}})
    assert "spec.replicas cannot change after creation" in json.loads(err.value.body)["message"]


def test_failed_pods_are_retried_up_to_the_backoff_limit_then_the_job_fails(dev_cluster, core, jobs,
                                                                             namespace):
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "flaky", replicas=1, gpus=2, duration=None, manifest=True, backoffLimit=1,
        annotations={FAIL_AFTER_ANNOTATION: "1s"}))
    failed = _phase(jobs, namespace, "flaky", "Failed", timeout=60)
    assert _condition(failed, "Failed")["reason"] == "BackoffLimitExceeded"
    assert failed["status"]["failures"] == 2
    names = {p.metadata.name for p in core.list_namespaced_pod(namespace).items}
    assert names == {"flaky-0", "flaky-0-a1"}
    assert _reasons(core, namespace, "flaky").count("PodFailed") == 1
    poll(lambda: _records(dev_cluster, failed["metadata"]["uid"]), 30, "the failed job's record")
    assert _records(dev_cluster, failed["metadata"]["uid"])[0]["outcome"] == "Failed"


def test_a_job_over_its_max_runtime_is_stopped(core, jobs, namespace):
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "slow", replicas=2, gpus=2, duration="600s", manifest=True, maxRuntimeSeconds=3))
    failed = _phase(jobs, namespace, "slow", "Failed", timeout=60)
    assert _condition(failed, "Failed")["reason"] == "MaxRuntimeExceeded"
    poll(lambda: not core.list_namespaced_pod(namespace).items, 30, "the job's pods to be stopped")


def test_an_operator_killed_mid_gang_finishes_the_job_without_duplicate_pods(dev_cluster, core, jobs,
                                                                              namespace):
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "steady", replicas=3, gpus=2, duration="8s", manifest=True))
    poll(lambda: len(core.list_namespaced_pod(namespace).items) == 3, 30, "three pods")
    os.kill(dev_cluster.status()["components"][OPERATOR]["pid"], signal.SIGKILL)
    poll(lambda: OPERATOR not in dev_cluster.running_components(), 10, "the operator to die")
    try:  # a pod deleted by hand while nobody watches
        core.delete_namespaced_pod("steady-1", namespace, grace_period_seconds=0)
    finally:
        dev_cluster.restart(OPERATOR)
    done = _phase(jobs, namespace, "steady", "Succeeded", timeout=90)
    names = sorted(p.metadata.name for p in core.list_namespaced_pod(namespace).items)
    assert names == ["steady-0", "steady-1", "steady-2"]
    assert len(_records(dev_cluster, done["metadata"]["uid"])) == 1
    # deleting the job removes its pods (owner references; no finalizer to get stuck on)
    jobs.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "steady")
    poll(lambda: not core.list_namespaced_pod(namespace).items, 60, "the deleted job's pods to go")


def test_the_examples_apply_and_run_with_kubectl(dev_cluster, jobs, namespace):
    kubectl = [str(ensure_binaries(quiet=True) / "kubectl"), f"--kubeconfig={dev_cluster.kubeconfig}",
               "-n", namespace]
    applied = subprocess.run([*kubectl, "apply", "-f", str(EXAMPLES)], capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr
    bad = subprocess.run([*kubectl, "apply", "-f", str(EXAMPLES / "invalid")], capture_output=True, text=True)
    assert bad.returncode != 0 and "spec.gang.minAvailable must be at most spec.replicas" in bad.stderr
    for name in ("notebook", "llm-finetune"):
        _phase(jobs, namespace, name, "Succeeded", timeout=120)
    listing = subprocess.run([*kubectl, "get", "gj"], capture_output=True, text=True, check=True).stdout
    assert listing.split("\n")[0].split() == ["NAME", "PHASE", "READY", "GPUS", "ETA", "FINISH", "AGE"]
    assert "llm-finetune   Succeeded   0/4     32" in listing
    port = json.loads((dev_cluster.directory / "state.json").read_text())["ports"]["operator-metrics"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        metrics = resp.read().decode()
    assert 'netsched_gpujobs_finished_total{outcome="Succeeded",reason="AllReplicasSucceeded"}' in metrics
    assert 'netsched_gpujob_duration_seconds_count{outcome="Succeeded"}' in metrics
