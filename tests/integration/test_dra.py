"""GPUs that only a DRA driver publishes, on the real control plane: a dev-cluster of one device-plugin node
(8 allocatable nvidia.com/gpu) and one node whose 8 GPUs are devices of ResourceSlices, with a DeviceClass
that maps `nvidia.com/gpu` to them (spec.extendedResourceName, KEP-5004: the DRAExtendedResource gate,
alpha in 1.34). The extender and the operator count them (--dra-gpu-driver).

No DRA driver runs here: neither sigs.k8s.io/dra-example-driver nor NVIDIA's is served by the Go module
proxy, and a driver's kubelet plugin needs a real kubelet. This test process publishes the ResourceSlice
exactly as dra-example-driver's README shows it (driver gpu.example.com, pool named for the node, devices
gpu-0..7 with driverVersion, index, model and uuid attributes and 80Gi of memory); KWOK plays the node, so
nothing prepares the devices: what is tested is counting, filtering, scoring and binding."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from netsched.api import plans
from netsched.api.conditions import find
from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.api.labels import GPU_PRODUCT_LABEL, GPU_RESOURCE, RACK_LABEL
from netsched.devcluster import audit
from netsched.devcluster.devcluster import EXTENDER, OPERATOR, DevCluster
from netsched.devcluster.pods import gated_job, gpu_pod
from netsched.devcluster.topology import GPUNode
from netsched.devcluster.wait import poll
from netsched.testing.builders import make_gpujob
from netsched.testing.cluster import packing_plans as _plans
from netsched.testing.cluster import priority_classes, running, scratch_namespace, watch_all_or_nothing

ROOT = Path(__file__).parents[2]
RESOURCE = "resource.k8s.io"
DRIVER = "gpu.example.com"  # dra-example-driver's driver and DeviceClass name
DRA_NODE, DRA_RACK = "dra-a2-0", "rack-a2"
PLUGIN_RACK = "rack-a1"  # the one device-plugin node's (gpu_nodes(1, 1, 1))


def resource_slice(node: str) -> dict:
    """The ResourceSlice dra-example-driver publishes for a node of 8 mock GPUs (its README)."""
    devices = [{"name": f"gpu-{i}",
                "attributes": {"driverVersion": {"version": "1.0.0"}, "index": {"int": i},
                               "model": {"string": "LATEST-GPU-MODEL"},
                               "uuid": {"string": f"gpu-{uuid.uuid4()}"}},
                "capacity": {"memory": {"value": "80Gi"}}} for i in range(8)]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"generateName": f"{node}-{DRIVER}-"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 0, "resourceSliceCount": 1}, "devices": devices}}


DEVICE_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
                "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}],
                         "extendedResourceName": GPU_RESOURCE}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[DevCluster]:
    dra = (f"--dra-gpu-driver={DRIVER}",)
    dev = DevCluster(directory=tmp_path_factory.mktemp("dev-cluster"), nodes=1, zones=1, racks_per_zone=1,
                     feature_gates=("DRAExtendedResource=true",), extender_args=dra, operator_args=dra)
    with running(dev):
        api = dev.api_client()
        custom = client.CustomObjectsApi(api)
        node = GPUNode(DRA_NODE, "zone-a", DRA_RACK, "unused").manifest()
        for key in (GPU_PRODUCT_LABEL, "nvidia.com/gpu.count"):  # no GPU feature discovery either
            del node["metadata"]["labels"][key]
        node["status"] = {key: {name: value for name, value in quantities.items() if name != GPU_RESOURCE}
                          for key, quantities in node["status"].items()}
        client.CoreV1Api(api).create_node(node)
        custom.create_cluster_custom_object(RESOURCE, "v1", "deviceclasses", DEVICE_CLASS)
        stored = custom.get_cluster_custom_object(RESOURCE, "v1", "deviceclasses", DRIVER)
        assert stored["spec"].get("extendedResourceName") == GPU_RESOURCE, (
            "the API server dropped DeviceClass spec.extendedResourceName: is DRAExtendedResource on?")
        custom.create_cluster_custom_object(RESOURCE, "v1", "resourceslices", resource_slice(DRA_NODE))
        poll(lambda: any(c.type == "Ready" and c.status == "True"
                         for c in client.CoreV1Api(api).read_node(DRA_NODE).status.conditions or ()),
             60, f"node {DRA_NODE} to be Ready")
        yield dev


@pytest.fixture(scope="module")
def core(cluster) -> client.CoreV1Api:
    return client.CoreV1Api(cluster.api_client())


@pytest.fixture(scope="module")
def custom(cluster) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(cluster.api_client())


@pytest.fixture
def namespace(core) -> Iterator[str]:
    with scratch_namespace(core, "dra") as name:
        yield name


def _netsched(cluster: DevCluster, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "netsched", *args, f"--kubeconfig={cluster.kubeconfig}"],
                          capture_output=True, text=True, env=env, timeout=300)


def _extended_claim(custom, namespace: str, pod: str) -> dict | None:
    """kube-scheduler's claim for the pod's nvidia.com/gpu, once allocated."""
    claims = custom.list_namespaced_custom_object(RESOURCE, "v1", namespace, "resourceclaims")["items"]
    return next((c for c in claims if any(o["name"] == pod for o in c["metadata"].get("ownerReferences", ()))
                 and (c.get("status") or {}).get("allocation")), None)


def test_a_pod_asking_8_gpus_is_placed_through_netsched_on_the_node_only_a_dra_driver_publishes(
        cluster, core, custom, namespace):
    pod = gpu_pod("on-dra", 8, duration="600s")
    pod["spec"]["nodeSelector"] = {RACK_LABEL: DRA_RACK}
    core.create_namespaced_pod(namespace, pod)
    bound = poll(lambda: (p := core.read_namespaced_pod("on-dra", namespace)).spec.node_name and p, 60,
                 "the pod to be bound")
    assert bound.spec.node_name == DRA_NODE
    events = poll(lambda: core.list_namespaced_event(
        namespace, field_selector="reason=NetworkPlacement,involvedObject.name=on-dra").items, 30,
        "the extender's NetworkPlacement event")
    assert DRA_NODE in events[0].message
    claim = poll(lambda: _extended_claim(custom, namespace, "on-dra"), 30, "the pod's GPU claim")
    results = claim["status"]["allocation"]["devices"]["results"]
    assert len(results) == 8 and {r["driver"] for r in results} == {DRIVER}
    assert claim["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"] == "true"
    # the extender counts the 8 GPUs the pod asks, not its claim's devices again: a second 8-GPU pod
    # for the same node waits
    second = gpu_pod("second", 8, duration="600s")
    second["spec"]["nodeSelector"] = {RACK_LABEL: DRA_RACK}
    core.create_namespaced_pod(namespace, second)
    def refused():
        conditions = core.read_namespaced_pod("second", namespace).status.conditions or ()
        return next((c for c in conditions if c.type == "PodScheduled" and c.status == "False"), None)
    waiting = poll(refused, 60, "the second pod to be refused")
    assert waiting.reason == "Unschedulable"


def test_a_job_too_big_for_both_nodes_never_fits_and_the_count_includes_the_dra_gpus(
        cluster, custom, namespace, tmp_path):
    body = make_gpujob("too-many", replicas=3, gpus=8, duration="5s", manifest=True)
    says = "never fits: needs 24 GPUs, the cluster has 16; lower spec.replicas or spec.gang.minAvailable, " \
           "or add nodes"
    path = tmp_path / "too-many.json"
    path.write_text(json.dumps(body))
    whatif = _netsched(cluster, "whatif", "-f", str(path), "-n", namespace, f"--dra-gpu-driver={DRIVER}")
    assert whatif.returncode == 0, whatif.stderr
    assert f"Fits now: no (NeverFits): {says}" in whatif.stdout.splitlines()
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)

    def blocked():
        job = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "too-many")
        said = find((job.get("status") or {}).get("conditions") or [], "Schedulable")
        return said if said and said["reason"] == "NeverFits" else None
    assert poll(blocked, 120, "the GPUJob to be Blocked with NeverFits")["message"] == says


def test_whatif_answers_for_the_dra_node_as_for_the_device_plugin_node(cluster, namespace, tmp_path):
    def answer(rack: str, *flags: str) -> list[str]:
        body = make_gpujob("one", replicas=1, gpus=8, duration="60s", manifest=True)
        body["spec"]["template"]["spec"]["nodeSelector"] = {RACK_LABEL: rack}
        path = tmp_path / f"{rack}.json"
        path.write_text(json.dumps(body))
        done = _netsched(cluster, "whatif", "-f", str(path), "-n", namespace, *flags)
        assert done.returncode == 0, done.stderr
        said = [line for line in done.stdout.splitlines() if line.startswith(("Fits now", "Predicted start"))]
        return [re.sub(r"\d{4}-\d\d-\d\dT[\d:]+Z", "<time>", line) for line in said]

    plugin = answer(PLUGIN_RACK, f"--dra-gpu-driver={DRIVER}")
    assert plugin and plugin[0].startswith("Fits now: yes"), plugin
    assert answer(DRA_RACK, f"--dra-gpu-driver={DRIVER}") == plugin
    # without the driver named, the node has no GPUs to whatif, as to netsched before DRA
    assert answer(DRA_RACK)[0].startswith("Fits now: no")


def test_claim_only_pods_are_ganged_by_the_operator_placed_by_kube_scheduler_and_their_gpus_counted(
        cluster, core, custom, namespace, tmp_path):
    custom.create_namespaced_custom_object(RESOURCE, "v1", namespace, "resourceclaimtemplates", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}}})
    body = gated_job("claims", 2, 1, "600s")  # gated as the webhook gates a gang's pods
    spec = body["spec"]["template"]["spec"]
    [container] = spec["containers"]
    container["resources"] = {"claims": [{"name": "gpu"}]}  # no nvidia.com/gpu: the extender is not asked
    spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    client.BatchV1Api(cluster.api_client()).create_namespaced_job(namespace, body)
    placed = watch_all_or_nothing(core, namespace, "claims", 2)  # released whole by the operator
    assert set(placed.values()) == {DRA_NODE}
    poll(lambda: any(e.reason == "GangReleased" for e in core.list_namespaced_event(
        namespace, field_selector="involvedObject.name=claims").items), 60, "the GangReleased event")
    assert not core.list_namespaced_event(namespace, field_selector="reason=NetworkPlacement").items

    def answer(gpus: int) -> str:
        job = make_gpujob(f"next-{gpus}", replicas=1, gpus=gpus, duration="60s", manifest=True)
        job["spec"]["template"]["spec"]["nodeSelector"] = {RACK_LABEL: DRA_RACK}
        path = tmp_path / f"{gpus}.json"
        path.write_text(json.dumps(job))
        done = _netsched(cluster, "whatif", "-f", str(path), "-n", namespace, f"--dra-gpu-driver={DRIVER}")
        assert done.returncode == 0, done.stderr
        return next(line for line in done.stdout.splitlines() if line.startswith("Fits now"))
    # their 2 devices are in use: 6 fit now, 8 not yet, and 8 is no NeverFits (they come back)
    poll(lambda: answer(6).startswith("Fits now: yes") or None, 30, "whatif to count the claims' devices")
    eight = answer(8)
    assert eight.startswith("Fits now: no") and "NeverFits" not in eight, eight


def test_a_packing_plan_makes_room_on_the_dra_node(cluster, core, custom, namespace):
    with priority_classes(cluster.api_client()) as names:
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
            "low", replicas=2, gpus=8, duration="600s", manifest=True, priorityClassName=names["low"]))
        low = poll(lambda: (ps := core.list_namespaced_pod(namespace).items) and len(ps) == 2
                   and all(p.status.phase == "Running" for p in ps) and ps, 90, "the low job on both nodes")
        assert DRA_NODE in {p.spec.node_name for p in low}
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
            "urgent", replicas=2, gpus=8, duration="600s", manifest=True, priorityClassName=names["high"]))
        done = poll(lambda: next((p for p in _plans(custom) if plans.phase(p) in plans.TERMINAL), None), 120,
                    "a PackingPlan to end")
        assert plans.phase(done) == "Succeeded", done.get("status")
        assert {e["pod"].split("/")[1] for e in done["spec"]["evictions"]} == {p.metadata.name for p in low}

        def urgent_running():
            job = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "urgent")
            return job if (job.get("status") or {}).get("phase") == "Running" else None
        running_job = poll(urgent_running, 120, "the urgent job to run")
        assert DRA_NODE in {p["node"] for p in running_job["status"]["placements"]}
        for plan in _plans(custom):
            name = plan["metadata"]["name"]
            custom.delete_cluster_custom_object(plans.GROUP, plans.VERSION, plans.PLURAL, name)


def test_the_extender_and_operator_read_slices_and_claims_with_no_request_refused(cluster):
    seen = [r for r in audit.requests(cluster.audit_log) if r.user in (EXTENDER, OPERATOR)]
    assert not [r for r in seen if r.denied], [r for r in seen if r.denied][:10]
    used = {(r.user, r.verb, r.resource) for r in seen}
    for needed in [(EXTENDER, "watch", "resourceslices"), (EXTENDER, "watch", "resourceclaims"),
                   (OPERATOR, "watch", "resourceslices"), (OPERATOR, "watch", "resourceclaims"),
                   (OPERATOR, "list", "resourceclaims")]:  # the packing pass's one read
        assert needed in used, (needed, sorted(u for u in used if u[2].startswith("resource")))
