"""`netsched whatif` and `why` over a cluster given as plain objects: the operator's own rules answer."""

from __future__ import annotations

from datetime import timedelta

import pytest

from netsched.api.events import rfc3339
from netsched.api.labels import PINNED_NODE
from netsched.foresight.whatif import Cluster, WhatIfError, render, what_if
from netsched.foresight.why import render_why, why
from netsched.testing.builders import CLUSTER, NOW, ago, make_gpujob, make_pod

HISTORY = [{"outcome": "Succeeded", "duration_seconds": 600, "workload_kind": "training", "replicas": 4,
            "gpus_per_replica": 8, "expected_duration_seconds": None}] * 3
URGENT = {"metadata": {"name": "urgent"}, "value": 1000}


def full_cluster(**status) -> Cluster:
    """A 4×8-GPU job of GPUJob `big` on every node (started 100 s ago), at priority 0."""
    big = make_gpujob("big", replicas=4, gpus=8, created=ago(200))
    big["status"] = {"phase": "Running", "startTime": ago(100)} | status
    pods = [make_pod(f"big-{i}", n["metadata"]["name"], gpus=8, job="big", owner="GPUJob", priority=0)
            for i, n in enumerate(CLUSTER)]
    return Cluster(CLUSTER, pods, [], [big], [URGENT])


def manifest(**spec) -> dict:
    body = make_gpujob("next", replicas=2, gpus=8, manifest=True, **spec)
    body["metadata"] |= {"namespace": "ml", "uid": "whatif", "creationTimestamp": rfc3339(NOW)}
    return body


def test_on_a_full_cluster_it_names_the_job_it_waits_for_and_when_it_would_start():
    answer = what_if(full_cluster(), manifest(), HISTORY, now=NOW)
    said = answer["schedulable"]
    assert (said["fits"], said["reason"]) == (False, "InsufficientResources")
    assert answer["placement"] == [] and answer["waitsFor"] == ["ml/big"]
    assert answer["predictedStartTime"] == rfc3339(NOW + timedelta(seconds=500))
    assert answer["estimate"]["basis"] == "the median run of 3 finished training jobs"
    assert answer["packer"] == {"wouldPlan": False, "why": "evicting or moving lower-priority pods would not "
                                                           "place more"}  # same priority: never disturbed
    text = render(answer, NOW)
    assert "when ml/big is predicted to finish" in text and text.endswith("Nothing was created.")


def test_at_a_higher_priority_it_shows_the_plan_the_packer_would_make():
    answer = what_if(full_cluster(), manifest(priorityClassName="urgent"), HISTORY, now=NOW)
    assert answer["priority"] == 1000 and answer["packer"]["wouldPlan"] is True
    assert {e["pod"] for e in answer["packer"]["evictions"]} == {f"ml/big-{i}" for i in range(4)}  # its gang
    assert sorted(p["pod"] for p in answer["packer"]["placements"]) == ["ml/next-0", "ml/next-1"]
    assert "evict ml/big-0 from a1-0" in render(answer, NOW)


def test_on_an_empty_cluster_it_fits_now_on_one_rack_s_nodes():
    answer = what_if(Cluster(CLUSTER, [], [], [], []), manifest(network={"maxPeerDistance": "rack"}), [],
                     now=NOW)
    assert answer["schedulable"]["fits"] is True and answer["predictedStartTime"] == rfc3339(NOW)
    assert {p["rack"] for p in answer["placement"]} == {"rack-a1"} and answer["packer"] == {}
    assert answer["predictedCompletionTime"] is None and "Run time: unknown" in render(answer, NOW)


def test_a_spec_the_operator_would_refuse_gets_no_answer_but_the_field_and_the_fix():
    bad = manifest(network={"maxDataDistance": "rack"}, template={"spec": {"containers": [
        {"name": "main", "image": "i", "resources": {"requests": {"cpu": "lots"}}}]}})
    with pytest.raises(WhatIfError) as refused:
        what_if(Cluster(CLUSTER, [], [], [], []), bad, [], now=NOW)
    said = str(refused.value)  # every problem, on one line
    assert said.startswith("spec.template.spec.containers[0].resources.requests.cpu: 'lots' is not a")
    assert "; spec.network.maxDataDistance 'rack' needs spec.dataSources" in said and "\n" not in said


def test_a_priority_class_that_does_not_exist_is_said_before_any_fit():
    with pytest.raises(WhatIfError) as refused:
        what_if(full_cluster(), manifest(priorityClassName="urgnet"), HISTORY, now=NOW)
    assert str(refused.value) == ("spec.priorityClassName 'urgnet': no such PriorityClass, so the API server "
                                  "would refuse its pods; create it or name one that exists (urgent)")


def test_why_reads_the_condition_and_the_forecast_and_adds_the_room_per_domain():
    waiting = make_gpujob("next", replicas=2, gpus=8, network={"maxPeerDistance": "zone"})
    waiting["status"] = {"phase": "Pending", "predictedStartTime": rfc3339(NOW), "conditions": [
        {"type": "Schedulable", "status": "False", "reason": "InsufficientResources", "message": "m"}]}
    cluster = full_cluster()
    answer = why(Cluster(cluster.nodes, cluster.pods, [], [*cluster.jobs, waiting], []), "ml", "next")
    assert (answer["reason"], answer["message"]) == ("InsufficientResources", "m")
    assert [(d["name"], d["freeGPUs"]) for d in answer["domains"]] == [("zone-a", 0), ("zone-b", 0)]
    assert "Room per zone now" in render_why(answer)
    with pytest.raises(WhatIfError, match="GPUJob ml/gone not found"):
        why(cluster, "ml", "gone")


def test_why_a_blocked_job_shows_the_api_servers_message_and_the_reason_and_no_times():
    said = ("cannot create pod ml/stuck-0: pods \"stuck-0\" is forbidden: no PriorityClass with name "
            "urgent was found; fix: create that PriorityClass")
    blocked = make_gpujob("stuck", replicas=2, gpus=8)
    blocked["status"] = {"phase": "Blocked", "reason": "PodsRefused", "conditions": [
        {"type": "PodsReady", "status": "False", "reason": "PodsRefused", "message": said}]}
    cluster = full_cluster()
    answer = why(Cluster(cluster.nodes, cluster.pods, [], [*cluster.jobs, blocked], []), "ml", "stuck")
    assert (answer["phase"], answer["reason"], answer["message"]) == ("Blocked", "PodsRefused", said)
    assert render_why(answer).splitlines()[:2] == ["GPUJob ml/stuck: Blocked",
                                                   f"PodsReady: PodsRefused: {said}"]
    assert "Predicted" not in render_why(answer)


def test_pods_on_their_way_to_pinned_nodes_hold_that_room_and_no_other():
    """Released pods pinned to rack-a1's two nodes take that rack's room, as the operator counts them: a
    rack-limited 2 x 8 job has no rack left with two free nodes and waits, and one without a limit goes
    to the two other nodes. Counted wherever they would fit first, rack-a1 would have looked free."""
    pinned = [make_pod(f"gang-{i}", gpus=8, annotations={PINNED_NODE: node})
              for i, node in enumerate(("a1-0", "a1-1"))]
    answer = what_if(Cluster(CLUSTER, pinned, [], [], []), manifest(network={"maxPeerDistance": "rack"}), [],
                     now=NOW)
    assert answer["schedulable"]["fits"] is False, answer["schedulable"]
    anywhere = what_if(Cluster(CLUSTER, pinned, [], [], []), manifest(), [], now=NOW)
    assert {p["node"] for p in anywhere["placement"]} == {"a2-0", "b1-0"}
