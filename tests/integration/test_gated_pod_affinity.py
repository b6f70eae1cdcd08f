"""The data limit's node affinity on the real API server: a gated pod's required affinity narrowed by
the patch that lifts its gate (as the pod-gang controller releases a gang) is accepted and kept by
kube-scheduler; a bare pod asking for a data limit gets it from the operator's webhook at creation, in
a namespace not opted in to gang scheduling."""

from __future__ import annotations

from kubernetes import client

from netsched.api.labels import DATA_SOURCE, MAX_DATA_DISTANCE, RACK_LABEL, ZONE_LABEL
from netsched.api.topology import DEFAULT
from netsched.devcluster.pods import gpu_pod
from netsched.devcluster.wait import poll
from netsched.jobs.hard_limits import data_requirement, requirement_patch
from netsched.jobs.workload import NetworkNeeds

HOLD = "example.com/hold"  # a gate of someone else's: the operator leaves such a pod alone


def required_terms(pod: client.V1Pod) -> list[list[tuple[str, str, list[str] | None]]]:
    required = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    return [[(e.key, e.operator, e.values) for e in t.match_expressions]
            for t in required.node_selector_terms]


def test_a_gated_pods_affinity_narrowed_as_its_gate_lifts_is_accepted_and_kept(core, namespace):
    nodes = [(n.metadata.name, n.metadata.labels) for n in core.list_node().items]
    rack = sorted(labels[RACK_LABEL] for _, labels in nodes)[-1]
    pod = gpu_pod("held", 1, duration="600s")
    pod["spec"]["schedulingGates"] = [{"name": HOLD}]
    mine = {"key": ZONE_LABEL, "operator": "Exists"}  # the author's own term, kept and narrowed
    pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [mine]}]}}}
    core.create_namespaced_pod(namespace, pod)
    spec = client.ApiClient().sanitize_for_serialization(core.read_namespaced_pod("held", namespace))["spec"]
    assert spec["schedulingGates"] == [{"name": HOLD}]  # the operator leaves it alone

    near = data_requirement(NetworkNeeds(None, "rack", ("rack", rack)), nodes, DEFAULT)
    lift = {"op": "remove", "path": "/spec/schedulingGates"}
    core.patch_namespaced_pod("held", namespace, [*requirement_patch(spec, near), lift])
    bound = poll(lambda: (p := core.read_namespaced_pod("held", namespace)).spec.node_name and p, 120,
                 "the released pod to be bound")
    zone = next(labels[ZONE_LABEL] for _, labels in nodes if labels[RACK_LABEL] == rack)
    assert required_terms(bound) == [[(ZONE_LABEL, "Exists", None), (ZONE_LABEL, "In", [zone]),
                                      (RACK_LABEL, "In", [rack])]]
    assert dict(nodes)[bound.spec.node_name][RACK_LABEL] == rack


def test_a_bare_pod_asking_for_a_data_limit_gets_it_from_the_webhook(core, namespace):
    nodes = {n.metadata.name: n.metadata.labels for n in core.list_node().items}
    zone = sorted(labels[ZONE_LABEL] for labels in nodes.values())[-1]
    core.create_namespaced_pod(namespace, gpu_pod("bare", 1, duration="600s", annotations={
        DATA_SOURCE: f"zone:{zone}", MAX_DATA_DISTANCE: "zone"}))
    pod = poll(lambda: (p := core.read_namespaced_pod("bare", namespace)).spec.node_name and p, 120,
               "the pod to be bound")
    assert required_terms(pod) == [[(ZONE_LABEL, "In", [zone])]]
    assert nodes[pod.spec.node_name][ZONE_LABEL] == zone
    plain = core.create_namespaced_pod(namespace, gpu_pod("plain", 1, duration="600s"))
    assert plain.spec.affinity is None  # a pod asking for no limit is not sent to it
