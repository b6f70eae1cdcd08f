"""A gang placed as one decision on the real control plane: as the operator lifts a gang's gates it asks
the extender (POST /gang) for every member's node and pins each pod to it (required node affinity on
metadata.name, which kube-scheduler's NodeAffinity PreFilter turns into one node), so kube-scheduler
binds each pod where the gang was decided."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest
import yaml
from kubernetes import client

from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.api.labels import JOB_LABEL, MAX_PEER_DISTANCE, RACK_LABEL
from netsched.devcluster.crds import install_crds
from netsched.devcluster.pods import gated_job, gpu_pod
from netsched.devcluster.wait import poll
from netsched.jobs.replica_pods import GANG_GATE
from netsched.testing import pod_groups
from netsched.testing.builders import make_gpujob
from netsched.testing.cluster import free_gpus, operator_metric, pinned_to, pods_of, watch_all_or_nothing

# the compatibility lane (make test-compat) runs it on the older Kubernetes too: pins by required node
# affinity, which kube-scheduler's NodeAffinity PreFilter narrows to one node
pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def batch(dev_cluster) -> client.BatchV1Api:
    return client.BatchV1Api(dev_cluster.api_client())


def empty(core) -> dict[str, int]:
    return poll(lambda: (f := free_gpus(core)) and all(v == 8 for v in f.values()) and f, 180,
                "every node empty")


def released_event(core, namespace: str, name: str) -> str:
    return poll(lambda: next((e.message for e in core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}").items if e.reason == "GangReleased"), None),
        60, f"the GangReleased Event of {name}")


def test_an_indexed_job_lands_on_one_node_where_its_gang_was_pinned(dev_cluster, core, batch, namespace):
    empty(core)
    before = operator_metric(dev_cluster, "netsched_operator_gang_placements_total", result="pinned")
    batch.create_namespaced_job(namespace, gated_job("train", 4, 2, "600s"))
    placed = watch_all_or_nothing(core, namespace, "train", 4)
    assert len(set(placed.values())) == 1, placed  # 8 GPUs: one empty 8-GPU node holds the gang
    for pod in pods_of(core, namespace, "train"):
        assert pinned_to(pod) == [pod.spec.node_name], (pod.metadata.name, pinned_to(pod))
    assert "chosen together" in released_event(core, namespace, "train")
    after = operator_metric(dev_cluster, "netsched_operator_gang_placements_total", result="pinned")
    assert after == before + 1


def test_a_gpujob_is_pinned_as_its_gate_lifts(core, jobs, namespace):
    empty(core)
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "pinned", replicas=4, gpus=2, duration="600s", manifest=True))
    def bound() -> list[client.V1Pod]:
        pods = core.list_namespaced_pod(namespace, label_selector=f"{JOB_LABEL}=pinned").items
        return pods if len(pods) == 4 and all(p.spec.node_name for p in pods) else []
    pods = poll(bound, 120, "the 4 pods bound")
    assert len({p.spec.node_name for p in pods}) == 1
    assert all(pinned_to(p) == [p.spec.node_name] for p in pods), [(p.metadata.name, pinned_to(p))
                                                                   for p in pods]


def test_a_rack_limit_goes_where_the_gang_takes_fewest_nodes_not_to_the_roomiest_rack(
        core, batch, namespace):
    """Every node keeps 6 free GPUs but one, empty, whose rack-mate is full: the roomiest racks hold 12
    free GPUs on two nodes, the empty node's rack 8 on one. A gang of 8 GPUs within a rack fits on that
    one node."""
    free = empty(core)
    racks = {n.metadata.name: n.metadata.labels[RACK_LABEL] for n in core.list_node().items}
    target = sorted(free)[0]
    mate = next(n for n in sorted(free) if n != target and racks[n] == racks[target])
    for node in sorted(free):
        if node != target:
            filler = gpu_pod(f"filler-{node}", 8 if node == mate else 2, duration="600s")
            filler["spec"]["nodeName"] = node
            core.create_namespaced_pod(namespace, filler)
    poll(lambda: all(p.status.phase == "Running" for p in core.list_namespaced_pod(namespace).items),
         60, "the filler pods to run")
    batch.create_namespaced_job(namespace, gated_job("racked", 4, 2, "600s",
                                                     annotations={MAX_PEER_DISTANCE: "rack"}))
    placed = watch_all_or_nothing(core, namespace, "racked", 4)
    assert set(placed.values()) == {target}, placed


def test_whatif_says_the_nodes_the_release_then_pins_the_gang_to(
        dev_cluster, core, batch, namespace, tmp_path):
    """whatif asks the extender the question the release asks (a dry run): with nothing changing in
    between, the nodes it names are the nodes the pods are pinned to."""
    empty(core)
    tls = dev_cluster.pki
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(gated_job("asked", 4, 2, "600s")))
    said = subprocess.run(
        [sys.executable, "-m", "netsched", "whatif", "-f", str(manifest), "-n", namespace,
         f"--kubeconfig={dev_cluster.kubeconfig}", f"--extender-url={dev_cluster.extender_url}",
         f"--extender-ca-file={tls.extender_ca_cert}", f"--extender-cert-file={tls.scheduler_client_cert}",
         f"--extender-key-file={tls.scheduler_client_key}", "-o", "json"],
        capture_output=True, text=True, timeout=120)
    assert said.returncode == 0, said.stderr
    answer = json.loads(said.stdout)  # one document: its answer alone
    [gang] = answer["gangs"]
    assert gang["placedBy"] == "extender", answer
    would = {row["node"]: row["replicas"] for row in gang["placement"]}
    batch.create_namespaced_job(namespace, gated_job("asked", 4, 2, "600s"))
    placed = watch_all_or_nothing(core, namespace, "asked", 4)
    pinned = {}
    for pod in pods_of(core, namespace, "asked"):
        [node] = pinned_to(pod)
        pinned[node] = pinned.get(node, 0) + 1
    assert pinned == would and set(placed.values()) == set(would), (would, pinned, placed)


def test_whatif_with_an_unreadable_extender_certificate_says_so_in_one_line(dev_cluster, tmp_path):
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(gated_job("asked", 4, 2, "600s")))
    said = subprocess.run(
        [sys.executable, "-m", "netsched", "whatif", "-f", str(manifest),
         f"--kubeconfig={dev_cluster.kubeconfig}", f"--extender-url={dev_cluster.extender_url}",
         f"--extender-ca-file={tmp_path / 'missing.pem'}"],
        capture_output=True, text=True, timeout=120)
    assert said.returncode == 2 and said.stdout == "", said
    [line] = said.stderr.splitlines()
    assert line.startswith("netsched: error: whatif: --extender-ca-file ") and "missing.pem" in line, line


LWS = "leaderworkerset.sigs.k8s.io/"
BARE_KINDS = {  # the labels and annotations each kind's controller writes on its pods (controllers not run)
    "kueue": ({"kueue.x-k8s.io/pod-group-name": "kueue"}, {"kueue.x-k8s.io/pod-group-total-count": "4"}),
    "lws": ({LWS + "name": "lws", LWS + "group-index": "0"}, {LWS + "size": "4"}),
    "podgroup": ({pod_groups.POD_GROUP_LABEL: "podgroup"}, {}),
}


@pytest.fixture
def podgroups_served(dev_cluster) -> Iterator[None]:
    """scheduler-plugins' PodGroup CRD served for one test, and gone (waited for) after it: the other
    files on this worker's dev-cluster expect the API without it."""
    api = dev_cluster.api_client()
    install_crds(api, [pod_groups.CRD])
    yield
    ext = client.ApiextensionsV1Api(api)
    ext.delete_custom_resource_definition(pod_groups.CRD_NAME)
    poll(lambda: pod_groups.CRD_NAME not in {c.metadata.name
                                             for c in ext.list_custom_resource_definition().items},
         60, f"CRD {pod_groups.CRD_NAME} to go")


