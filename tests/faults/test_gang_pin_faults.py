"""A gang's pins meet faults between release and binding, on a real control plane: the pinned node
cordoned, deleted, or its room taken by a pod of another scheduler; the extender down while pinned pods
bind; the operator killed between two members' pin patches. Every case: the gang runs whole, nothing is
lost or duplicated, no GPU is over-committed, and the Job does not count the evictions as failures.

The window between release and binding is held open by a scheduling gate of someone else's on the
Job's pod template (the operator lifts only its own): the test lifts it when it wants the pods bound.
Each test gets a pool of two 8-GPU nodes of its own (labelled and tainted for its Job alone), so the
gang, 2 pods of 4 GPUs, is pinned to one of them and has the other to go to."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from netsched.api.labels import PINNED_NODE
from netsched.devcluster.devcluster import EXTENDER, OPERATOR, DevCluster
from netsched.devcluster.pods import gated_job
from netsched.devcluster.topology import GPU_MODELS, GPUNode
from netsched.devcluster.wait import poll
from netsched.jobs.hard_limits import pinned_to, requirement_patch
from netsched.jobs.replica_pods import GANG_GATE, pinned_note
from netsched.testing.cluster import kill, pods_of, running

HOLD = "example.com/hold"  # someone else's gate: holds a released pod between its pin and its binding
POOL = "netsched.test/pool"
# 2 members: a Job makes evicted pods again after its pod-failure backoff, 10 s doubled per failure
MEMBERS, GPUS = 2, 4


@pytest.fixture(scope="module")
def fault_cluster(tmp_path_factory) -> Iterator[DevCluster]:
    """A small cluster of its own: the tests use the pools they add, and kill its components."""
    cluster = DevCluster(directory=tmp_path_factory.mktemp("pin-cluster"), nodes=2, progress=lambda _: None)
    with running(cluster):
        yield cluster


@pytest.fixture
def batch(fault_cluster) -> client.BatchV1Api:
    return client.BatchV1Api(fault_cluster.api_client())


@pytest.fixture
def pool(core, namespace) -> Iterator[list[str]]:
    """Two empty 8-GPU nodes only this test's Job may use."""
    names = [f"pin-{namespace}-{i}" for i in range(2)]
    for name in names:
        node = GPUNode(name, "zone-pool", f"rack-{namespace}", GPU_MODELS[0]).manifest()
        node["metadata"]["labels"][POOL] = namespace
        node["spec"] = {"taints": [{"key": POOL, "value": namespace, "effect": "NoSchedule"}]}
        core.create_node(node)
    poll(lambda: all(_ready(core.read_node(n)) for n in names), 60, "the pool's nodes Ready and untainted")
    try:
        yield names
    finally:  # the pods first: pods left on a deleted node wait for the pod GC, and so would the namespace
        client.BatchV1Api(core.api_client).delete_collection_namespaced_job(namespace,
                                                                            propagation_policy="Background")
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        poll(lambda: not core.list_namespaced_pod(namespace).items, 60, "the test's pods gone")
        for name in names:
            try:
                core.delete_node(name)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise


def _ready(node: client.V1Node) -> bool:
    ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or ())
    return ready and all(t.key == POOL for t in node.spec.taints or ())


