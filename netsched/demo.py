"""`netsched demo`: the main job, end to end on the dev-cluster.

It submits a small GPU workload to the `netsched` scheduler profile, whose
extender places each job's replicas together and near their data, prints where
each pod went and why (the extender's NetworkPlacement events), and shows a pod
that nothing can hold staying Pending. It grows as the operator and packer land.
"""

from __future__ import annotations

import time

from kubernetes import client

from netsched.cluster.devcluster import DevCluster
from netsched.cluster.pods import gpu_pod, pod_gpus, scheduled_condition
from netsched.cluster.topology import RACK_LABEL, ZONE_LABEL
from netsched.cluster.wait import poll

NAMESPACE = "netsched-demo"
JOB = "netsched.io/job"
TRAIN = {"netsched.io/data-source": "zone:zone-b", "netsched.io/job-gpus": "8"}
EVAL = {"netsched.io/data-source": "zone:zone-a", "netsched.io/max-data-distance": "zone",
        "netsched.io/max-peer-distance": "rack"}
# (name, GPUs, duration, job, annotations): a 4x2-GPU training job whose data is in
# zone-b, a 2x4-GPU eval job that must stay in zone-a with its replicas in one rack,
# single pods of several sizes, and a 16-GPU pod no 8-GPU node can hold.
WORKLOAD = [
    *[(f"train-{i}", 2, "4s", "train", TRAIN) for i in range(4)],
    *[(f"eval-{i}", 4, "3s", "eval", EVAL) for i in range(2)],
    ("big-batch", 8, "3s", None, {}),
    ("notebook", 1, "2s", None, {}),
    ("too-big", 16, "2s", None, {}),
]


def run_demo(cluster: DevCluster, keep: bool = False) -> int:
    started_here = len(cluster.running_components()) < len(cluster.components())
    if started_here:
        cluster.up()
    else:
        print(f"using the dev-cluster already running in {cluster.directory}")
    try:
        core = client.CoreV1Api(cluster.api_client())
        _fresh_namespace(core)
        t0 = time.monotonic()
        for name, gpus, duration, job, annotations in WORKLOAD:
            labels = {"app": "demo"} | ({JOB: job} if job else {})
            core.create_namespaced_pod(NAMESPACE, gpu_pod(name, gpus, duration, labels=labels,
                                                          annotations=annotations))
        print(f"submitted {len(WORKLOAD)} GPU pods to scheduler 'netsched' in namespace {NAMESPACE}")
        poll(lambda: all(scheduled_condition(p) for p in _pods(core)), 60, "the scheduler to decide")
        _print_placements(core, f"after {time.monotonic() - t0:.1f} s")
        _print_spread(core, "train")
        _print_spread(core, "eval")
        _print_explanations(core)
        poll(lambda: all(_finished_or_unschedulable(p) for p in _pods(core)), 120,
             "the demo pods to finish")
        _print_placements(core, f"after {time.monotonic() - t0:.1f} s")
    finally:
        if started_here and not keep:
            cluster.down(quiet=True)
            print("dev-cluster stopped (pass --keep-cluster to leave it running)")
    if started_here and keep:
        print(f"dev-cluster left running: kubectl --kubeconfig {cluster.kubeconfig} get nodes")
    return 0


def _fresh_namespace(core: client.CoreV1Api) -> None:
    try:
        core.delete_namespace(NAMESPACE)
        poll(lambda: not _namespace_exists(core), 120, f"namespace {NAMESPACE} to be deleted")
    except client.ApiException as exc:
        if exc.status != 404:
            raise
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    poll(lambda: core.read_namespaced_service_account("default", NAMESPACE), 60,
         f"the default ServiceAccount in {NAMESPACE}")


def _namespace_exists(core: client.CoreV1Api) -> bool:
    try:
        core.read_namespace(NAMESPACE)
        return True
    except client.ApiException as exc:
        if exc.status == 404:
            return False
        raise


def _pods(core: client.CoreV1Api) -> list:
    return core.list_namespaced_pod(NAMESPACE).items


def _finished_or_unschedulable(pod) -> bool:
    cond = scheduled_condition(pod)
    unschedulable = cond is not None and cond.reason == "Unschedulable"
    return pod.status.phase in ("Succeeded", "Failed") or unschedulable


def _print_placements(core: client.CoreV1Api, when: str) -> None:
    nodes = {n.metadata.name: n.metadata.labels for n in core.list_node().items}
    print(f"\nplacements {when}:")
    print(f"  {'pod':<11} {'GPUs':>4}  {'node':<12} {'zone':<8} {'rack':<9} phase")
    for pod in sorted(_pods(core), key=lambda p: p.metadata.name):
        node = pod.spec.node_name
        labels = nodes.get(node, {})
        cond = scheduled_condition(pod)
        phase = pod.status.phase
        if not node and cond is not None and cond.reason:
            phase = f"{phase} ({cond.reason}: {(cond.message or '').strip()})"
        print(f"  {pod.metadata.name:<11} {pod_gpus(pod):>4}  {node or '-':<12} "
              f"{labels.get(ZONE_LABEL, '-'):<8} {labels.get(RACK_LABEL, '-'):<9} {phase}")


def _print_spread(core: client.CoreV1Api, job: str) -> None:
    """How far apart one job's replicas landed: what network-aware placement improves."""
    nodes = {n.metadata.name: n.metadata.labels for n in core.list_node().items}
    placed = [p.spec.node_name for p in _pods(core) if p.metadata.name.startswith(f"{job}-")]
    racks = {nodes[n][RACK_LABEL] for n in placed if n}
    zones = {nodes[n][ZONE_LABEL] for n in placed if n}
    print(f"\njob '{job}' ({len(placed)} replicas) spans {len(racks)} rack(s) in {len(zones)} zone(s)")


def _print_explanations(core: client.CoreV1Api) -> None:
    """The extender's NetworkPlacement events: why each pod went where it did."""
    events = poll(lambda: core.list_namespaced_event(NAMESPACE, field_selector="reason=NetworkPlacement")
                  .items, 30, "the extender's placement events")
    print("\nwhy (NetworkPlacement events from the netsched extender):")
    for e in sorted(events, key=lambda e: e.involved_object.name):
        print(f"  {e.involved_object.name:<11} {e.message}")