def test_gangs_of_bare_pods_are_pinned_to_one_node_for_every_kind(dev_cluster, core, namespace,
                                                                   podgroups_served):
    """Kueue's plain-pod groups, LeaderWorkerSet groups and scheduler-plugins PodGroups, as their
    controllers label the pods: each gang pinned as its gates lift, every member bound where pinned,
    all on one node (an empty cluster has 8-GPU nodes to spare)."""
    empty(core)
    client.CustomObjectsApi(dev_cluster.api_client()).create_namespaced_custom_object(
        pod_groups.GROUP, pod_groups.VERSION, namespace, pod_groups.PLURAL,
        {"apiVersion": f"{pod_groups.GROUP}/{pod_groups.VERSION}", "kind": "PodGroup",
         "metadata": {"name": "podgroup"}, "spec": {"minMember": 4}})
    for kind, (labels, notes) in BARE_KINDS.items():
        for r in range(4):
            pod = gpu_pod(f"{kind}-{r}", 2, duration="600s", labels={**labels, "gang": kind},
                          annotations=notes)
            pod["spec"]["schedulingGates"] = [{"name": GANG_GATE}]
            core.create_namespaced_pod(namespace, pod)

    def bound() -> dict[str, list[client.V1Pod]]:
        pods = core.list_namespaced_pod(namespace, label_selector="gang").items
        done = len(pods) == 4 * len(BARE_KINDS) and all(p.spec.node_name for p in pods)
        return {k: [p for p in pods if p.metadata.labels["gang"] == k] for k in BARE_KINDS} if done else {}
    gangs = poll(bound, 120, "every member of the three gangs bound")
    for kind, pods in gangs.items():
        assert len({p.spec.node_name for p in pods}) == 1, (kind, [p.spec.node_name for p in pods])
        assert all(pinned_to(p) == [p.spec.node_name] for p in pods), (kind, [pinned_to(p) for p in pods])
