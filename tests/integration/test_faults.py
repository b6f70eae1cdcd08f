"""Faults the operator meets on the real control plane: what it says, and that it does not loop."""

from __future__ import annotations

import time
import uuid

from kubernetes import client

from netsched.api.conditions import find
from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.api.labels import JOB_LABEL
from netsched.devcluster.wait import poll
from netsched.testing.builders import make_gpujob

WATCHED = 20.0  # seconds: at a tick per second, a create loop would post ~40 Events in this time


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
        return ready if ready and ready["reason"] == "PodCreateFailed" else None
    ready = poll(refused, 60, "the PodCreateFailed condition")
    assert ready["status"] == "False" and missing in ready["message"]
    assert "spec.priorityClassName" in ready["message"] and "create that PriorityClass" in ready["message"]

    time.sleep(WATCHED)  # long enough for a loop to show; the backoff allows three tries in it
    events = _events(core, namespace, "refused")
    warnings = [e for e in events if e.type == "Warning"]
    assert [e.reason for e in warnings] == ["PodCreateFailed"] and (warnings[0].count or 1) == 1
    assert "PodsCreated" not in {e.reason for e in events} and len(events) <= 3
    assert not core.list_namespaced_pod(namespace, label_selector=f"{JOB_LABEL}=refused").items

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
    finally:
        scheduling.delete_priority_class(missing)
