"""A pod gang that could never fit the real dev-cluster (an indexed Job of 10 x 8 GPUs on 8 nodes of 8)
is Blocked as a GPUJob is: one Warning on the Job in the Job's own words (spec.parallelism), its gated
pods noted Blocked, `why job/NAME` says it never fits, and the operator's gauge counts it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kubernetes import client

from netsched.api.labels import GANG_BLOCKED
from netsched.devcluster.pods import gated_job
from netsched.devcluster.wait import poll
from netsched.foresight.whatif import NEVER_STARTS
from netsched.testing.cluster import operator_metric, pods_of

ROOT = Path(__file__).parents[2]
SAYS = ("never fits: needs 80 GPUs, the cluster has 64; lower spec.parallelism (and spec.completions), "
        "or add nodes")


def _warnings(core: client.CoreV1Api, namespace: str) -> list[str]:
    events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=big").items
    return [e.message for e in events if e.type == "Warning" and e.reason == "NeverFits"]


def test_a_job_that_never_fits_is_blocked_with_one_warning_in_its_own_field_names(dev_cluster, core,
                                                                                   namespace):
    client.BatchV1Api(dev_cluster.api_client()).create_namespaced_job(
        namespace, gated_job("big", 10, 8, duration="5s"))
    [said] = poll(lambda: _warnings(core, namespace), 90, "the NeverFits Warning on Job big")
    assert said == f"Job {namespace}/big is Blocked, its pods stay gated: {SAYS}"
    notes = poll(lambda: (ps := pods_of(core, namespace, "big")) and len(ps) == 10
                 and all((p.metadata.annotations or {}).get(GANG_BLOCKED) for p in ps) and ps, 60,
                 "every pod of Job big noted Blocked")
    assert {p.metadata.annotations[GANG_BLOCKED] for p in notes} == {f"NeverFits: {said}"}
    assert all(p.spec.scheduling_gates for p in notes)  # still gated
    assert poll(lambda: operator_metric(dev_cluster, "netsched_gangs", kind="Job", state="blocked") >= 1,
                60, "netsched_gangs to count the blocked Job")

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    why = subprocess.run([sys.executable, "-m", "netsched", "why", "job/big", "-n", namespace,
                          f"--kubeconfig={dev_cluster.kubeconfig}"], capture_output=True, text=True, env=env,
                         timeout=300)
    assert why.returncode == 0 and "Traceback" not in why.stderr, why.stderr
    lines = why.stdout.splitlines()
    assert f"  Blocked: NeverFits: {said}" in lines and NEVER_STARTS in lines, why.stdout
    # one Warning for one state, however many passes saw it since
    assert _warnings(core, namespace) == [said]


def test_a_job_whose_pods_a_quota_refuses_is_blocked_with_the_api_servers_words(dev_cluster, core, namespace):
    core.create_namespaced_resource_quota(namespace, {"metadata": {"name": "gpus"},
                                                      "spec": {"hard": {"requests.nvidia.com/gpu": "8"}}})
    client.BatchV1Api(dev_cluster.api_client()).create_namespaced_job(
        namespace, gated_job("capped", 4, 4, duration="5s"))

    def refused():
        events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=capped").items
        return [e.message for e in events if e.type == "Warning" and e.reason == "PodsRefused"]
    [said] = poll(refused, 120, "the PodsRefused Warning on Job capped")
    assert said.startswith(f"Job {namespace}/capped is Blocked: 2 of 4 pods to release exist, the API server "
                           "refuses the rest: ") and "exceeded quota" in said, said
    pods = pods_of(core, namespace, "capped")
    assert len(pods) == 2
    assert all(p.metadata.annotations[GANG_BLOCKED] == f"PodsRefused: {said}" for p in pods)
