"""Pod lifecycles that need kube-controller-manager and KWOK: garbage collection, completion."""

from __future__ import annotations

import time

from netsched.devcluster.pods import gpu_pod
from netsched.devcluster.wait import poll


def test_deleting_an_owner_garbage_collects_its_pods(core, namespace):
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    for i in range(2):
        core.create_namespaced_pod(namespace, gpu_pod(f"owned-{i}", 1, owner=ref))
    core.create_namespaced_pod(namespace, gpu_pod("unowned", 1))
    poll(lambda: all(p.status.phase == "Running" for p in core.list_namespaced_pod(namespace).items),
         60, "the pods to run")

    core.delete_namespaced_config_map("owner", namespace)
    poll(lambda: [p.metadata.name for p in core.list_namespaced_pod(namespace).items] == ["unowned"],
         60, "the garbage collector to delete owned-0 and owned-1")


def test_pod_with_duration_annotation_succeeds_after_that_duration(core, namespace):
    core.create_namespaced_pod(namespace, gpu_pod("short", 1, duration="3s"))
    core.create_namespaced_pod(namespace, gpu_pod("endless", 1))
    poll(lambda: core.read_namespaced_pod("short", namespace).status.phase == "Running", 60,
         "short to run")
    running_at = time.monotonic()

    poll(lambda: core.read_namespaced_pod("short", namespace).status.phase == "Succeeded", 60,
         "short to succeed")
    elapsed = time.monotonic() - running_at

    assert elapsed >= 2.0, f"finished after {elapsed:.1f} s, before its 3 s duration"
    state = core.read_namespaced_pod("short", namespace).status.container_statuses[0].state
    assert state.terminated.exit_code == 0
    # Without the annotation a pod keeps running: the stage keys on it.
    assert core.read_namespaced_pod("endless", namespace).status.phase == "Running"
