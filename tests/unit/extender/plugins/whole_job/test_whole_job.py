import pytest

from netsched.extender.engine import Extender
from netsched.extender.plugin import Request
from netsched.extender.plugins.whole_job import WholeJob
from netsched.extender.reservations import Placement
from netsched.testing.extender import CLUSTER, NAMES, args, assume, cache_of, plugin_request, pod

PART = [pod("x", "a1-0", gpus=4), pod("y", "a1-1", gpus=6)]  # 4 and 2 free; a2-0 and b1-0 8 each


@pytest.mark.parametrize("annotations, job, gpus, pods, preempting, rejected", [
    pytest.param({"netsched.io/replicas": "2"}, "train", 4, PART, False, {"a1-0", "a1-1"},
                 id="the-first-pod-keeps-to-nodes-with-room-for-the-whole-job"),
    pytest.param({"netsched.io/job-gpus": "6"}, "train", 2, PART, False, {"a1-0", "a1-1"},
                 id="job-gpus-sizes-it"),
    pytest.param({"netsched.io/replicas": "2"}, "train", 8, PART, False, set(),
                 id="no-node-holds-the-whole-job-nothing-rejected"),
    pytest.param({"netsched.io/replicas": "2"}, "train", 1, PART, False, set(),
                 id="every-node-holds-it-nothing-rejected"),
    pytest.param({}, "train", 4, PART, False, set(), id="unknown-size-left-alone"),
    pytest.param({"netsched.io/replicas": "1"}, "train", 4, PART, False, set(), id="a-one-pod-job"),
    pytest.param({"netsched.io/replicas": "2"}, None, 4, PART, False, set(), id="a-pod-of-no-job"),
    pytest.param({"netsched.io/replicas": "2"}, "train", 4,
                 [*PART, pod("r0", "b1-0", gpus=4, job="train")], False, set(),
                 id="a-later-pod-is-left-alone"),
    pytest.param({"netsched.io/replicas": "2"}, "train", 4, PART, True, set(), id="preemption-left-alone"),
])
def test_whole_job(annotations, job, gpus, pods, preempting, rejected):
    req, idx, names = plugin_request(annotations, pods, job=job, gpus=gpus, preempting=preempting)
    assert {names[pos] for pos in WholeJob().reject(req, idx)} == rejected


def test_the_reason_names_the_node_its_room_and_the_job():
    req, idx, names = plugin_request({"netsched.io/replicas": "2"}, PART, job="train", gpus=4)
    reasons = {names[pos]: why for pos, why in WholeJob().reject(req, idx).items()}
    assert reasons["a1-0"] == ("netsched: a1-0 has room for 4 of the 8 GPUs of job ml/train; its first pod "
                               "goes to a node with room for all of them while there is one")


def test_room_held_for_another_job_is_not_room_and_a_peer_assumed_on_this_replica_counts():
    cache = cache_of(CLUSTER, PART)
    assume(cache, "uid-o0", Placement("ml/other", "a2-0", 2))  # the rest of a2-0 is held for ml/other
    ref = args(pod("p", job="train", gpus=4, annotations={"netsched.io/replicas": "2"}), NAMES).pod
    snap = cache.snapshot("ml", "train")
    idx = snap.table.positions(NAMES)[0]
    assert {NAMES[pos] for pos in WholeJob().reject(Request(ref, snap), idx)} == {"a1-0", "a1-1", "a2-0"}
    assume(cache, "uid-t0", Placement("ml/train", "b1-0", 4))  # its own first pod, assumed here
    snap = cache.snapshot("ml", "train")
    assert WholeJob().reject(Request(ref, snap), idx) == {}


@pytest.mark.parametrize("gpus, pods, said", [
    pytest.param(4, PART, "room for all 8 GPUs of the job on 2 of 4 candidates", id="some-have-room"),
    pytest.param(8, PART, "no candidate had room for all 16 GPUs of the job, so its pods may be split",
                 id="none-has-room"),
    pytest.param(4, [*PART, pod("r0", "b1-0", gpus=4, job="train")], None, id="a-later-pod-says-nothing"),
])
def test_a_first_pods_placement_says_how_many_candidates_had_room_for_its_whole_job(gpus, pods, said):
    """As `kubectl describe pod` shows it: the NetworkPlacement summary of the pod's filter."""
    ext = Extender(cache_of(CLUSTER, pods), shortlist=1)
    first = pod("p", job="train", gpus=gpus, annotations={"netsched.io/replicas": "2"})
    out = ext.filter(args(first, NAMES))
    decision = ext.decisions.find("ml", "p")
    decision.node = out.passed[0]
    parts = decision.summary().split("; ")
    assert (said in parts) if said else not any("room for all" in p for p in parts), parts


def test_a_pod_a_packing_plan_places_goes_where_the_plan_puts_it():
    """The plan put ml/p on a1-0, where only part of its job fits: no other room overrides it."""
    planned = {"metadata": {"name": "pack-1"},
               "spec": {"reason": "test", "evictions": [], "moves": [],
                        "placements": [{"pod": "ml/p", "uid": "u", "node": "a1-0", "gpus": 4}]},
               "status": {"phase": "Placing", "arrived": []}}
    ext = Extender(cache_of(CLUSTER, PART, plans=[planned]), shortlist=1)
    p = pod("p", job="train", gpus=4, annotations={"netsched.io/replicas": "2"})
    assert ext.filter(args(p, NAMES)).passed == ["a1-0"]


def test_a_node_a_limit_rejected_is_not_somewhere_else_to_go():
    """ml/p's job (8 GPUs) must stay within rack-a1, where no node has room for all of it: it still
    gets a node there, not a rejection everywhere because nodes outside the rack have room."""
    limit = {"netsched.io/replicas": "2", "netsched.io/data-source": "rack:rack-a1",
             "netsched.io/max-data-distance": "rack"}
    ext = Extender(cache_of(CLUSTER, PART), shortlist=1)
    out = ext.filter(args(pod("p", job="train", gpus=4, annotations=limit), NAMES))
    assert out.passed == ["a1-0"] and set(out.unresolvable) == {"a2-0", "b1-0"}, out
    decision = ext.decisions.find("ml", "p")
    decision.node = "a1-0"  # its placement counts the nodes the limit left, none of which holds the job
    assert "no candidate had room for all 8 GPUs of the job, so its pods may be split" in decision.summary()
