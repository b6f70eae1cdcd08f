"""A gang whose size only its PodGroup knows, on the real control plane: pods labelled as the
scheduler-plugins documentation labels a PodGroup's members wait, with a Warning naming the PodGroup,
while the API does not serve PodGroups; once it does (a CRD with the documented v1alpha1 schema subset:
spec.minMember) and the PodGroup exists, they are released together when minMember of them exist.

The scheduler-plugins controllers are not run here: only the CRD and objects they would read."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from netsched.devcluster.crds import install_crds
from netsched.devcluster.pods import gpu_pod
from netsched.devcluster.wait import poll
from netsched.jobs.replica_pods import GANG_GATE
from netsched.testing.pod_groups import CRD, CRD_NAME, GROUP, PLURAL, POD_GROUP_LABEL, VERSION


@pytest.fixture
def podgroups_served(dev_cluster) -> Iterator[client.CustomObjectsApi]:
    """A function that makes the API serve PodGroups; the CRD (and its objects) go afterwards."""
    api = dev_cluster.api_client()
    ext = client.ApiextensionsV1Api(api)
    assert CRD_NAME not in {c.metadata.name for c in ext.list_custom_resource_definition().items}
    yield lambda: install_crds(api, [CRD])
    try:
        ext.delete_custom_resource_definition(CRD_NAME)
    except client.ApiException as exc:
        if exc.status != 404:
            raise


def member(name: str, group: str) -> dict:
    pod = gpu_pod(name, 1, duration="600s", labels={POD_GROUP_LABEL: group})
    pod["spec"]["schedulingGates"] = [{"name": GANG_GATE}]
    return pod


def gated(pod: client.V1Pod) -> bool:
    return any(g.name == GANG_GATE for g in pod.spec.scheduling_gates or ())


def test_a_podgroup_gang_waits_until_its_podgroup_is_served_then_runs_at_min_member(
        dev_cluster, core, namespace, podgroups_served):
    for i in range(3):
        core.create_namespaced_pod(namespace, member(f"train-{i}", "train"))
    named = f"the API has no PodGroup {namespace}/train (podgroups.scheduling.x-k8s.io/v1alpha1)"
    poll(lambda: [e for e in core.list_namespaced_event(namespace, field_selector="type=Warning").items
                  if e.reason == "WaitingForPods" and named in e.message], 60,
         "a Warning naming the PodGroup the API does not serve")

    podgroups_served()
    objects = client.CustomObjectsApi(dev_cluster.api_client())
    objects.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "PodGroup", "metadata": {"name": "train"},
        "spec": {"minMember": 4}})
    poll(lambda: [e for e in core.list_namespaced_event(namespace).items
                  if e.reason == "WaitingForPods" and "3 of 4 pods to release exist" in e.message], 60,
         "the gang to wait for its fourth member, minMember being 4")
    assert all(gated(p) for p in core.list_namespaced_pod(namespace).items)

    core.create_namespaced_pod(namespace, member("train-3", "train"))

    def bound():
        pods = core.list_namespaced_pod(namespace).items
        assert not (any(p.spec.node_name for p in pods) and any(gated(p) for p in pods)), "half placed"
        return len(pods) == 4 and all(p.spec.node_name for p in pods)
    poll(bound, 120, "the 4 members of PodGroup train to be bound")
    poll(lambda: [e for e in core.list_namespaced_event(namespace).items if e.reason == "GangReleased"
                  and e.message.startswith(f"PodGroup {namespace}/train: released 4 pods")], 60,
         "a GangReleased Event naming the PodGroup")
