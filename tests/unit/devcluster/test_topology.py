import pytest

from netsched.api.labels import GPU_PRODUCT_LABEL, GPU_RESOURCE, RACK_LABEL, ZONE_LABEL
from netsched.api.topology import Topology
from netsched.devcluster.devcluster import lease_seconds
from netsched.devcluster.topology import KWOK_ANNOTATION, gpu_nodes


@pytest.mark.parametrize(
    "count, zones, racks_per_zone, want_racks",
    [
        pytest.param(8, 2, 2, {"rack-a1": 2, "rack-a2": 2, "rack-b1": 2, "rack-b2": 2}, id="default"),
        pytest.param(3, 2, 2, {"rack-a1": 1, "rack-a2": 1, "rack-b1": 1}, id="fewer-nodes-than-racks"),
        pytest.param(10, 1, 2, {"rack-a1": 5, "rack-a2": 5}, id="one-zone"),
        pytest.param(7, 2, 2, {"rack-a1": 2, "rack-a2": 2, "rack-b1": 2, "rack-b2": 1}, id="uneven"),
    ],
)
def test_nodes_fill_racks_in_order(count, zones, racks_per_zone, want_racks):
    nodes = gpu_nodes(count, zones, racks_per_zone)
    racks: dict[str, int] = {}
    for n in nodes:
        racks[n.rack] = racks.get(n.rack, 0) + 1
    assert racks == want_racks
    assert len({n.name for n in nodes}) == count


def test_rack_belongs_to_its_zone_and_zones_alternate_gpu_models():
    nodes = gpu_nodes(8)
    for n in nodes:
        assert n.rack.removeprefix("rack-")[0] == n.zone.removeprefix("zone-")
    models = {n.zone: n.gpu_model for n in nodes}
    assert models["zone-a"] != models["zone-b"]


def test_manifest_is_a_kwok_gpu_node():
    manifest = gpu_nodes(1, gpus=4)[0].manifest()
    labels = manifest["metadata"]["labels"]
    assert manifest["metadata"]["annotations"] == {KWOK_ANNOTATION: "fake"}
    assert labels[ZONE_LABEL] == "zone-a" and labels[RACK_LABEL] == "rack-a1"
    assert labels[GPU_PRODUCT_LABEL].startswith("NVIDIA-")
    assert manifest["status"]["capacity"][GPU_RESOURCE] == "4"
    assert manifest["status"]["allocatable"] == manifest["status"]["capacity"]


@pytest.mark.parametrize("kwargs", [{"count": 0}, {"count": 2, "zones": 0}, {"count": 2, "gpus": 0}])
def test_rejects_empty_shapes(kwargs):
    with pytest.raises(ValueError, match="at least 1"):
        gpu_nodes(**kwargs)


def test_kwok_leases_last_as_kubelets_up_to_5000_nodes_and_longer_above_so_heartbeat_writes_stay_level():
    assert [lease_seconds(n) for n in (8, 1000, 5000, 10_000, 15_000)] == [40, 40, 40, 80, 120]


@pytest.mark.parametrize(("preset", "expected"), [
    ("gke", {"cloud.google.com/gce-topology-block": "zone-a",
             "cloud.google.com/gce-topology-subblock": "zone-a-subblock",
             "cloud.google.com/gce-topology-host": "rack-a1"}),
    ("rack=example.com/rack", {"example.com/rack": "rack-a1"}),
    ("netsched", {ZONE_LABEL: "zone-a", RACK_LABEL: "rack-a1"}),
], ids=["three-levels", "one-level", "default"])
def test_nodes_are_labelled_for_a_topology_setting_widest_level_zone_narrowest_rack(preset, expected):
    topology = Topology.parse(preset)
    labels = gpu_nodes(8)[0].manifest(topology=topology)["metadata"]["labels"]
    assert {k: labels[k] for k in expected} == expected
    assert [topology.domain(labels, n) for n in topology.names] == list(expected.values())
