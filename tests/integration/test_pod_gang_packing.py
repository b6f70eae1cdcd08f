"""The packer makes room for a pod gang on the real control plane: a high-priority indexed Job whose
gated pods fit nowhere, because low-priority Job pods hold the room in scattered pieces, gets a
PackingPlan that evicts them from one rack; the operator releases the gang there whole, it finishes,
and the evicted work, recreated by its Job controller, runs again afterwards."""

from __future__ import annotations

import pytest
from kubernetes import client

from netsched.api import plans
from netsched.api.labels import MAX_PEER_DISTANCE, RACK_LABEL, RELEASED_BY
from netsched.devcluster.pods import gated_job, gpu_pod
from netsched.devcluster.wait import poll
from netsched.testing.cluster import LOW, free_gpus, packing_plans, pinned_to, pods_of, watch_all_or_nothing

HOSTNAME = "kubernetes.io/hostname"


@pytest.fixture(scope="module")
def batch(dev_cluster) -> client.BatchV1Api:
    return client.BatchV1Api(dev_cluster.api_client())


def low_job(node: str, priority_class: str) -> dict:
    """One low-priority 5-GPU pod kept to `node`, as a plain batch Job (no gang) runs it; an evicted pod
    is made again by the Job controller and waits for its node to have room."""
    pod = gpu_pod("x", 5, duration="600s")
    spec = {**pod["spec"], "nodeSelector": {HOSTNAME: node}, "priorityClassName": priority_class}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"low-{node}"},
            "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 6,
                     "template": {"metadata": {"annotations": pod["metadata"]["annotations"]}, "spec": spec}}}


def running(core, namespace: str, job_name: str) -> bool:
    return any(p.status.phase == "Running" for p in pods_of(core, namespace, job_name))


def test_a_high_priority_job_gets_room_in_one_rack_through_a_plan_and_the_evicted_work_comes_back(
        core, batch, custom, namespace, priorities):
    nodes = {n.metadata.name: n.metadata.labels[RACK_LABEL] for n in core.list_node().items}
    poll(lambda: all(v == 8 for v in free_gpus(core).values()), 180, "every node empty")
    for node in sorted(nodes):  # 3 GPUs free on every node: 24 in all, 4 on none
        batch.create_namespaced_job(namespace, low_job(node, priorities["low"]))
    poll(lambda: all(running(core, namespace, f"low-{n}") for n in nodes), 90, "every low Job to run")
    before = {p.metadata.name for p in core.list_namespaced_pod(namespace).items}

    urgent = gated_job("urgent", 4, 4, duration="20s", annotations={MAX_PEER_DISTANCE: "rack"})
    urgent["spec"]["template"]["spec"]["priorityClassName"] = priorities["high"]
    batch.create_namespaced_job(namespace, urgent)
    placed = watch_all_or_nothing(core, namespace, "urgent", 4, timeout=180)

    [plan] = [p for p in packing_plans(custom)
              if any(x["pod"].startswith(f"{namespace}/urgent-") for x in p["spec"]["placements"])]
    spec = plan["spec"]
    victims = spec["evictions"] + spec["moves"]
    assert all(v["priority"] == LOW and v["pod"].split("/")[1] in before for v in victims), victims
    [rack] = {nodes[v["node"]] for v in victims}  # the room made in one rack only
    assert {p["pod"].split("/")[1]: p["node"] for p in spec["placements"]} == placed
    assert {nodes[n] for n in placed.values()} == {rack}, placed  # the gang whole in that rack
    for pod in pods_of(core, namespace, "urgent"):
        assert pinned_to(pod) == [placed[pod.metadata.name]]  # kept there by its own constraints
        assert pod.metadata.annotations[RELEASED_BY] == plan["metadata"]["name"]
    done = poll(lambda: (p := custom.get_cluster_custom_object(plans.GROUP, plans.VERSION, plans.PLURAL,
                                                               plan["metadata"]["name"]))
                and plans.phase(p) in plans.TERMINAL and p, 90, "the PackingPlan to end")
    assert plans.phase(done) == "Succeeded", done["status"]

    poll(lambda: (batch.read_namespaced_job("urgent", namespace).status.succeeded or 0) == 4, 120,
         "Job urgent to finish")
    # the evicted pods' Jobs made them again; once the urgent Job is done they run where they must
    poll(lambda: all(running(core, namespace, f"low-{n}") for n in nodes), 180,
         "every low Job to run again")
    evicted = {v["pod"].split("/")[1] for v in victims}
    assert evicted and not evicted & {p.metadata.name for p in core.list_namespaced_pod(namespace).items}
    # each evicted pod's Job was told by whom and for what
    warned = {e.involved_object.name: e.message for e in core.list_namespaced_event(
        namespace, field_selector="reason=EvictedByPackingPlan").items}
    assert set(warned) == {f"low-{v['node']}" for v in victims}, warned
    assert all(m.startswith(f"PackingPlan {plan['metadata']['name']} evicted ") and
               f"to make room for Job {namespace}/urgent (priority {priorities['high']}, " in m
               for m in warned.values()), warned
