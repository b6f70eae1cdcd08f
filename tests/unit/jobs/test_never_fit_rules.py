"""Could a gang ever fit the cluster as it is? Checked against allocatable room (every node empty),
node by node, in all and within one domain; and a job that never fits gets no predicted times."""

from __future__ import annotations

import pytest

from netsched.api.gpujob import Phase
from netsched.jobs.capacity import gang_fit, never_fits, node_room
from netsched.jobs.forecast import cluster_forecast
from netsched.testing.builders import NOW, ago, job, make_gpujob, make_node

GPU = "nvidia.com/gpu"
SHRINK = "lower spec.replicas or spec.gang.minAvailable, or add nodes"
# rack-a1 (a1-0, a1-1) and rack-a2 (a2-0, a2-1) in zone-a; rack-b1 (b1-0, b1-1) in zone-b: 48 GPUs
NODES = [node_room(make_node(name, zone, rack)) for name, zone, rack in (
    ("a1-0", "zone-a", "rack-a1"), ("a1-1", "zone-a", "rack-a1"), ("a2-0", "zone-a", "rack-a2"),
    ("a2-1", "zone-a", "rack-a2"), ("b1-0", "zone-b", "rack-b1"), ("b1-1", "zone-b", "rack-b1"))]


def template(requests: dict | None = None, **spec) -> dict:
    return {"spec": {"containers": [{"name": "main", "resources": {"requests": requests or {}}}], **spec}}


@pytest.mark.parametrize("shape, says", [
    pytest.param(dict(replicas=7, gpus=8), f"needs 56 GPUs, the cluster has 48; {SHRINK}",
                 id="cluster-too-small"),
    pytest.param(dict(replicas=7, gpus=6),
                 f"needs 7 replica(s) of 6 GPUs, the cluster has room for 6 even empty; {SHRINK}",
                 id="enough-gpus-in-all-but-one-replica-per-node"),
    pytest.param(dict(replicas=2, gpus=16), "no node has 16 GPUs, the largest has 8; lower "
                 "spec.gpusPerReplica, or add a node with more", id="no-node-big-enough"),
    pytest.param(dict(replicas=3, gpus=8, network={"maxPeerDistance": "rack"}),
                 "needs 3 replica(s) of 8 GPUs within one rack, the largest rack holds 2 (rack-a1: 2 nodes, "
                 "16 GPUs); it could run with maxPeerDistance: zone, or with spec.gang.minAvailable at most "
                 "2",
                 id="no-rack-big-enough"),
    pytest.param(dict(replicas=5, gpus=8, network={"maxPeerDistance": "zone"}),
                 "needs 5 replica(s) of 8 GPUs within one zone, the largest zone holds 4 (zone-a: 4 nodes, "
                 "32 GPUs); it could run with no maxPeerDistance, or with spec.gang.minAvailable at most 4",
                 id="no-zone-big-enough"),
    pytest.param(dict(replicas=3, gpus=4, network={"maxPeerDistance": "node"}),
                 "needs 3 replica(s) of 4 GPUs on one node, the largest node holds 2 (a1-0: 8 GPUs); it "
                 "could run with maxPeerDistance: rack, or with spec.gang.minAvailable at most 2",
                 id="no-node-holds-the-gang"),
    pytest.param(dict(replicas=2, gpus=1, template=template({"cpu": "200"})),
                 "no node has 200 CPUs, the largest has 96; lower the template's cpu requests, or add a node "
                 "with more", id="cpu-of-a-member"),
    pytest.param(dict(replicas=8, gpus=1, template=template({"memory": "800Gi"})),
                 f"needs 6400Gi memory, the cluster has 6144Gi; {SHRINK}", id="memory-of-the-gang"),
    pytest.param(dict(replicas=2, gpus=8, template=template(nodeSelector={"netsched.io/rack": "rack-zz"})),
                 "none of the 6 Ready, schedulable nodes matches its nodeSelector, node affinity, "
                 "tolerations or maxDataDistance; change those, or add a node that matches",
                 id="no-node-it-may-use"),
    pytest.param(dict(replicas=3, gpus=8, template=template(nodeSelector={"netsched.io/rack": "rack-a1"})),
                 f"needs 24 GPUs, the 2 nodes it may use have 16; {SHRINK}, or widen its nodeSelector, "
                 "node affinity, tolerations or maxDataDistance",
                 id="too-small-where-it-may-run"),
    pytest.param(dict(replicas=6, gpus=8), None, id="the-whole-cluster-fits"),
    pytest.param(dict(replicas=2, gpus=8, network={"maxPeerDistance": "rack"}), None, id="one-rack-fits"),
    pytest.param(dict(replicas=1, gpus=1, template=template({"cpu": "96", "memory": "1024Gi"})), None,
                 id="a-whole-node-fits"),
])
def test_never_fits_says_what_is_missing_with_the_numbers(shape, says):
    assert never_fits(NODES, job(**shape)) == says


