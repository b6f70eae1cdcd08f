"""netsched's extender with the real kube-scheduler: placement, rejection, explanation, failure."""

from __future__ import annotations

import os
import re
import signal
import time
from collections import Counter

import pytest
from kubernetes import client

from netsched.api.labels import JOB_LABEL
from netsched.devcluster.devcluster import EXTENDER
from netsched.devcluster.pods import gpu_pod
from netsched.devcluster.wait import poll
from netsched.testing import extender_http

# the compatibility lane (make test-compat) runs it on the older Kubernetes too: the extender protocol as
# each kube-scheduler version speaks it
pytestmark = pytest.mark.compat

DATA_ZONE_B = {"netsched.io/data-source": "zone:zone-b"}


def _nodes(core: client.CoreV1Api) -> dict[str, dict[str, str]]:
    return {n.metadata.name: n.metadata.labels for n in core.list_node().items}


def _bound(core: client.CoreV1Api, namespace: str, count: int, timeout: float = 60) -> dict[str, str]:
    """Wait until `count` pods of the namespace are bound; returns pod -> node."""
    def placements():
        pods = core.list_namespaced_pod(namespace).items
        done = {p.metadata.name: p.spec.node_name for p in pods if p.spec.node_name}
        return done if len(done) >= count else None
    return poll(placements, timeout, f"{count} pods in {namespace} to be bound")


def _job(name: str, replicas: int, gpus: int, annotations: dict[str, str]) -> list[dict]:
    return [gpu_pod(f"{name}-{i}", gpus, labels={JOB_LABEL: name}, annotations=annotations)
            for i in range(replicas)]


def test_a_jobs_pods_land_together_where_the_scorer_prefers(dev_cluster, core, namespace):
    labels = _nodes(core)
    # 4 x 4 GPUs fill one rack of two 8-GPU nodes; the data lives in zone-b
    job = _job("train", 4, 4, DATA_ZONE_B | {"netsched.io/job-gpus": "16"})
    for pod in job:
        core.create_namespaced_pod(namespace, pod)
    placed = _bound(core, namespace, 4)

    racks = {labels[n]["netsched.io/rack"] for n in placed.values()}
    zones = {labels[n]["topology.kubernetes.io/zone"] for n in placed.values()}
    assert len(racks) == 1 and zones == {"zone-b"}, placed

    # each pod says why, on the pod and on the debug endpoint
    events = poll(lambda: (e := core.list_namespaced_event(
        namespace, field_selector="reason=NetworkPlacement").items) and len(e) == 4 and e,
        30, "a NetworkPlacement event per pod")
    for event in events:
        assert event.message.startswith(f"netsched placed the pod on {placed[event.involved_object.name]}")
    status, decision = extender_http.decision(dev_cluster, namespace, "train-3")
    assert status == 200 and decision["node"] == placed["train-3"] and decision["job"] == "train"
    assert "peers" in decision["top"][0]["factors"]


def test_a_pod_kept_near_its_data_waits_when_that_zone_is_full_and_says_why(core, namespace):
    labels = _nodes(core)
    zone_a_gpus = sum(8 for n in labels.values() if n["topology.kubernetes.io/zone"] == "zone-a")
    needs = {"netsched.io/data-source": "zone:zone-a", "netsched.io/max-data-distance": "zone"}
    for i in range(zone_a_gpus // 4):
        core.create_namespaced_pod(namespace, gpu_pod(f"near-data-{i}", 4, annotations=needs))
    placed = _bound(core, namespace, zone_a_gpus // 4)
    assert {labels[n]["topology.kubernetes.io/zone"] for n in placed.values()} == {"zone-a"}

    # the operator's webhook wrote the limit as required node affinity, so kube-scheduler keeps it itself
    pod = core.create_namespaced_pod(namespace, gpu_pod("one-more", 4, annotations=needs))
    required = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    assert [[e.to_dict() for e in term.match_expressions] for term in required.node_selector_terms] == [
        [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}]]
    # zone-a is full and zone-b is too far from the data: the pod waits, and says why
    event = poll(lambda: next(iter(core.list_namespaced_event(
        namespace, field_selector="involvedObject.name=one-more,reason=FailedScheduling").items), None),
        30, "a FailedScheduling event for one-more")
    assert "Insufficient nvidia.com/gpu" in event.message and "node affinity" in event.message, event.message
    assert core.read_namespaced_pod("one-more", namespace).spec.node_name is None


def _watch_updates(cluster) -> Counter[tuple[str, str]]:
    """The extender's netsched_extender_watch_updates_total by (kind, effect)."""
    text = extender_http.metrics_text(cluster)
    found: Counter[tuple[str, str]] = Counter()
    for labels, value in re.findall(r"^netsched_extender_watch_updates_total\{(.*)\} (\S+)$", text, re.M):
        fields = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        found[fields["kind"], fields["effect"]] = int(float(value))
    return found


def test_node_status_updates_stay_in_the_watch_process_and_a_label_change_reaches_the_server(dev_cluster,
                                                                                            core):
    name = sorted(_nodes(core))[0]
    before = _watch_updates(dev_cluster)
    for k in range(3):  # what a heartbeat changes: a condition's times and reason
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        core.patch_node_status(name, {"status": {"conditions": [
            {"type": "NetschedProbe", "status": "True", "reason": f"Beat{k}", "message": "a test's heartbeat",
             "lastHeartbeatTime": now, "lastTransitionTime": now}]}})
    poll(lambda: _watch_updates(dev_cluster)["nodes", "unchanged"] >= before["nodes", "unchanged"] + 3, 30,
         "the watch process to count 3 node updates it let go")
    assert _watch_updates(dev_cluster)["nodes", "changed"] == before["nodes", "changed"]
    core.patch_node(name, {"metadata": {"labels": {"netsched.io/test-probe": "1"}}})
    try:
        poll(lambda: _watch_updates(dev_cluster)["nodes", "changed"] == before["nodes", "changed"] + 1, 30,
             "the label change to reach the serving process")
    finally:
        core.patch_node(name, {"metadata": {"labels": {"netsched.io/test-probe": None}}})


def test_pods_still_schedule_while_the_extender_is_down_and_none_is_lost(dev_cluster, core, namespace):
    pid = dev_cluster.status()["components"][EXTENDER]["pid"]
    os.kill(pid, signal.SIGKILL)
    poll(lambda: EXTENDER not in dev_cluster.running_components(), 10, "the extender to die")
    try:
        for pod in _job("while-down", 3, 2, {}):
            core.create_namespaced_pod(namespace, pod)
        # ignorable: kube-scheduler decides alone; _bound times out (failing the test) if it does not
        placed = _bound(core, namespace, 3, timeout=30)
        assert set(placed.values()) <= set(_nodes(core))
    finally:
        dev_cluster.restart(EXTENDER)

    status, ready = extender_http.metrics_port_get(dev_cluster, "/readyz", token=None)  # open to probes
    assert status == 200 and ready["ready"] and ready["nodes"] == len(_nodes(core))
    core.create_namespaced_pod(namespace, gpu_pod("after", 2, labels={JOB_LABEL: "while-down"}))
    placed = _bound(core, namespace, 4)
    assert set(placed) == {"while-down-0", "while-down-1", "while-down-2", "after"}
    # the restarted extender rebuilt its cache from the apiserver: it sees the job's three pods
    _, decision = extender_http.decision(dev_cluster, namespace, "after")
    assert decision["node"] == placed["after"]
    assert decision["top"][0]["factors"]["peers"] > 0
