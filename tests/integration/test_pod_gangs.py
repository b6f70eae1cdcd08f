"""Pod gangs on the real control plane: Jobs made into pods by kube-controller-manager's Job
controller, gated by their template (the admission webhook adds the gate in a real install),
released whole by the operator, scheduled by kube-scheduler and the extender, finished by KWOK.

JobSet's controller is not run here: its gang is a Job whose pod template carries exactly the labels
the JobSet controller documents for the Jobs it makes (jobset.sigs.k8s.io/*)."""

from __future__ import annotations

import random

import pytest
from kubernetes import client

from netsched.api.labels import MAX_PEER_DISTANCE, RACK_LABEL, ZONE_LABEL
from netsched.devcluster.pods import gated_job, gpu_pod
from netsched.devcluster.wait import poll
from netsched.testing.cluster import free_gpus, gated, pinned_to, pods_of, watch_all_or_nothing


@pytest.fixture(scope="module")
def batch(dev_cluster) -> client.BatchV1Api:
    return client.BatchV1Api(dev_cluster.api_client())


def job(name: str, pods: int, gpus: int, duration: str = "600s", annotations: dict | None = None,
        labels: dict | None = None) -> dict:
    """An indexed Job of `pods` pods at once, gated and scheduled by netsched, as a user writes it."""
    return gated_job(name, pods, gpus, duration, annotations, labels)


@pytest.fixture
def one_roomy_rack(core, namespace) -> str:
    """Fills the cluster so that every node keeps 3 free GPUs (room for one 2-GPU pod) except the two
    nodes of one rack, which keep 4 (two pods each): 4 pods of 2 GPUs fit in one rack only there,
    though the cluster has room for them many times over. Returns that rack."""
    racks = {n.metadata.name: n.metadata.labels[RACK_LABEL] for n in core.list_node().items}
    free = poll(lambda: (f := free_gpus(core)) and all(v == 8 for v in f.values()) and f, 180,
                "every node empty")
    target = random.Random().choice(sorted(set(racks.values())))
    for node, gpus in sorted(free.items()):
        filler = gpu_pod(f"filler-{node}", gpus - (4 if racks[node] == target else 3), duration="600s")
        filler["spec"]["nodeName"] = node
        core.create_namespaced_pod(namespace, filler)
    poll(lambda: all(p.status.phase == "Running" for p in core.list_namespaced_pod(namespace).items),
         60, "the filler pods to run")
    return target


def test_an_indexed_job_with_a_rack_limit_lands_whole_in_the_one_rack_with_room(
        core, batch, namespace, one_roomy_rack):
    racks = {n.metadata.name: n.metadata.labels[RACK_LABEL] for n in core.list_node().items}
    batch.create_namespaced_job(namespace, job("train", 4, 2, annotations={MAX_PEER_DISTANCE: "rack"}))
    placed = watch_all_or_nothing(core, namespace, "train", 4)
    assert {racks[n] for n in placed.values()} == {one_roomy_rack}, placed
    pods = pods_of(core, namespace, "train")
    assert all(pinned_to(p) == [p.spec.node_name] for p in pods)  # each pinned where the gang was placed
    poll(lambda: any(e.reason == "GangReleased" and placed[pods[0].metadata.name] in e.message for e in
                     core.list_namespaced_event(namespace, field_selector="involvedObject.name=train").items),
         60, "a GangReleased Event naming the nodes")


def test_two_jobs_that_each_need_most_of_the_cluster_run_one_after_the_other(core, batch, namespace):
    nodes = len(core.list_node().items)
    poll(lambda: all(v == 8 for v in free_gpus(core).values()), 180, "every node empty")
    size = nodes // 2 + 1  # whole-node pods: two such gangs cannot both run
    for name in ("first", "second"):
        batch.create_namespaced_job(namespace, job(name, size, 8, duration="5s"))

    def both_done():
        live = {name: [p for p in pods_of(core, namespace, name)
                       if p.status.phase not in ("Succeeded", "Failed") and not gated(p)]
                for name in ("first", "second")}
        assert not (live["first"] and live["second"]), "both gangs released at once"
        return all((batch.read_namespaced_job(n, namespace).status.succeeded or 0) == size
                   for n in ("first", "second"))
    poll(both_done, 240, "both Jobs to finish")


def test_a_jobset_labelled_job_is_gated_and_placed_as_one(core, batch, namespace):
    labels = {"jobset.sigs.k8s.io/jobset-name": "llm", "jobset.sigs.k8s.io/replicatedjob-name": "workers",
              "jobset.sigs.k8s.io/replicatedjob-replicas": "1", "jobset.sigs.k8s.io/job-index": "0"}
    batch.create_namespaced_job(namespace, job("llm-workers-0", 3, 2, labels=labels,
                                               annotations={**labels, MAX_PEER_DISTANCE: "zone"}))
    placed = watch_all_or_nothing(core, namespace, "llm-workers-0", 3)
    zones = {n.metadata.name: n.metadata.labels[ZONE_LABEL] for n in core.list_node().items}
    assert len({zones[n] for n in placed.values()}) == 1, placed
    # the Event is written after the gates are lifted and the watch has seen them: wait for it
    poll(lambda: any(e.reason == "GangReleased" and e.message.startswith("JobSet ")
                     for e in core.list_namespaced_event(
                         namespace, field_selector="involvedObject.name=llm-workers-0").items),
         60, "a GangReleased Event naming the JobSet on Job llm-workers-0")


def test_a_job_with_a_bad_annotation_gets_a_warning_naming_it_and_stays_gated(core, batch, namespace):
    batch.create_namespaced_job(namespace, job("far", 2, 1, annotations={MAX_PEER_DISTANCE: "galaxy"}))
    [warning] = poll(lambda: [e for e in core.list_namespaced_event(
        namespace, field_selector="involvedObject.name=far,type=Warning").items], 60, "a Warning on Job far")
    assert warning.reason == "InvalidSpec" and warning.involved_object.kind == "Job"
    assert ("annotations[netsched.io/max-peer-distance]: 'galaxy' is not a topology level of this cluster"
            in warning.message)
    assert "write one of node, rack, zone" in warning.message
    pods = pods_of(core, namespace, "far")
    assert len(pods) == 2 and all(gated(p) for p in pods)
