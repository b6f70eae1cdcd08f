"""The operator with topology levels from configuration, against the real dev-cluster: KWOK nodes labelled
only example.com/block and example.com/rack (no zone or netsched.io/rack label), the operator and the
extender run with `--topology block=example.com/block,rack=example.com/rack`. A GPUJob asking its peers
within one `rack` is released pinned to one example.com/rack and lands there; one naming a level the
cluster lacks (`zone`) waits with InvalidSpec naming the levels it has."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from netsched.api import conditions as c
from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.api.labels import JOB_LABEL, RACK_LABEL, ZONE_LABEL
from netsched.devcluster.devcluster import DevCluster
from netsched.devcluster.wait import poll
from netsched.testing.builders import make_gpujob
from netsched.testing.cluster import pinned_to, running

BLOCK, RACK = "example.com/block", "example.com/rack"
TOPOLOGY = f"block={BLOCK},rack={RACK}"


@pytest.fixture(scope="module")
def dev_cluster(tmp_path_factory) -> Iterator[DevCluster]:
    cluster = DevCluster(directory=tmp_path_factory.mktemp("operator-levels-cluster"), nodes=8, zones=2,
                         racks_per_zone=2, topology_labels=(BLOCK, RACK),
                         extender_args=(f"--topology={TOPOLOGY}",), operator_args=(f"--topology={TOPOLOGY}",))
    with running(cluster):
        yield cluster


@pytest.fixture(scope="module")
def core(dev_cluster) -> client.CoreV1Api:
    return client.CoreV1Api(dev_cluster.api_client())


@pytest.fixture(scope="module")
def jobs(dev_cluster) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(dev_cluster.api_client())


def _job(jobs: client.CustomObjectsApi, namespace: str, name: str) -> dict:
    return jobs.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)


def test_a_gang_within_a_configured_level_lands_inside_one_domain_of_its_label(core, jobs, namespace):
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "near", replicas=2, gpus=8, duration="600s", manifest=True, network={"maxPeerDistance": "rack"}))

    def bound():
        pods = core.list_namespaced_pod(namespace, label_selector=f"{JOB_LABEL}=near").items
        return len(pods) == 2 and all(p.spec.node_name for p in pods) and pods
    pods = poll(bound, 90, "the 2 pods of near to be bound")
    nodes = {n.metadata.name: n.metadata.labels for n in core.list_node().items}
    assert not any({ZONE_LABEL, RACK_LABEL} & set(labels) for labels in nodes.values())
    racks = {nodes[p.spec.node_name][RACK] for p in pods}
    assert len(racks) == 1 and len({p.spec.node_name for p in pods}) == 2, racks
    [rack] = racks
    assert all(pinned_to(p) == [p.spec.node_name] for p in pods), [p.spec.affinity for p in pods]
    placements = poll(lambda: (s := _job(jobs, namespace, "near").get("status") or {}).get("placements")
                      and len(s["placements"]) == 2 and s["placements"], 60, "near's placements")
    assert {p["domains"]["rack"] for p in placements} == {rack}
    assert {p["domains"]["block"] for p in placements} == {nodes[pods[0].spec.node_name][BLOCK]}


def test_a_level_the_cluster_lacks_is_invalid_spec_naming_the_levels_it_has(core, jobs, namespace):
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "far", replicas=2, gpus=1, manifest=True, network={"maxPeerDistance": "zone"}))
    said = ("spec.network.maxPeerDistance: 'zone' is not a topology level of this cluster: write one of "
            "node, rack, block")

    def invalid():
        status = _job(jobs, namespace, "far").get("status") or {}
        found = c.find(status.get("conditions") or [], c.PODS_READY)
        return found and found["reason"] == c.INVALID_SPEC and found
    condition = poll(invalid, 60, "far's InvalidSpec condition")
    assert condition["message"] == said
    warnings = poll(lambda: core.list_namespaced_event(namespace, field_selector="reason=InvalidSpec").items,
                    60, "the InvalidSpec Warning")
    assert [(e.type, e.message) for e in warnings] == [("Warning", said)]
    assert not core.list_namespaced_pod(namespace, label_selector=f"{JOB_LABEL}=far").items
