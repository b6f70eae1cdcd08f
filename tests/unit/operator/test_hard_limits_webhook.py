"""The hard-limits webhook: a pod of netsched's scheduler asking for a data limit gets it as required
node affinity; others are left alone; what cannot be written is a warning, never a refusal."""

import pytest

from netsched.api.labels import DATA_SOURCE, MAX_DATA_DISTANCE, SCHEDULER_NAME
from netsched.api.topology import DEFAULT
from netsched.operator.metrics import OperatorMetrics
from netsched.operator.webhook.configurations import hard_limits_configuration
from netsched.operator.webhook.hard_limits import keep_near_data, near_data
from netsched.testing.builders import make_pod

ZONE = "topology.kubernetes.io/zone"
NODES = {("zone", "zone-a"): [("a-0", {ZONE: "zone-a"})], ("node", "a-0"): [("a-0", {ZONE: "zone-a"})]}
LIMIT = {DATA_SOURCE: "zone:zone-a", MAX_DATA_DISTANCE: "zone"}
GPUJOB_OWNER = [{"apiVersion": "netsched.io/v1alpha1", "kind": "GPUJob", "name": "j", "uid": "u",
                 "controller": True}]


def holders(kind, location):
    return NODES.get((kind, location), [])


def limited_pod(annotations=LIMIT, scheduler=SCHEDULER_NAME, owners=None):
    pod = make_pod("bare", annotations=dict(annotations), scheduler=scheduler)
    if owners:
        pod["metadata"]["ownerReferences"] = owners
    return pod


def terms(affinity):
    return affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]


def test_a_pod_asking_for_a_data_limit_gets_it_as_node_affinity():
    affinity = near_data(limited_pod(), SCHEDULER_NAME, holders, DEFAULT)
    assert terms(affinity) == [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-a"]}]}]


@pytest.mark.parametrize("pod", [
    pytest.param(limited_pod(scheduler="default-scheduler"), id="another-scheduler"),
    pytest.param(limited_pod(owners=GPUJOB_OWNER), id="a-gpujob-pod-the-operator-limits"),
    pytest.param(limited_pod({DATA_SOURCE: "zone:zone-a"}), id="data-but-no-limit"),
    pytest.param(limited_pod({DATA_SOURCE: "endpoint:10.0.0.5:9000", MAX_DATA_DISTANCE: "zone"}),
                 id="an-endpoint"),
])
def test_other_pods_are_left_as_they_are(pod):
    asked = []
    assert near_data(pod, SCHEDULER_NAME, lambda *a: asked.append(a) or [], DEFAULT) is None
    assert asked == []  # and no node was read for them


def test_a_data_source_no_node_has_is_a_warning_and_the_pod_goes_on():
    metrics = OperatorMetrics()
    pod = limited_pod({DATA_SOURCE: "zone:zone-q", MAX_DATA_DISTANCE: "zone"})
    affinity, warning = keep_near_data(pod, SCHEDULER_NAME, holders, DEFAULT, metrics)
    assert affinity is None
    assert warning == (f"netsched: pod ml/bare: {DATA_SOURCE}=zone:zone-q: no node with {ZONE}=zone-q "
                       "exists (the extender refuses every node for it): fix the data source; until then "
                       f"kube-scheduler is not told its {MAX_DATA_DISTANCE}, only the extender keeps it")
    assert metrics.registry.get_sample_value("netsched_webhook_requests_total", {"outcome": "limited"}) == 0


def test_nodes_out_of_reach_are_counted_and_the_pod_goes_on():
    metrics = OperatorMetrics()

    def down(*_):
        raise ConnectionError("apiserver down")
    affinity, warning = keep_near_data(limited_pod(), SCHEDULER_NAME, down, DEFAULT, metrics)
    assert affinity is None and "could not be written" in warning and "ConnectionError" in warning
    assert metrics.registry.get_sample_value("netsched_webhook_requests_total", {"outcome": "error"}) == 1
    _, none = keep_near_data(limited_pod(), SCHEDULER_NAME, holders, DEFAULT, metrics)
    assert none is None
    assert metrics.registry.get_sample_value("netsched_webhook_requests_total", {"outcome": "limited"}) == 1


def test_the_configuration_sends_only_pods_asking_for_a_data_limit_from_every_namespace():
    config = hard_limits_configuration("n", {}, "gpu-sched", exclude_namespaces=("kube-system", "ns"))
    [hook] = config["webhooks"]
    assert hook["name"] == "hard-limits.netsched.io"
    assert hook["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "ns"]}]
    assert hook["failurePolicy"] == "Ignore"  # the extender still keeps the limit
    expressions = " ".join(c["expression"] for c in hook["matchConditions"])
    assert "object.spec.schedulerName == 'gpu-sched'" in expressions and "o.kind == 'GPUJob'" in expressions
    assert f"'{MAX_DATA_DISTANCE}' in object.metadata.annotations" in expressions
    assert f"'{DATA_SOURCE}' in object.metadata.annotations" in expressions