def held_job(namespace: str, name: str = "train") -> dict:
    """2 pods of 4 GPUs in the pool, held by HOLD after netsched releases them; evictions (which mark
    a pod DisruptionTarget) ignored by its podFailurePolicy, as docs/workloads.md advises."""
    job = gated_job(name, MEMBERS, GPUS, "600s")
    spec = job["spec"]["template"]["spec"]
    spec["schedulingGates"].append({"name": HOLD})
    spec["nodeSelector"] = {POOL: namespace}
    spec["tolerations"] = [{"key": POOL, "operator": "Exists"}]
    job["spec"]["podFailurePolicy"] = {"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    return job


def live(core, namespace: str, job: str = "train") -> list[client.V1Pod]:
    return [p for p in pods_of(core, namespace, job)
            if not p.metadata.deletion_timestamp and p.status.phase not in ("Succeeded", "Failed")]


def pinned(core, namespace: str, avoid: str | None = None) -> dict[str, str]:
    """Polls until every live member is released and pinned (not to `avoid`); pod -> node."""
    def look() -> dict[str, str]:
        pods = live(core, namespace)
        pins = {p.metadata.name: (p.metadata.annotations or {}).get(PINNED_NODE) for p in pods}
        ok = len(pods) == MEMBERS and all(pins.values()) and avoid not in pins.values()
        return pins if ok else {}  # type: ignore[return-value]
    return poll(look, 90, f"the {MEMBERS} members pinned" + (f" elsewhere than {avoid}" if avoid else ""))


def bound_after_lifting_holds(core, namespace: str) -> dict[str, str]:
    """Lift HOLD from every released member, until all are bound; pod -> node."""
    def look() -> dict[str, str]:
        pods = live(core, namespace)
        for p in pods:
            gates = [g.name for g in p.spec.scheduling_gates or ()]
            if HOLD in gates and GANG_GATE not in gates:
                keep = [{"name": g} for g in gates if g != HOLD]
                op = {"op": "replace", "path": "/spec/schedulingGates", "value": keep} if keep else {
                    "op": "remove", "path": "/spec/schedulingGates"}
                try:
                    core.patch_namespaced_pod(p.metadata.name, namespace, [op])
                except client.ApiException as exc:
                    if exc.status not in (404, 409, 422):
                        raise
        ok = len(pods) == MEMBERS and all(p.spec.node_name for p in pods)
        return {p.metadata.name: p.spec.node_name for p in pods} if ok else {}
    return poll(look, 120, f"the {MEMBERS} members bound")


def assert_whole_and_not_failed(core, batch, namespace: str, placed: dict[str, str]) -> None:
    assert len(placed) == MEMBERS
    indexes = sorted(p.metadata.annotations["batch.kubernetes.io/job-completion-index"]
                     for p in live(core, namespace))
    assert indexes == [str(i) for i in range(MEMBERS)]  # one live pod per index: none lost, none twice
    for node in set(placed.values()):  # no GPU over-commit on any node the gang uses
        on = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
        asked = sum(int(c.resources.requests.get("nvidia.com/gpu", 0)) for p in on
                    if p.status.phase not in ("Succeeded", "Failed") for c in p.spec.containers)
        assert asked <= 8, (node, asked)
    status = batch.read_namespaced_job("train", namespace).status
    assert not status.failed and not any(c.type == "Failed" for c in status.conditions or ()), status


def stale_event(core, namespace: str) -> str:
    return poll(lambda: next((e.message for e in core.list_namespaced_event(namespace).items
                              if e.reason == "PinStale"), None), 60, "a PinStale Event")


@pytest.mark.parametrize("fault", ["cordoned", "deleted"])
def test_a_pinned_node_cordoned_or_deleted_before_binding_sends_the_gang_to_the_other(
        core, batch, namespace, pool, fault):
    batch.create_namespaced_job(namespace, held_job(namespace))
    first = pinned(core, namespace)
    [node] = set(first.values())
    if fault == "cordoned":
        core.patch_node(node, {"spec": {"unschedulable": True}})
    else:
        core.delete_node(node)
    said = stale_event(core, namespace)
    assert node in said and ("cordoned" in said if fault == "cordoned" else "gone" in said), said
    [other] = set(pinned(core, namespace, avoid=node).values())
    placed = bound_after_lifting_holds(core, namespace)
    assert set(placed.values()) == {other} and other != node, placed
    assert_whole_and_not_failed(core, batch, namespace, placed)


def test_a_pinned_node_whose_room_another_scheduler_takes_sends_the_gang_to_the_other(
        core, batch, namespace, pool):
    batch.create_namespaced_job(namespace, held_job(namespace))
    [node] = set(pinned(core, namespace).values())
    gpus = {"nvidia.com/gpu": "8"}
    intruder = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "intruder"}, "spec": {
        "nodeName": node, "tolerations": [{"key": POOL, "operator": "Exists"}],
        "containers": [{"name": "main", "image": "other:1",
                        "resources": {"requests": gpus, "limits": gpus}}]}}
    core.create_namespaced_pod(namespace, intruder)
    placed = bound_after_lifting_holds(core, namespace)
    assert node not in placed.values() and len(set(placed.values())) == 1, placed
    assert "room was taken" in stale_event(core, namespace)
    assert_whole_and_not_failed(core, batch, namespace, placed)


def test_pinned_pods_bind_where_pinned_while_the_extender_is_down(
        fault_cluster, core, batch, namespace, pool):
    batch.create_namespaced_job(namespace, held_job(namespace))
    pins = pinned(core, namespace)
    kill(fault_cluster, EXTENDER)
    try:
        placed = bound_after_lifting_holds(core, namespace)
        assert placed == pins
        assert_whole_and_not_failed(core, batch, namespace, placed)
    finally:
        fault_cluster.restart(EXTENDER)


def test_a_release_cut_short_by_the_operator_dying_is_finished_beside_the_pinned_members(
        fault_cluster, core, batch, namespace, pool):
    kill(fault_cluster, OPERATOR)
    try:
        batch.create_namespaced_job(namespace, held_job(namespace))
        pods = poll(lambda: (ps := live(core, namespace)) and len(ps) == MEMBERS and ps, 60, "the Job's pods")
        node = pool[1]
        for pod in sorted(pods, key=lambda p: p.metadata.name)[:1]:  # what the operator wrote before dying
            spec = client.ApiClient().sanitize_for_serialization(pod.spec)
            gates = [{"name": g.name} for g in pod.spec.scheduling_gates if g.name != GANG_GATE]
            patch = [*requirement_patch(spec, pinned_to(node)),
                     pinned_note(pod.metadata.annotations, node, []),
                     {"op": "replace", "path": "/spec/schedulingGates", "value": gates}]
            core.patch_namespaced_pod(pod.metadata.name, namespace, patch)
    finally:
        fault_cluster.restart(OPERATOR)
    assert set(pinned(core, namespace).values()) == {node}  # the other member beside the first
    placed = bound_after_lifting_holds(core, namespace)
    assert set(placed.values()) == {node}, placed
    assert_whole_and_not_failed(core, batch, namespace, placed)
