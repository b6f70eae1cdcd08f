"""What a whatif (and why) process loads: the cluster read and the answer build no API class of the kubernetes
client (each imports hundreds of model classes: seconds of a short command on a busy machine), and a
job that fits now loads neither OR-Tools nor numpy. Each case runs in a fresh interpreter, whose
sys.modules says what the path imported."""

from __future__ import annotations

import json
import subprocess
import sys

# reads the cluster from a FakeKube (a real ApiClient) and answers for a job, then prints what it loaded
SCRIPT = """
import json, sys
from netsched.foresight.whatif import Cluster, as_submitted, what_if
from netsched.testing.builders import CLUSTER, make_gpujob, make_pod
from netsched.testing.kube import FakeKube

kube = FakeKube(CLUSTER)
kube.add({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "urgent"},
          "value": 1000}, "priorityclasses")
if sys.argv[1] == "full":  # every GPU held by a gang of lower priority: the packer's dry run answers
    for i, node in enumerate(CLUSTER):
        name = node["metadata"]["name"]
        kube.add(make_pod(f"big-{i}", name, gpus=8, job="big", owner="GPUJob", priority=0))
job = make_gpujob("next", replicas=2, gpus=8, manifest=True, priorityClassName="urgent")
answer = what_if(Cluster.read(kube), as_submitted(job, "ml"), [])
print(json.dumps({"fits": answer["schedulable"]["fits"], "plan": answer["packer"].get("wouldPlan"),
                  "modules": sorted(sys.modules)}))
"""
API_CLASSES = "kubernetes.client.api."
SOLVER = {"ortools", "numpy", "pandas"}  # OR-Tools and what it imports


def run(case: str) -> dict:
    done = subprocess.run([sys.executable, "-c", SCRIPT, case], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m.startswith(API_CLASSES) or m.split(".")[0] in SOLVER]


def test_a_job_that_fits_now_loads_no_client_api_class_nor_the_solver():
    out = run("empty")
    assert out["fits"] is True and out["plan"] is None
    assert heavy(out["modules"]) == []


def test_the_packer_s_dry_run_loads_the_solver_and_still_no_client_api_class():
    out = run("full")
    assert out["fits"] is False and out["plan"] is True  # the dry run ran: the check below can see it
    assert "ortools" in out["modules"]
    assert [m for m in out["modules"] if m.startswith(API_CLASSES)] == []


WHY_SCRIPT = """
import json, sys
from netsched.foresight.why_workloads import Live
from netsched.testing.builders import CLUSTER, make_batch_job
from netsched.testing.kube import FakeKube

kube = FakeKube([*CLUSTER, make_batch_job("train", 2)])
found, gone = Live.read(kube, "Job", "ml", "train"), Live.read(kube, "JobSet", "ml", "llm")
print(json.dumps({"found": (found.body or {}).get("metadata", {}).get("name"), "jobs": len(found.jobs),
                  "gone": gone.body, "modules": sorted(sys.modules)}))
"""


def test_why_reads_a_workload_with_no_client_api_class():
    done = subprocess.run([sys.executable, "-c", WHY_SCRIPT], capture_output=True, text=True, check=True)
    out = json.loads(done.stdout)
    assert out["found"] == "train" and out["jobs"] == 1 and out["gone"] is None
    assert [m for m in out["modules"] if m.startswith(API_CLASSES)] == []
