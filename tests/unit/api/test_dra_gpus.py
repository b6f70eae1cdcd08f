"""DraGpus: a node's GPUs from the ResourceSlices of the configured drivers, less the devices claim-only pods
hold, shown as a device plugin's allocatable nvidia.com/gpu and product label."""

from __future__ import annotations

import pytest
from kubernetes import client

from netsched.api import dra
from netsched.api.dra import CLAIMS, SLICES, DraGpus, NodeGpus
from netsched.api.labels import GPU_PRODUCT_LABEL, GPU_RESOURCE
from netsched.testing.builders import make_resource_claim as make_claim
from netsched.testing.builders import make_resource_slice as make_slice

NVIDIA, EXAMPLE = "gpu.nvidia.com", "gpu.example.com"


def node(name: str = "n1", allocatable: dict | None = None, labels: dict | None = None) -> dict:
    allocatable = {"cpu": "96", "memory": "1Ti", **(allocatable or {})}
    return {"metadata": {"name": name, "labels": labels or {}},
            "status": {"allocatable": allocatable, "capacity": dict(allocatable)}}


@pytest.mark.parametrize("slices, expected", [
    pytest.param([make_slice()], NodeGpus(8, 0, "LATEST-GPU-MODEL"), id="example-driver"),
    pytest.param([make_slice(driver=NVIDIA, product=("gpu.nvidia.com/productName", "NVIDIA A100-SXM4-80GB"),
                             kind="gpu")], None, id="another-driver-not-configured"),
    pytest.param([make_slice(gpus=4, uid="a"), make_slice(gpus=4, uid="b", pool="n1-b")],
                 NodeGpus(8, 0, "LATEST-GPU-MODEL"), id="two-pools"),
    pytest.param([make_slice(gpus=8, uid="old"), make_slice(gpus=4, uid="new", generation=1)],
                 NodeGpus(4, 0, "LATEST-GPU-MODEL"), id="newest-generation-of-a-pool-only"),
    pytest.param([make_slice(kind="mig")], None, id="mig-devices-are-no-gpus"),
    pytest.param([make_slice(product=None)], NodeGpus(8, 0, None), id="no-product-attribute"),
])
def test_a_nodes_gpus_are_the_configured_drivers_devices(slices, expected):
    gpus = DraGpus([EXAMPLE])
    gpus.replace(SLICES, slices)
    assert gpus.gpus("n1") == expected


def test_nvidia_product_names_read_as_the_gpu_feature_discovery_label():
    gpus = DraGpus([NVIDIA])
    gpus.replace(SLICES, [make_slice(driver=NVIDIA, kind="gpu",
                                     product=("gpu.nvidia.com/productName", "NVIDIA A100-SXM4-80GB"))])
    folded = gpus.node(node())
    assert folded["metadata"]["labels"][GPU_PRODUCT_LABEL] == "NVIDIA-A100-SXM4-80GB"
    assert folded["status"]["allocatable"][GPU_RESOURCE] == "8"


@pytest.mark.parametrize("claims, allocatable", [
    pytest.param([], 8, id="none"),
    pytest.param([make_claim("c1", devices=range(2))], 6, id="a-claim-only-pod-holds-2"),
    pytest.param([make_claim("x", devices=range(8), extended=True)], 8,
                 id="the-schedulers-claim-for-an-extended-resource-counts-by-the-pods-request"),
    pytest.param([make_claim("c1", devices=range(2)), make_claim("c2", devices=range(1, 3))], 5,
                 id="a-device-two-claims-share-counts-once"),
    pytest.param([make_claim("o", driver=NVIDIA)], 8, id="another-drivers-claim"),
])
def test_claim_only_pods_take_their_devices_off_the_count(claims, allocatable):
    gpus = DraGpus([EXAMPLE])
    gpus.replace(SLICES, [make_slice()])
    gpus.replace(CLAIMS, claims)
    assert gpus.node(node())["status"]["allocatable"][GPU_RESOURCE] == str(allocatable)
    assert gpus.node(node())["status"]["capacity"][GPU_RESOURCE] == "8"