def test_a_job_that_only_waits_is_not_said_never_to_fit():
    full = {n.name: {GPU: 8} for n in NODES}
    result = gang_fit(NODES, full, [], job(replicas=6, gpus=8))
    assert (result.fits, result.why) == (False, "InsufficientResources")
    assert never_fits(NODES, job(replicas=6, gpus=8)) is None


def test_a_gang_that_never_fits_has_its_own_reason_and_words():
    result = gang_fit(NODES, {}, [], job(replicas=7, gpus=8))
    assert (result.fits, result.why) == (False, "NeverFits")
    assert result.message.startswith("never fits: needs 56 GPUs, the cluster has 48; ")
    assert "fit now" not in result.message


@pytest.mark.parametrize("change", [
    pytest.param(dict(unschedulable=True), id="cordoned"),
    pytest.param(dict(ready=False), id="not-ready"),
    pytest.param(dict(taints=[{"key": "gpu", "value": "reserved", "effect": "NoSchedule"}]), id="tainted"),
])
def test_only_nodes_it_may_use_now_count(change):
    nodes = [*NODES[:5], node_room(make_node("b1-1", "zone-b", "rack-b1", **change))]
    assert never_fits(nodes, job(replicas=6, gpus=8)) is not None
    assert never_fits(NODES, job(replicas=6, gpus=8)) is None


def test_a_cluster_with_no_ready_node_is_an_outage_not_a_job_too_large():
    down = [node_room(make_node(n.name, ready=False)) for n in NODES]
    assert never_fits(down, job(replicas=2, gpus=8)) is None
    assert never_fits([], job(replicas=2, gpus=8)) is None


def test_a_blocked_job_gets_no_forecast():
    """Blocked jobs are left out of the queue (the forecaster clears their stale times:
    tests/unit/operator/test_forecaster.py)."""
    body = make_gpujob("huge", replicas=7, gpus=8, created=ago(60))
    body["status"] = {"phase": Phase.BLOCKED, "predictedStartTime": ago(-600)}
    history = [{"outcome": "Succeeded", "duration_seconds": 600, "workload_kind": "training"}] * 3
    assert "ml/huge" not in cluster_forecast(NOW, NODES, [], [body], history)
    body["status"]["phase"] = Phase.PENDING
    assert "ml/huge" in cluster_forecast(NOW, NODES, [], [body], history)


def test_gpus_claim_only_pods_hold_on_a_dra_node_are_not_free_now_but_count_for_never_fits():
    from netsched.api.dra import CLAIMS, SLICES, DraGpus
    from netsched.jobs.capacity import with_dra_gpus
    from netsched.testing.builders import make_dra_node, make_resource_claim, make_resource_slice

    dra = DraGpus(["gpu.example.com"])
    dra.replace(SLICES, [make_resource_slice("d1")])
    dra.replace(CLAIMS, [make_resource_claim("c", "d1", range(2))])
    room = with_dra_gpus(node_room(make_dra_node("d1")), dra)
    assert (room.allocatable[GPU], room.held) == (6.0, {GPU: 2.0})
    eight = job(replicas=1, gpus=8)
    assert never_fits([room], eight) is None  # once the claim-only pods end, 8 fit
    assert not gang_fit([room], {}, [], eight).fits
    assert gang_fit([room], {}, [], job(replicas=1, gpus=6)).fits


def test_a_gang_whose_members_request_nothing_fits_as_many_as_the_nodes_take_pods():
    # claim-only pods with no CPU or memory request: their GPUs are kube-scheduler's to find
    bare = job(replicas=4, gpus=0, template={"spec": {"containers": [{"name": "main"}]}})
    assert not any(bare.member_request.values())
    fit = gang_fit(NODES, {}, [], bare)
    assert fit.fits and fit.placeable >= 4
    assert never_fits(NODES, bare) is None
