"""PackingPlan pins and reservations in the filter."""

from netsched.extender.engine import Extender
from netsched.testing.extender import CLUSTER, NAMES, args, cache_of, pod


def plan(phase: str = "Placing", placements=(), moves=(), arrived=()) -> dict:
    return {"metadata": {"name": "pack-1"},
            "spec": {"reason": "test", "evictions": [], "placements": list(placements), "moves": list(moves)},
            "status": {"phase": phase, "arrived": list(arrived)}}


PLACE_URGENT = {"pod": "ml/urgent-0", "uid": "u", "node": "b1-0", "gpus": 8}


def with_owner(p: dict, uid: str) -> dict:
    p["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "rs", "uid": uid, "controller": True}]
    return p


def test_a_planned_pod_passes_only_on_its_planned_node_even_when_another_is_better():
    peer = pod("peer", "a1-0", job="urgent")
    ext = Extender(cache_of(CLUSTER, [peer], plans=[plan(placements=[PLACE_URGENT])]), shortlist=0)
    out = ext.filter(args(pod("urgent-0", job="urgent", gpus=8), NAMES + ["unknown-node"]))
    assert out.passed == ["b1-0"]
    assert set(out.unresolvable) == {"a1-0", "a1-1", "a2-0"}
    assert "PackingPlan pack-1 places pod ml/urgent-0 on b1-0" in out.unresolvable["a1-0"]
    assert "unknown-node" in out.failed  # a pinned pod never lands on a node the cache cannot check


def test_other_pods_cannot_take_the_room_reserved_for_the_plan():
    ext = Extender(cache_of(CLUSTER, plans=[plan(placements=[PLACE_URGENT])]), shortlist=0)
    out = ext.filter(args(pod("other", gpus=1), NAMES))
    assert "b1-0" not in out.passed and sorted(out.passed) == ["a1-0", "a1-1", "a2-0"]
    assert "8 of its 8 free GPUs are reserved by PackingPlan pack-1" in out.unresolvable["b1-0"]


def test_a_pod_that_fits_beside_the_reservation_may_use_the_node():
    small = {**PLACE_URGENT, "gpus": 4}
    ext = Extender(cache_of(CLUSTER, plans=[plan(placements=[small])]), shortlist=0)
    assert "b1-0" in ext.filter(args(pod("other", gpus=4), NAMES)).passed
    assert "b1-0" not in ext.filter(args(pod("other", gpus=5), NAMES)).passed


def test_pins_and_reservations_end_when_the_plan_ends_or_its_pods_arrived():
    for done in (plan("Succeeded", placements=[PLACE_URGENT]), plan("TimedOut", placements=[PLACE_URGENT]),
                 plan(placements=[PLACE_URGENT], arrived=["ml/urgent-0"])):
        ext = Extender(cache_of(CLUSTER, plans=[done]), shortlist=0)
        assert sorted(ext.filter(args(pod("other", gpus=8), NAMES)).passed) == sorted(NAMES)


def test_plan_changes_reach_the_filter_through_the_watch():
    cache = cache_of(CLUSTER)
    ext = Extender(cache, shortlist=0)
    active = plan(placements=[PLACE_URGENT])
    cache.apply("packingplans", "ADDED", active)
    assert "b1-0" not in ext.filter(args(pod("other", gpus=8), NAMES)).passed
    cache.apply("packingplans", "MODIFIED", plan("Succeeded", placements=[PLACE_URGENT]))
    assert "b1-0" in ext.filter(args(pod("other", gpus=8), NAMES)).passed


def test_the_replacement_of_a_moved_pod_is_pinned_by_its_controller():
    move = {"pod": "ml/web-abc", "uid": "old", "node": "a1-0", "owner": "rs-uid", "to": "a2-0", "gpus": 2}
    ext = Extender(cache_of(CLUSTER, plans=[plan("Evicting", moves=[move])]), shortlist=0)
    assert ext.filter(args(with_owner(pod("web-xyz", gpus=2), "rs-uid"), NAMES)).passed == ["a2-0"]
    stranger = ext.filter(args(with_owner(pod("db-0", gpus=8), "other-uid"), NAMES))
    assert "a2-0" not in stranger.passed and "a1-0" in stranger.passed


def test_a_planned_pod_may_preempt_only_on_its_planned_node():
    ext = Extender(cache_of(CLUSTER, [pod("low", "a1-0", gpus=8)], plans=[plan(placements=[PLACE_URGENT])]))
    victims = {n: {"Pods": [{"UID": "v"}], "NumPDBViolations": 0} for n in [*NAMES, "unknown-node"]}
    assert set(ext.preempt(args(pod("urgent-0", job="urgent", gpus=8), NAMES).pod, victims)) == {"b1-0"}
    assert set(ext.preempt(args(pod("other", gpus=8), NAMES).pod, victims)) == {*NAMES, "unknown-node"}
