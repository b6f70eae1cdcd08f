import pytest

from netsched.api.labels import RACK_LABEL
from netsched.api.resources import pod_requests
from netsched.jobs.capacity import gang_fit, node_room
from netsched.jobs.workload import NetworkNeeds
from netsched.testing.builders import CLUSTER, Gang, make_node

GPU = "nvidia.com/gpu"
GI = 2**30
ROOMS = [node_room(n) for n in CLUSTER]  # four nodes of 8 GPUs, 96 CPUs, 1024Gi


def fit(nodes=ROOMS, request=None, needed=2, used=None, pending=(), template=None, network=None, data=None):
    network = network or {}
    needs = NetworkNeeds(network.get("maxPeerDistance"), network.get("maxDataDistance"), data)
    gang = Gang(request or {GPU: 4}, needed, template or {}, needs)
    return gang_fit(nodes, used or {}, list(pending), gang)


def eligible(result) -> int:
    """The nodes the message counts as eligible (a gang no node may hold never fits, and says so)."""
    if result.why == "NeverFits":
        assert "Ready, schedulable nodes matches" in result.message, result.message
        return 0
    return int(result.message.split(" eligible")[0].rsplit(" on ", 1)[1])


@pytest.mark.parametrize("containers, expected", [
    pytest.param([{"resources": {"limits": {GPU: "2"}}}], {GPU: 2}, id="limits-when-no-request"),
    pytest.param([{"resources": {"limits": {"cpu": "4"}, "requests": {"cpu": "500m"}}}], {"cpu": 0.5},
                 id="request-over-limit"),
    pytest.param([{"resources": {"requests": {"memory": "64Gi"}}},
                  {"resources": {"requests": {"memory": "512Mi", "cpu": "1"}}}],
                 {"memory": 64.5 * GI, "cpu": 1}, id="summed-over-containers"),
    pytest.param([{"name": "no-resources"}], {}, id="nothing"),
])
def test_pod_requests(containers, expected):
    assert pod_requests({"containers": containers}) == expected


@pytest.mark.parametrize("manifest, schedulable", [
    pytest.param(make_node("n"), True, id="ready"),
    pytest.param(make_node("n", ready=False), False, id="not-ready"),
    pytest.param(make_node("n", unschedulable=True), False, id="cordoned"),
    pytest.param({"metadata": {"name": "n"}, "status": {"allocatable": {GPU: "8"}}}, False,
                 id="no-conditions"),
])
def test_node_room_schedulable(manifest, schedulable):
    assert node_room(manifest).schedulable is schedulable


def test_node_room_parses_quantities_and_keeps_only_hard_taints():
    taints = [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "PreferNoSchedule"},
              {"key": "c", "effect": "NoExecute"}]
    room = node_room(make_node("n", cpu="95500m", memory="64Gi", taints=taints))
    assert room.allocatable == {"cpu": 95.5, "memory": 64 * GI, "pods": 110, GPU: 8}
    assert [t["key"] for t in room.taints] == ["a", "c"]
    assert room.labels["netsched.io/rack"] == "rack-a1"


@pytest.mark.parametrize("request_, used, placeable", [
    pytest.param({GPU: 4}, {}, 8, id="two-per-node"),
    pytest.param({GPU: 3}, {}, 8, id="remainder-wasted"),
    pytest.param({GPU: 1, "cpu": 40}, {}, 8, id="cpu-bound"),
    pytest.param({GPU: 1, "cpu": 0.5, "memory": 300 * GI}, {}, 12, id="memory-bound"),
    pytest.param({GPU: 4}, {"a1-0": {GPU: 5}, "b1-0": {GPU: 8}}, 4, id="used-room-subtracted"),
    pytest.param({GPU: 2, "cpu": 40}, {"a1-0": {"cpu": 90}}, 6, id="used-cpu-subtracted"),
    pytest.param({GPU: 2, "example.com/fpga": 1}, {}, 0, id="resource-no-node-has"),
])
def test_counts_replicas_per_node_across_every_resource(request_, used, placeable):
    assert fit(request=request_, used=used, needed=1).placeable == placeable


def test_the_message_says_what_is_needed_and_what_fits():
    result = fit(nodes=ROOMS[:2], request={GPU: 4, "cpu": 0.5, "memory": 64 * GI}, needed=4,
                 used={"a1-0": {GPU: 4}})
    assert (result.placeable, result.needed, result.fits) == (3, 4, False)
    assert result.message == ("needs 4 replica(s) of 4 GPUs, 0.5 CPU, 64Gi memory; 3 fit now "
                              "(12 free GPUs on 2 eligible of 2 nodes)")


@pytest.mark.parametrize("pending, placeable", [
    pytest.param([], 3, id="none"),
    pytest.param([{GPU: 8}], 1, id="takes-a-whole-node"),
    pytest.param([{GPU: 4}, {GPU: 8}], 0, id="largest-first"),  # in list order the 8 would fit nowhere
    pytest.param([{GPU: 16}], 3, id="fits-nowhere-is-ignored"),
])
def test_released_but_unbound_pods_take_their_room_first(pending, placeable):
    nodes = [node_room(make_node("big")), node_room(make_node("small", gpus=4))]
    assert fit(nodes=nodes, pending=pending, needed=1).placeable == placeable


