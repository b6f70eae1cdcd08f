"""Faults and malformed input on the real control plane: what the operator and extender say, and
that nothing loops, raises or slips through."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

from kubernetes import client

from netsched.api.conditions import find
from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.api.labels import JOB_GPUS, JOB_LABEL, RACK_LABEL
from netsched.devcluster.devcluster import EXTENDER
from netsched.devcluster.pods import DURATION_ANNOTATION, gpu_pod
from netsched.devcluster.processes import pid_alive
from netsched.devcluster.wait import poll
from netsched.operator.gpujobs.reconcile import BACKOFF, PERMANENT_FIRST_RETRY
from netsched.testing import extender_http
from netsched.testing.builders import make_gpujob


def _events(core, namespace: str, name: str) -> list[client.CoreV1Event]:
    return core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items


def test_a_pod_the_api_server_refuses_is_said_once_and_retried_with_a_backoff(dev_cluster, core, namespace):
    jobs = client.CustomObjectsApi(dev_cluster.api_client())
    missing = f"missing-{uuid.uuid4().hex[:6]}"
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "refused", replicas=2, gpus=4, duration="600s", manifest=True, priorityClassName=missing))

    def refused():
        job = jobs.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "refused")
        ready = find((job.get("status") or {}).get("conditions") or [], "PodsReady")
        return ready if ready and ready["reason"] == "PodsRefused" else None
    ready = poll(refused, 60, "the PodsRefused condition")
    assert ready["status"] == "False" and missing in ready["message"]
    assert "spec.priorityClassName" in ready["message"] and "create that PriorityClass" in ready["message"]
    assert ready["message"].endswith("so the job goes on by itself once that is fixed")

    # a second refusal after the first backoff, and the next wait twice as long: a loop that retried
    # every tick, or said every try, would show by now
    def backed_off():
        status = jobs.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "refused")["status"]
        return (b := status.get(BACKOFF)) and b["failures"] >= 2 and b
    backoff = poll(backed_off, 60, "a second refused try")
    assert (backoff["failures"], backoff["delaySeconds"]) == (2, 2 * PERMANENT_FIRST_RETRY)
    events = _events(core, namespace, "refused")
    warnings = [e for e in events if e.type == "Warning"]
    assert [e.reason for e in warnings] == ["PodsRefused"] and (warnings[0].count or 1) == 1
    assert "PodsCreated" not in {e.reason for e in events} and len(events) <= 3
    assert not core.list_namespaced_pod(namespace, label_selector=f"{JOB_LABEL}=refused").items
    status = jobs.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "refused")["status"]
    assert (status["phase"], status["reason"]) == ("Blocked", "PodsRefused")
    assert not {"predictedStartTime", "predictedCompletionTime"} & set(status)  # forecast passes ran
    why = subprocess.run([sys.executable, "-m", "netsched", "why", "refused", "-n", namespace,
                          f"--kubeconfig={dev_cluster.kubeconfig}"],
                         capture_output=True, text=True, timeout=120)
    assert why.returncode == 0, why.stderr
    assert why.stdout.splitlines()[:2] == [f"GPUJob {namespace}/refused: Blocked",
                                           f"PodsReady: PodsRefused: {ready['message']}"]

    # the cluster is fixed: the next try (at most the 5 min cap away; here the third, 35 s in) succeeds
    scheduling = client.SchedulingV1Api(dev_cluster.api_client())
    scheduling.create_priority_class({"metadata": {"name": missing}, "value": 10})
    try:
        selector = f"{JOB_LABEL}=refused"
        poll(lambda: len(core.list_namespaced_pod(namespace, label_selector=selector).items) == 2, 90,
             "the pods, once the class exists")
        created = poll(lambda: [e.message for e in _events(core, namespace, "refused")
                                if e.reason == "PodsCreated"], 30, "the PodsCreated Event")
        assert created == ["created 2 pod(s) of 4 GPU(s) behind the gang gate until the whole gang fits"]
        poll(lambda: jobs.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "refused")["status"]
             ["phase"] != "Blocked", 30, "the job to leave Blocked")
    finally:
        scheduling.delete_priority_class(missing)


MALFORMED = {  # name -> (spec fields, the field the condition must name)
    "env-number": ({"template": {"spec": {"containers": [{"name": "main", "image": "trainer:1", "env": 5}]}}},
                   "spec.template.spec.containers[0].env"),
    "env-string": ({"template": {"spec": {"containers": [{"name": "main", "image": "trainer:1",
                                                           "env": "A=1"}]}}},
                   "spec.template.spec.containers[0].env"),
    "cpu-lots": ({"template": {"spec": {"containers": [{"name": "main", "image": "trainer:1",
                                                         "resources": {"requests": {"cpu": "lots"}}}]}}},
                 "spec.template.spec.containers[0].resources.requests.cpu"),
    "annotations-too-big": ({"template": {"metadata": {"annotations": {"notes": "x" * (256 * 1024)}},
                                          "spec": {"containers": [{"name": "main", "image": "trainer:1"}]}}},
                            "spec.template.metadata.annotations"),
    "gates-number": ({"template": {"spec": {"schedulingGates": 5,
                                            "containers": [{"name": "main", "image": "trainer:1"}]}}},
                     "spec.template.spec.schedulingGates"),
    "galaxy": ({"template": {"metadata": {"annotations": {"netsched.io/max-peer-distance": "galaxy"}},
                             "spec": {"containers": [{"name": "main", "image": "trainer:1"}]}}},
               "spec.template.metadata.annotations[netsched.io/max-peer-distance]: 'galaxy' is not a "
               "topology level of this cluster: write one of node, rack, zone"),
    "data-distance-alone": ({"network": {"maxDataDistance": "rack"}}, "spec.network.maxDataDistance"),
    "no-such-zone": ({"network": {"maxDataDistance": "zone"},
                      "dataSources": [{"name": "d", "kind": "zone", "location": "zone-nowhere"}]},
                     "spec.dataSources[0].location"),
    "finer-than-the-data": ({"network": {"maxDataDistance": "rack"},
                             "dataSources": [{"name": "d", "kind": "zone", "location": "zone-a"}]},
                            "spec.network.maxDataDistance"),
}


def test_malformed_gpujobs_the_api_server_accepts_get_one_clear_warning(dev_cluster, core, namespace):
    jobs = client.CustomObjectsApi(dev_cluster.api_client())
    for name, (fields, _) in MALFORMED.items():
        jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL,
                                             make_gpujob(name, manifest=True, **fields))
    for name, (_, field) in MALFORMED.items():
        def said(name=name):
            job = jobs.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
            ready = find((job.get("status") or {}).get("conditions") or [], "PodsReady")
            return ready if ready and ready["reason"] == "InvalidSpec" else None
        ready = poll(said, 60, f"GPUJob {name}'s InvalidSpec condition")
        assert field in ready["message"], (name, ready["message"])
    time.sleep(5)  # five more ticks of each job: still one Warning each, no pod
    for name in MALFORMED:
        warnings = [e.reason for e in _events(core, namespace, name) if e.type == "Warning"]
        assert warnings == ["InvalidSpec"], (name, warnings)
    assert not core.list_namespaced_pod(namespace).items


def test_one_gpujob_the_forecast_cannot_read_stops_no_other_jobs_forecast(dev_cluster, core, namespace):
    jobs = client.CustomObjectsApi(dev_cluster.api_client())
    lots, _ = MALFORMED["cpu-lots"]
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL,
                                         make_gpujob("lots", manifest=True, **lots))
    # two jobs for one node's 8 GPUs: "next" waits for "first", so it has a predicted start as well
    node = core.list_node().items[0].metadata.name
    one_node = {"template": {"metadata": {"annotations": {DURATION_ANNOTATION: "600s"}}, "spec": {
        "nodeSelector": {"kubernetes.io/hostname": node}, "containers": [{"name": "main", "image": "t:1"}]}},
        "workload": {"expectedDurationSeconds": 600}}
    # "first" running before "next" comes: a job still being scheduled has a predicted completion too
    for name, phase in (("first", "Running"), ("next", "Pending")):
        jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
            name, replicas=1, gpus=8, manifest=True, **one_node))
        poll(lambda name=name, phase=phase: _status(jobs, namespace, name).get("phase") == phase, 60,
             f"{name} to be {phase}")

    first = poll(lambda: (s := _status(jobs, namespace, "first")).get("predictedCompletionTime") and s, 60,
                 "the running job's predicted completion")
    waiting = poll(lambda: (s := _status(jobs, namespace, "next")).get("predictedStartTime") and s, 60,
                   "the waiting job's predicted start")
    assert first["phase"] == "Running" and waiting["phase"] == "Pending"
    assert waiting["predictedStartTime"] == first["predictedCompletionTime"]
    assert waiting["predictedCompletionTime"] > waiting["predictedStartTime"]
    bad = poll(lambda: (s := _status(jobs, namespace, "lots")).get("predictionBasis", "").startswith(
        "no forecast") and s, 60, "the cpu: lots job's basis to say why it has no forecast")
    assert "spec.template.spec.containers[0].resources.requests.cpu: 'lots'" in bad["predictionBasis"]
    assert not {"predictedStartTime", "predictedCompletionTime"} & set(bad)
    assert find(bad["conditions"], "PodsReady")["reason"] == "InvalidSpec"


def _status(jobs, namespace: str, name: str) -> dict:
    return jobs.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name).get("status") or {}


def test_a_gang_whose_node_affinity_says_gt_is_admitted(dev_cluster, core, namespace):
    jobs = client.CustomObjectsApi(dev_cluster.api_client())
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["4"]}]}]}}}
    template = {"metadata": {"annotations": {DURATION_ANNOTATION: "600s"}},
                "spec": {"affinity": affinity, "containers": [{"name": "main", "image": "trainer:1"}]}}
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "gt", replicas=2, gpus=4, manifest=True, template=template))

    def running():
        job = jobs.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "gt")
        return (job.get("status") or {}).get("phase") == "Running"
    poll(running, 90, "the gang with a Gt node affinity to run")


def test_a_non_ascii_number_in_an_annotation_is_named_and_the_pod_not_bound(core, namespace):
    core.create_namespaced_pod(namespace, gpu_pod("superscript", 1, annotations={JOB_GPUS: "\u00b2"}))
    failed = poll(lambda: [e.message for e in core.list_namespaced_event(
        namespace, field_selector="involvedObject.name=superscript,reason=FailedScheduling").items], 60,
        "a FailedScheduling Event for the pod")
    assert any(f"{JOB_GPUS}='\u00b2' must be a whole number of GPUs" in m for m in failed), failed
    assert core.read_namespaced_pod("superscript", namespace).spec.node_name is None


def test_a_rack_bound_gang_stays_in_one_rack_while_the_extender_is_down(dev_cluster, core, namespace):
    """kube-scheduler skips an ignorable extender it cannot reach; the rack the operator wrote into
    the pods' nodeSelector as it lifted the gate is what keeps the gang together then."""
    pid = dev_cluster.status()["components"][EXTENDER]["pid"]
    os.kill(pid, signal.SIGKILL)
    try:
        poll(lambda: not pid_alive(pid), 30, "the extender to die")
        jobs = client.CustomObjectsApi(dev_cluster.api_client())
        template = {"metadata": {"annotations": {DURATION_ANNOTATION: "600s"}},
                    "spec": {"containers": [{"name": "main", "image": "trainer:1"}]}}
        jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
            "racked", replicas=4, gpus=2, manifest=True, template=template,
            network={"maxPeerDistance": "rack"}))
        pods = poll(lambda: (found := core.list_namespaced_pod(namespace).items) and len(found) == 4
                    and all(p.spec.node_name for p in found) and found, 120, "the gang's 4 pods to be bound")
        racks = {core.read_node(p.spec.node_name).metadata.labels[RACK_LABEL] for p in pods}
        assert len(racks) == 1, [p.spec.node_name for p in pods]
        assert all(p.spec.node_selector == {RACK_LABEL: next(iter(racks))} for p in pods)
    finally:
        dev_cluster.restart(EXTENDER)


def test_a_client_that_stalls_mid_body_gets_408_and_the_extender_goes_on_serving(dev_cluster):
    host, port = dev_cluster.extender_url.split("://")[1].split(":")
    tls = extender_http.scheduler_tls(dev_cluster)  # kube-scheduler's certificate: a client it answers
    with contextlib.closing(socket.create_connection((host, int(port)), timeout=60)) as raw, \
            contextlib.closing(tls.wrap_socket(raw, server_hostname=host) if tls else raw) as stalled:
        stalled.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Content-Length: 1000\r\n\r\n{\"Pod\": ")
        with urllib.request.urlopen(f"{dev_cluster.extender_url}/healthz", timeout=10, context=tls) as resp:
            assert resp.status == 200  # another client is served while this one stalls
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = stalled.recv(4096)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
