import pytest

from netsched.extender.engine import Extender
from netsched.extender.plugin import Request
from netsched.extender.plugins.gang_hold import GangHold
from netsched.extender.reservations import Placement
from netsched.testing.extender import CLUSTER, NAMES, args, assume, cache_of, plugin_request, pod

FULL = [pod("x", "a1-0", gpus=7), pod("y", "a2-0", gpus=7), pod("z", "b1-0", gpus=7)]  # 1 GPU free on each


def held_request(gpus: int, job: str | None, preempting: bool) -> tuple[Request, list]:
    """ml/train's first pod assumed on a1-1: the rest of a1-1 is held for its other replicas."""
    cache = cache_of(CLUSTER, FULL)
    assume(cache, "uid-r0", Placement("ml/train", "a1-1", 2))
    snap = cache.snapshot("ml", job)
    ref = args(pod("p", job=job, gpus=gpus), NAMES).pod
    return Request(ref, snap, preempting), snap.table.positions(NAMES)[0]


@pytest.mark.parametrize("gpus, job, preempting, rejected", [
    pytest.param(1, None, False, {"a1-1"}, id="a-single-pod-keeps-off-held-room"),
    pytest.param(4, None, False, set(), id="with-nowhere-else-to-go-it-takes-held-room"),
    pytest.param(1, "train", False, set(), id="the-jobs-own-replicas-use-it"),
    pytest.param(1, None, True, set(), id="preemption-ignores-holds"),
])
def test_gang_hold(gpus, job, preempting, rejected):
    req, idx = held_request(gpus, job, preempting)
    assert {NAMES[pos] for pos in GangHold().reject(req, idx)} == rejected


def test_without_holds_nothing_is_rejected():
    req, idx, _ = plugin_request(gpus=1, job=None, pods=FULL)
    assert GangHold().reject(req, idx) == {}


def test_a_pod_a_packing_plan_places_ignores_holds():
    """ml/p is planned onto a1-1, whose room is held for ml/train's other replicas: the filters in
    their order (plan_pins first) leave it its planned node."""
    cache = cache_of(CLUSTER, FULL, plans=[{
        "metadata": {"name": "pack-1"}, "status": {"phase": "Placing", "arrived": []},
        "spec": {"reason": "test", "evictions": [], "moves": [],
                 "placements": [{"pod": "ml/p", "uid": "u", "node": "a1-1", "gpus": 1}]}}])
    assume(cache, "uid-r0", Placement("ml/train", "a1-1", 2))
    assert Extender(cache, shortlist=1).filter(args(pod("p", gpus=1), NAMES)).passed == ["a1-1"]
