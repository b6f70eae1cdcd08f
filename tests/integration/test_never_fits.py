"""A GPUJob that could never fit the real dev-cluster (8 KWOK nodes of 8 GPUs) is Blocked with reason
NeverFits and a Warning in plain numbers; whatif and why say the same words as subprocesses; a node
large enough, once added, lets it run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from netsched.api.conditions import find
from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.devcluster.topology import GPUNode
from netsched.devcluster.wait import poll
from netsched.foresight.whatif import NEVER_STARTS
from netsched.testing.builders import make_gpujob

ROOT = Path(__file__).parents[2]
SHRINK = "lower spec.replicas or spec.gang.minAvailable, or add nodes"


def _status(jobs, namespace: str, name: str) -> dict:
    return jobs.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name).get("status") or {}


def _blocked(jobs, namespace: str, name: str) -> dict:
    """The job's status once it is Blocked with a NeverFits Schedulable condition."""
    def reached():
        status = _status(jobs, namespace, name)
        said = find(status.get("conditions") or [], "Schedulable")
        return status if status.get("phase") == "Blocked" and said and said["reason"] == "NeverFits" else None
    return poll(reached, 120, f"GPUJob {namespace}/{name} to be Blocked with reason NeverFits")


def _warnings(core, namespace: str, name: str) -> list[str]:
    events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return [e.message for e in events if e.type == "Warning" and e.reason == "NeverFits"]


def _netsched(dev_cluster, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "netsched", *args, f"--kubeconfig={dev_cluster.kubeconfig}"],
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("name, replicas, gpus, network, says", [
    pytest.param("too-many", 10, 8, None, f"never fits: needs 80 GPUs, the cluster has 64; {SHRINK}",
                 id="10x8"),
    pytest.param("too-wide", 1, 16, None, "never fits: no node has 16 GPUs, the largest has 8; lower "
                 "spec.gpusPerReplica, or add a node with more", id="16-per-replica"),
    pytest.param("too-racked", 3, 8, {"maxPeerDistance": "rack"},
                 "never fits: needs 3 replica(s) of 8 GPUs within one rack, the largest rack holds 2 "
                 "(rack-a1: 2 nodes, 16 GPUs); it could run with maxPeerDistance: zone, or with "
                 "spec.gang.minAvailable at most 2", id="3x8-in-one-rack"),
])
def test_a_job_that_never_fits_is_blocked_with_a_warning_and_whatif_and_why_say_the_same(
        dev_cluster, core, jobs, namespace, tmp_path, name, replicas, gpus, network, says):
    body = make_gpujob(name, replicas=replicas, gpus=gpus, duration="5s", manifest=True, network=network)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(body))
    whatif = _netsched(dev_cluster, "whatif", "-f", str(path), "-n", namespace)
    assert whatif.returncode == 0 and "Traceback" not in whatif.stderr, whatif.stderr
    assert f"Fits now: no (NeverFits): {says}" in whatif.stdout.splitlines()
    assert NEVER_STARTS in whatif.stdout.splitlines() and "no predicted end" not in whatif.stdout

    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    status = _blocked(jobs, namespace, name)
    schedulable = find(status["conditions"], "Schedulable")
    assert (schedulable["status"], schedulable["message"]) == ("False", says)
    assert status["reason"] == "NeverFits" and status["blockedSince"]
    assert not {"predictedStartTime", "predictedCompletionTime", "predictedAfter"} & set(status)
    assert poll(lambda: _warnings(core, namespace, name), 30, "the NeverFits Warning") == [says]

    why = _netsched(dev_cluster, "why", name, "-n", namespace)
    assert why.returncode == 0 and "Traceback" not in why.stderr, why.stderr
    assert why.stdout.splitlines()[:3] == [f"GPUJob {namespace}/{name}: Blocked",
                                           f"Schedulable: NeverFits: {says}", NEVER_STARTS]
    # one Warning for one message, however many reconciles saw it (the status still says the same)
    assert _warnings(core, namespace, name) == [says] and _status(jobs, namespace, name)["phase"] == "Blocked"


def test_a_blocked_job_runs_once_a_node_large_enough_is_added(dev_cluster, core, jobs, namespace):
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "wide", replicas=1, gpus=16, duration="5s", manifest=True))
    _blocked(jobs, namespace, "wide")
    big = GPUNode(f"gpu-big-{namespace}", "zone-x", "rack-x1", "NVIDIA-H100-80GB-HBM3", gpus=16).manifest()
    core.create_node(big)
    try:
        done = poll(lambda: (s := _status(jobs, namespace, "wide")).get("phase") == "Succeeded" and s, 180,
                    "the job to run on the new node and succeed")
        assert [p["node"] for p in done["placements"]] == [big["metadata"]["name"]]
        assert "blockedSince" not in done
        said = find(done["conditions"], "Schedulable")
        assert (said["status"], said["reason"]) == ("True", "Fits")
    finally:
        core.delete_node(big["metadata"]["name"])