@pytest.mark.parametrize("level, placeable, says", [
    pytest.param(None, 4, "needs 3 replica(s) of 8 GPUs; 3 fit now", id="anywhere"),
    pytest.param("node", 1, "never fits: needs 3 replica(s) of 8 GPUs on one node", id="one-node"),
    pytest.param("rack", 2, "never fits: needs 3 replica(s) of 8 GPUs within one rack", id="one-rack"),
    pytest.param("zone", 3, "needs 3 replica(s) of 8 GPUs in one zone; 3 fit now", id="one-zone"),
])
def test_max_peer_distance_counts_the_best_group(level, placeable, says):
    result = fit(request={GPU: 8}, needed=3, network={"maxPeerDistance": level} if level else {})
    assert result.placeable == placeable
    assert result.fits is (placeable >= 3)
    assert result.message.startswith(says)


@pytest.mark.parametrize("level, used, domain", [
    pytest.param("rack", {}, (RACK_LABEL, "rack-a1"), id="the-rack-with-most-room"),
    pytest.param("rack", {"a1-0": {GPU: 8}}, (RACK_LABEL, "rack-a1"),
                 id="ties-by-name"),
    pytest.param("rack", {"a1-0": {GPU: 8}, "a1-1": {GPU: 4}}, (RACK_LABEL, "rack-a2"),
                 id="most-room-moves"),
    pytest.param("zone", {}, ("topology.kubernetes.io/zone", "zone-a"), id="zone"),
    pytest.param("node", {}, None, id="one-node-is-left-to-the-extender"),
    pytest.param(None, {}, None, id="no-limit"),
])
def test_a_gang_with_a_peer_limit_is_released_into_the_domain_with_most_room(level, used, domain):
    result = fit(request={GPU: 4}, needed=2, used=used, network={"maxPeerDistance": level} if level else {})
    assert result.fits and result.domain == domain


def test_a_gang_that_does_not_fit_names_no_domain():
    assert fit(request={GPU: 8}, needed=3, network={"maxPeerDistance": "rack"}).domain is None


@pytest.mark.parametrize("level, data, nodes", [
    pytest.param("zone", ("zone", "zone-b"), 1, id="zone-data-in-zone"),
    pytest.param("zone", ("rack", "rack-a2"), 3, id="rack-data-in-zone"),
    pytest.param("rack", ("rack", "rack-a1"), 2, id="rack-data-in-rack"),
    pytest.param("rack", ("node", "a2-0"), 1, id="node-data-in-rack"),
    pytest.param("node", ("node", "a1-1"), 1, id="node-data-on-node"),
    pytest.param("rack", ("zone", "zone-a"), 0, id="zone-data-coarser-than-rack"),
    pytest.param("node", ("rack", "rack-a1"), 0, id="rack-data-coarser-than-node"),
    pytest.param("zone", ("rack", "rack-zz"), 0, id="unknown-rack"),
    pytest.param("rack", ("endpoint", "minio:9000"), 4, id="endpoint-not-limited"),
    pytest.param("rack", None, 4, id="no-data-source"),
])
def test_max_data_distance_keeps_only_nodes_near_the_data(level, data, nodes):
    result = fit(request={GPU: 8}, needed=1, network={"maxDataDistance": level}, data=data)
    assert eligible(result) == nodes
    assert result.placeable == nodes


def test_data_held_by_an_unschedulable_node_still_locates_its_rack():
    nodes = [node_room(make_node("a1-0", unschedulable=True)), node_room(make_node("a1-1")),
             node_room(make_node("a2-0", rack="rack-a2"))]
    result = fit(nodes=nodes, request={GPU: 8}, needed=1, network={"maxDataDistance": "rack"},
                 data=("node", "a1-0"))
    assert result.placeable == 1 and eligible(result) == 1


def test_node_selector():
    selector = {"topology.kubernetes.io/zone": "zone-a", "netsched.io/rack": "rack-a1"}
    result = fit(request={GPU: 8}, needed=1, template={"nodeSelector": selector})
    assert result.placeable == 2 and eligible(result) == 2


ZONE, GPU_COUNT = "topology.kubernetes.io/zone", "nvidia.com/gpu.count"