def test_a_device_plugins_count_and_a_feature_discovery_label_win():
    gpus = DraGpus([EXAMPLE])
    gpus.replace(SLICES, [make_slice()])
    plugin = node(allocatable={GPU_RESOURCE: "4"}, labels={GPU_PRODUCT_LABEL: "NVIDIA-H100-80GB-HBM3"})
    assert gpus.node(plugin) is plugin
    labelled = gpus.node(node(labels={GPU_PRODUCT_LABEL: "NVIDIA-H100-80GB-HBM3"}))
    assert labelled["metadata"]["labels"][GPU_PRODUCT_LABEL] == "NVIDIA-H100-80GB-HBM3"


def test_a_node_without_slices_is_left_as_it_is():
    gpus = DraGpus([EXAMPLE])
    gpus.replace(SLICES, [make_slice("n2")])
    bare = node("n1")
    assert gpus.node(bare) is bare


def test_watch_events_say_which_nodes_changed():
    gpus = DraGpus([EXAMPLE])
    assert gpus.apply(SLICES, "ADDED", make_slice("n1")) == {"n1"}
    assert gpus.apply(SLICES, "MODIFIED", make_slice("n1")) == set()  # the same devices
    assert gpus.apply(CLAIMS, "ADDED", make_claim("c", "n1", range(3))) == {"n1"}
    assert gpus.gpus("n1") == NodeGpus(8, 3, "LATEST-GPU-MODEL")
    assert gpus.apply(CLAIMS, "ADDED", make_claim("x", "n1", range(8), extended=True)) == set()
    assert gpus.apply(CLAIMS, "DELETED", make_claim("c", "n1", range(3))) == {"n1"}
    assert gpus.gpus("n1") == NodeGpus(8, 0, "LATEST-GPU-MODEL")
    assert gpus.apply(SLICES, "DELETED", make_slice("n1")) == {"n1"}
    assert gpus.gpus("n1") is None
    assert gpus.replace(SLICES, [make_slice("n1"), make_slice("n2")]) == {"n1", "n2"}
    assert gpus.clear(SLICES) == {"n1", "n2"}


def test_a_claim_seen_before_its_slice_counts_once_the_slice_comes():
    gpus = DraGpus([EXAMPLE])
    gpus.apply(CLAIMS, "ADDED", make_claim("c", "n1", range(2)))
    assert gpus.apply(SLICES, "ADDED", make_slice("n1")) == {"n1"}
    assert gpus.gpus("n1") == NodeGpus(8, 2, "LATEST-GPU-MODEL")


def test_essentials_keep_what_is_counted():
    gpus, slim = DraGpus([EXAMPLE]), DraGpus([EXAMPLE])
    slices = [make_slice(kind="gpu")]
    claims = [make_claim("c", devices=range(2)), make_claim("x", extended=True)]
    gpus.replace(SLICES, slices)
    gpus.replace(CLAIMS, claims)
    slim.replace(SLICES, [dra.essentials(SLICES, s) for s in slices])
    slim.replace(CLAIMS, [dra.essentials(CLAIMS, c) for c in claims])
    assert slim.nodes() == gpus.nodes()
    assert "capacity" not in dra.essentials(SLICES, slices[0])["spec"]["devices"][0]


class _Api:
    """listed() as a cluster answers it: a list of slices, claims refused."""
    def __init__(self, status: int):
        self.status = status


def test_one_read_counts_and_says_what_it_could_not_read(monkeypatch):
    def listed(api, path):
        if path.endswith(CLAIMS):
            raise client.ApiException(status=api.status)
        return [make_slice()]
    monkeypatch.setattr(dra, "listed", listed)
    gpus, notes = DraGpus.read(_Api(403), [EXAMPLE])
    assert gpus.gpus("n1") == NodeGpus(8, 0, "LATEST-GPU-MODEL")
    assert notes == ("DRA resourceclaims (resource.k8s.io/v1) were not read (you may not list them): GPUs "
                     "that DRA drivers publish are not counted",)
    with pytest.raises(client.ApiException):
        DraGpus.read(_Api(500), [EXAMPLE])
    assert DraGpus.read(_Api(404), []) [1] == ()
