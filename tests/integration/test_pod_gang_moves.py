"""A PackingPlan that moves a pod gang's member completes on the real control plane: a low-priority
indexed Job's pod is moved to make a whole node for a high-priority Job; the Job controller's
replacement pod, gated like every pod of the gang, is released by the plan to the node the move goes
to, and the plan ends Succeeded with both pods where it planned them. A gang that arrives while the
plan runs is not released into the room the plan holds."""

from __future__ import annotations

from kubernetes import client

from netsched.api import plans
from netsched.devcluster.pods import gated_job, gpu_pod
from netsched.devcluster.wait import poll
from netsched.testing.cluster import free_gpus, packing_plans, pods_of


def filler(core: client.CoreV1Api, namespace: str, node: str, gpus: int, priority_class: str) -> None:
    """A bare pod bound to `node` (no controller: the packer never moves or evicts it)."""
    pod = gpu_pod(f"fill-{node}", gpus, duration="600s")
    pod["spec"] |= {"nodeName": node, "priorityClassName": priority_class}
    core.create_namespaced_pod(namespace, pod)


def bound(core: client.CoreV1Api, namespace: str, job: str) -> dict[str, str]:
    return {p.metadata.name: p.spec.node_name for p in pods_of(core, namespace, job)
            if p.spec.node_name and p.status.phase == "Running"}


def test_a_plan_that_moves_a_jobs_pod_ends_succeeded_with_the_replacement_on_its_planned_node(
        core, custom, namespace, priorities):
    batch = client.BatchV1Api(core.api_client)
    poll(lambda: all(v == 8 for v in free_gpus(core).values()), 180, "every node empty")
    nodes = sorted(free_gpus(core))
    for node in nodes[2:]:  # one GPU free on each of these
        filler(core, namespace, node, 7, priorities["low"])
    low = gated_job("lowjob", 1, 2, duration="600s")
    low["spec"]["template"]["spec"]["priorityClassName"] = priorities["low"]
    batch.create_namespaced_job(namespace, low)
    [first] = poll(lambda: bound(core, namespace, "lowjob"), 90, "Job lowjob to run").values()
    [other] = [n for n in nodes[:2] if n != first]
    filler(core, namespace, other, 6, priorities["low"])  # 2 GPUs left there: room for lowjob's pod only
    poll(lambda: free_gpus(core)[other] == 2, 60, f"the filler to run on {other}")

    urgent = gated_job("urgent", 1, 8, duration="600s")
    urgent["spec"]["template"]["spec"]["priorityClassName"] = priorities["high"]
    batch.create_namespaced_job(namespace, urgent)
    plan = poll(lambda: next((p for p in packing_plans(custom) if p["spec"].get("moves")), None), 120,
                "a PackingPlan that moves a pod")
    late = gated_job("late", 1, 2, duration="600s")  # would fit only in the room the plan holds
    late["spec"]["template"]["spec"]["priorityClassName"] = priorities["low"]
    batch.create_namespaced_job(namespace, late)
    [move] = plan["spec"]["moves"]
    assert move["pod"].startswith(f"{namespace}/lowjob-0-") and (move["node"], move["to"]) == (first, other)
    done = poll(lambda: (p := custom.get_cluster_custom_object(plans.GROUP, plans.VERSION, plans.PLURAL,
                                                               plan["metadata"]["name"]))
                and plans.phase(p) in plans.TERMINAL and p, 150, "the PackingPlan to end")
    assert plans.phase(done) == "Succeeded", done["status"]
    assert list(bound(core, namespace, "urgent").values()) == [first]
    [(name, node)] = bound(core, namespace, "lowjob").items()
    assert node == other and f"{namespace}/{name}" != move["pod"]  # the replacement, on its planned node
    [waiting] = pods_of(core, namespace, "late")
    assert waiting.spec.scheduling_gates and not waiting.spec.node_name  # never released into the plan's room