@pytest.mark.parametrize("key, operator, values, nodes", [
    pytest.param(ZONE, "In", ["zone-b"], 1, id="in"),
    pytest.param(ZONE, "NotIn", ["zone-b"], 3, id="not-in"),
    pytest.param(ZONE, "DoesNotExist", None, 0, id="does-not-exist"),
    pytest.param(GPU_COUNT, "Gt", ["4"], 4, id="gt"),
    pytest.param(GPU_COUNT, "Gt", ["8"], 0, id="gt-equal"),
    pytest.param(GPU_COUNT, "Lt", ["9"], 4, id="lt"),
    pytest.param(GPU_COUNT, "Lt", ["8"], 0, id="lt-equal"),
    pytest.param(GPU_COUNT, "Gt", ["many"], 0, id="gt-not-a-number"),
    pytest.param(ZONE, "Gt", ["1"], 0, id="gt-label-not-a-number"),
])
def test_required_node_affinity_limits_the_nodes_counted(key, operator, values, nodes):
    term = {"key": key, "operator": operator}
    if values:
        term["values"] = values
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [term]}]}}}
    assert eligible(fit(request={GPU: 8}, needed=1, template={"affinity": affinity})) == nodes


TAINT = {"key": "gpu", "value": "reserved", "effect": "NoSchedule"}


@pytest.mark.parametrize("taint, tolerations, placeable", [
    pytest.param(TAINT, [], 1, id="no-toleration"),
    pytest.param(TAINT, [{"key": "gpu", "operator": "Equal", "value": "reserved", "effect": "NoSchedule"}], 2,
                 id="equal"),
    pytest.param(TAINT, [{"key": "gpu", "operator": "Exists"}], 2, id="exists-any-effect"),
    pytest.param(TAINT, [{"operator": "Exists"}], 2, id="exists-everything"),
    pytest.param(TAINT, [{"key": "gpu", "operator": "Equal", "value": "other"}], 1, id="wrong-value"),
    pytest.param(TAINT, [{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}], 1, id="wrong-effect"),
    pytest.param(TAINT, [{"key": "other", "operator": "Exists"}], 1, id="wrong-key"),
    pytest.param(TAINT | {"effect": "NoExecute"}, [], 1, id="no-execute"),
    pytest.param(TAINT | {"effect": "PreferNoSchedule"}, [], 2, id="prefer-no-schedule-ignored"),
])
def test_taints_and_tolerations(taint, tolerations, placeable):
    nodes = [node_room(make_node("tainted", taints=[taint])), node_room(make_node("plain"))]
    result = fit(nodes=nodes, request={GPU: 8}, needed=1, template={"tolerations": tolerations})
    assert result.placeable == placeable


def test_unschedulable_and_not_ready_nodes_are_not_counted():
    nodes = [node_room(make_node("ok", gpus=16)), node_room(make_node("cordoned", unschedulable=True)),
             node_room(make_node("down", ready=False))]
    result = fit(nodes=nodes, request={GPU: 8}, needed=2, used={"ok": {GPU: 8}, "cordoned": {GPU: 0}})
    assert (result.placeable, result.fits) == (1, False)
    assert result.message.endswith("(8 free GPUs on 1 eligible of 3 nodes)")


HALF_FULL = {n.name: {GPU: 4} for n in ROOMS}


@pytest.mark.parametrize("network, data, used, needed, why, says", [
    pytest.param({"maxPeerDistance": "rack"}, None, {"a1-0": {GPU: 8}}, 3, "NoDomainLargeEnough",
                 "the best rack, rack-a1, has 8 free GPUs and holds 2; all 3 would fit now with "
                 "maxPeerDistance: zone",
                 id="rack-too-small-zone-is-not"),
    pytest.param({"maxPeerDistance": "node"}, None, HALF_FULL, 2, "NoDomainLargeEnough",
                 "the best node, a1-0, has 4 free GPUs and holds 1; all 2 would fit now with "
                 "maxPeerDistance: rack",
                 id="node-too-small-rack-is-not"),
    pytest.param({"maxDataDistance": "rack"}, ("rack", "rack-a2"), {"a2-0": {GPU: 4}}, 2, "DataTooFar",
                 "all 2 would fit now without maxDataDistance: rack", id="data-too-far"),
])
def test_a_gang_that_waits_says_why_and_the_smallest_change_that_lets_it_run(network, data, used, needed,
                                                                            why, says):
    result = fit(request={GPU: 4}, needed=needed, used=used, network=network, data=data)
    assert not result.fits and result.why == why
    assert result.message.endswith(says), result.message


def test_a_gang_larger_than_the_free_room_waits_for_resources_and_no_limit_is_blamed():
    result = fit(request={GPU: 4}, needed=5, used={"a1-0": {GPU: 8}, "b1-0": {GPU: 8}},
                 network={"maxPeerDistance": "zone"})
    assert result.why == "InsufficientResources" and "would fit" not in result.message
    assert result.message.endswith("(16 free GPUs on 4 eligible of 4 nodes); the best zone, zone-a, has 16 "
                                   "free GPUs and holds 4")


def test_a_node_without_gpus_is_not_counted_as_eligible():
    system = node_room(make_node("system", gpus=0))
    result = fit(nodes=[*ROOMS, system], request={GPU: 8}, needed=4, used={"a1-0": {GPU: 8}})
    assert result.message.endswith("(24 free GPUs on 4 eligible of 5 nodes)")
