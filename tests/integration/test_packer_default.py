"""The packer's default disruption policy on the real dev-cluster (its operator runs with no policy
file, as the chart's default values give it none but {mode: priced}): a high-priority job that does
not fit gets room by moving a stateless serving replica, not by restarting a training GPUJob that
has run longer than a minute.

What makes it able to fail: the replica's class (mid) is above the GPUJob's (low), so the strict
per-tier policy spares the replica and restarts the GPUJob; and the replica has run longer than the
GPUJob, so pricing both by run time alone (not knowing that a replica's restart loses no work)
restarts the GPUJob too."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

from netsched.api import plans
from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.api.labels import GPU_PRODUCT_LABEL, JOB_LABEL
from netsched.devcluster.pods import DURATION_ANNOTATION, gpu_pod
from netsched.devcluster.topology import GPU_MODELS
from netsched.devcluster.wait import poll
from netsched.testing.builders import make_gpujob
from netsched.testing.cluster import packing_plans

MID = 1000  # between the `priorities` fixture's low (100) and high (100000)
WEB_AHEAD = 60  # seconds the replica runs before the GPUJob starts: its run time is the longer one
TRAIN_RAN = 40  # seconds the GPUJob runs before the urgent job comes: its restart would lose that


@pytest.fixture
def mid(dev_cluster) -> Iterator[str]:
    sched = client.SchedulingV1Api(dev_cluster.api_client())
    name = f"test-mid-{uuid.uuid4().hex[:6]}"
    sched.create_priority_class({"metadata": {"name": name}, "value": MID})
    yield name
    sched.delete_priority_class(name)


def _hold(core, namespace: str, name: str, node: str) -> None:
    """A bare pod holding all 8 GPUs of `node`: nothing recreates it, so no plan touches it."""
    pod = gpu_pod(name, 8)
    pod["spec"]["nodeName"] = node
    core.create_namespaced_pod(namespace, pod)


def _release(core, namespace: str, name: str) -> None:
    core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    poll(lambda: not [p for p in core.list_namespaced_pod(namespace).items if p.metadata.name == name], 60,
         f"pod {name} to go")


def _running_on(core, namespace: str, selector: str, what: str) -> client.V1Pod:
    def look():
        live = [p for p in core.list_namespaced_pod(namespace, label_selector=selector).items
                if not p.metadata.deletion_timestamp]
        return len(live) == 1 and live[0].status.phase == "Running" and live[0].status.start_time and live[0]
    return poll(look, 90, what)


def _ran_at_least(pod: client.V1Pod, seconds: float, what: str) -> None:
    """Wait (a condition: the pod's own start time, as the packer reads it) until it has run `seconds`."""
    started = pod.status.start_time.timestamp()
    poll(lambda: time.time() - started >= seconds, seconds + 30, what)


def _web(priority_class: str) -> dict:
    """A serving Deployment of one replica on a whole node's GPUs, scheduled by netsched."""
    pod = gpu_pod("web", 8, labels={"app": "web"})
    pod["spec"].update(priorityClassName=priority_class, restartPolicy="Always")
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod["spec"]}}}


def test_the_default_policy_moves_a_stateless_replica_rather_than_restart_a_lower_gpujob(
        dev_cluster, core, custom, namespace, priorities, mid):
    apps = client.AppsV1Api(dev_cluster.api_client())
    nodes = sorted(core.list_node().items, key=lambda n: n.metadata.name)
    h100 = [n.metadata.name for n in nodes if n.metadata.labels.get(GPU_PRODUCT_LABEL) == GPU_MODELS[0]]
    other = [n.metadata.name for n in nodes if n.metadata.labels.get(GPU_PRODUCT_LABEL) != GPU_MODELS[0]]
    assert len(h100) >= 2 and other, "the dev-cluster has two GPU models"
    train_node, web_node, spare = h100[0], h100[1], other[0]
    # every node held but these three; the GPUJob's and the spare one held for a while, so the replica
    # can only land on its node, then the GPUJob on its own
    for i, node in enumerate(h100[2:] + other[1:]):
        _hold(core, namespace, f"hold-{i}", node)
    _hold(core, namespace, "for-train", train_node)
    _hold(core, namespace, "for-spare", spare)

    apps.create_namespaced_deployment(namespace, _web(mid))
    web = _running_on(core, namespace, "app=web", "the serving replica to run")
    assert web.spec.node_name == web_node
    _ran_at_least(web, WEB_AHEAD, f"the replica to have run {WEB_AHEAD} s")

    _release(core, namespace, "for-train")
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "train", replicas=1, gpus=8, duration="3600s", manifest=True, priorityClassName=priorities["low"]))
    train = _running_on(core, namespace, f"{JOB_LABEL}=train", "the GPUJob to run")
    assert train.spec.node_name == train_node
    _release(core, namespace, "for-spare")
    _ran_at_least(train, TRAIN_RAN, f"the GPUJob to have run {TRAIN_RAN} s")

    # the urgent job needs a whole H100 node: the GPUJob's or the replica's
    urgent_template = {"metadata": {"annotations": {DURATION_ANNOTATION: "600s"}},
                       "spec": {"nodeSelector": {GPU_PRODUCT_LABEL: GPU_MODELS[0]},
                                "containers": [{"name": "main", "image": "trainer:1"}]}}
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "urgent", replicas=1, gpus=8, manifest=True, template=urgent_template,
        priorityClassName=priorities["high"]))

    plan = poll(lambda: next(iter(packing_plans(custom)), None), 90, "a PackingPlan")
    spec = plan["spec"]
    assert spec["evictions"] == [], spec
    assert [(m["pod"], m["node"], m["to"]) for m in spec["moves"]] == [
        (f"{namespace}/{web.metadata.name}", web_node, spare)], spec
    assert [(p["pod"], p["node"]) for p in spec["placements"]] == [(f"{namespace}/urgent-0", web_node)], spec

    done = poll(lambda: (p := custom.get_cluster_custom_object(plans.GROUP, plans.VERSION, plans.PLURAL,
                                                              plan["metadata"]["name"]))
                and plans.phase(p) in plans.TERMINAL and p, 120, "the plan to end")
    assert plans.phase(done) == "Succeeded", done["status"]
    urgent = _running_on(core, namespace, f"{JOB_LABEL}=urgent", "the urgent job to run")
    assert urgent.spec.node_name == web_node
    moved = _running_on(core, namespace, "app=web", "the replica to run again")
    assert moved.metadata.uid != web.metadata.uid and moved.spec.node_name == spare
    # the GPUJob never stopped: the same pod, running where it was, its start unchanged
    still = core.read_namespaced_pod(train.metadata.name, namespace)
    assert (still.metadata.uid, still.spec.node_name, still.status.phase) == (
        train.metadata.uid, train_node, "Running")
    assert still.status.start_time == train.status.start_time
