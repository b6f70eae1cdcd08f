"""Topology levels from labels of the cluster's own, with the real kube-scheduler and extender: KWOK
nodes labelled only example.com/block and example.com/rack (no zone or netsched.io/rack label), the
extender told `--topology block=example.com/block,rack=example.com/rack`."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from kubernetes import client

from netsched.api.labels import JOB_LABEL, MAX_PEER_DISTANCE, RACK_LABEL, REPLICAS, ZONE_LABEL
from netsched.devcluster.devcluster import DevCluster
from netsched.devcluster.pods import gpu_pod
from netsched.devcluster.wait import poll
from netsched.testing.cluster import running

BLOCK, RACK = "example.com/block", "example.com/rack"
PODS, GPUS = 4, 4  # a gang of 16 GPUs: a whole rack of two 8-GPU nodes


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[DevCluster]:
    cluster = DevCluster(directory=tmp_path_factory.mktemp("levels-cluster"), nodes=8, zones=2,
                         racks_per_zone=2, run_operator=False, topology_labels=(BLOCK, RACK),
                         extender_args=(f"--topology=block={BLOCK},rack={RACK}",), progress=lambda *_: None)
    with running(cluster):
        yield cluster


@pytest.fixture(scope="module")
def core(cluster) -> client.CoreV1Api:
    api = client.CoreV1Api(cluster.api_client())
    # a node can still carry the not-ready taint for a moment after Ready; the tests want all 8
    poll(lambda: not any(n.spec.taints for n in api.list_node().items), 30,
         "the nodes' start-up taints to go")
    return api


def _racks(core: client.CoreV1Api) -> dict[str, str]:
    return {n.metadata.name: n.metadata.labels.get(RACK) for n in core.list_node().items}


def _failed_scheduling(core: client.CoreV1Api, namespace: str, pod: str) -> str:
    event = poll(lambda: next(iter(core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={pod},reason=FailedScheduling").items), None),
        60, f"a FailedScheduling event for {pod}")
    return str(event.message)


def test_a_gang_stays_in_one_domain_of_a_configured_level(core, namespace):
    racks = _racks(core)
    assert set(racks.values()) == {"rack-a1", "rack-a2", "rack-b1", "rack-b2"}
    assert not any({ZONE_LABEL, RACK_LABEL} & set(n.metadata.labels) for n in core.list_node().items)
    # one rack left with room for the whole gang, every other with one full node (8 GPUs free in each)
    target = random.Random().choice(sorted(set(racks.values())))
    for rack in sorted(set(racks.values()) - {target}):
        full = min(n for n, r in racks.items() if r == rack)
        filler = gpu_pod(f"filler-{rack}", 8, duration="600s")
        filler["spec"]["nodeName"] = full
        core.create_namespaced_pod(namespace, filler)

    gang = {MAX_PEER_DISTANCE: "rack", REPLICAS: str(PODS)}
    for i in range(PODS):
        core.create_namespaced_pod(namespace, gpu_pod(f"gang-{i}", GPUS, labels={JOB_LABEL: "gang"},
                                                      annotations=gang))

    def placed() -> dict[str, str] | None:
        pods = core.list_namespaced_pod(namespace, label_selector=f"{JOB_LABEL}=gang").items
        nodes = {p.metadata.name: p.spec.node_name for p in pods if p.spec.node_name}
        return nodes if len(nodes) == PODS else None

    nodes = poll(placed, 90, f"the {PODS} pods of the gang to be bound")
    assert {racks[n] for n in nodes.values()} == {target}, nodes

    # the gang's rack is full: one more pod of the job fits elsewhere, but not in the same rack
    core.create_namespaced_pod(namespace, gpu_pod("one-more", GPUS, labels={JOB_LABEL: "gang"},
                                                  annotations=gang))
    message = _failed_scheduling(core, namespace, "one-more")
    assert f"is not in the same rack as job gang's pods ({target}; {MAX_PEER_DISTANCE}=rack)" in message
    assert core.read_namespaced_pod("one-more", namespace).spec.node_name is None


def test_a_level_the_cluster_is_not_configured_with_is_refused_naming_the_levels_it_has(core, namespace):
    core.create_namespaced_pod(namespace, gpu_pod("zoned", 1, annotations={MAX_PEER_DISTANCE: "zone"}))
    message = _failed_scheduling(core, namespace, "zoned")
    assert (f"{MAX_PEER_DISTANCE}=zone: 'zone' is not a topology level of this cluster: "
            "write one of node, rack, block") in message, message
    assert core.read_namespaced_pod("zoned", namespace).spec.node_name is None
