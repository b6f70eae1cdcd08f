"""The gang placed as one decision (netsched.extender.gang): every member's node chosen together from the
filters and scorer the filter verb serves, on one snapshot."""

import numpy as np
import orjson
import pytest

from netsched.extender.engine import Extender
from netsched.extender.gang import GangRequest, decide_gang, parse_gang
from netsched.extender.protocol import BadRequest, parse_pod
from netsched.extender.scorers import Scored
from netsched.extender.server import make_app
from netsched.testing.extender import args, cache_of, call, node, pod

# two racks: a1 has two 8-GPU nodes with 4 free each, a2 one empty 8-GPU node
NODES = [node("a1-0", rack="rack-a1"), node("a1-1", rack="rack-a1"), node("a2-0", rack="rack-a2"),
         node("b1-0", zone="zone-b", rack="rack-b1")]
BUSY = [pod("x0", "a1-0", gpus=4, job="other"), pod("x1", "a1-1", gpus=4, job="other"),
        pod("y0", "b1-0", gpus=6, job="third")]


def gang(members: int = 4, gpus: int = 2, annotations: dict | None = None, room: dict | None = None,
         job: str | None = None) -> GangRequest:
    pods = tuple(parse_pod(pod(f"g-{i}", gpus=gpus, job=job, annotations=annotations))
                 for i in range(members))
    if room is None:  # what the operator's capacity says each node holds now
        room = {"a1-0": 4 // gpus, "a1-1": 4 // gpus, "a2-0": 8 // gpus, "b1-0": 2 // gpus}
    return GangRequest("ml", "g", pods, room)


CASES = [
    # (id, request, where every member must go)
    ("one node that holds the whole gang, not the rack with most room", gang(), {"a2-0"}),
    ("a rack limit: the rack where it fits on one node",
     gang(annotations={"netsched.io/max-peer-distance": "rack"}), {"a2-0"}),
    ("a GPUJob's job label: the same answer", gang(job="train"), {"a2-0"}),
    ("too big for one node: the fewest nodes", gang(members=6), None),
]


@pytest.mark.parametrize("request_, where", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_gang_goes_where_it_takes_the_fewest_nodes(request_, where):
    ext = Extender(cache_of(NODES, BUSY))
    placed = decide_gang(ext, request_)
    assert placed.placed and set(placed.nodes) == {p.name for p in request_.members}
    if where is not None:
        assert set(placed.nodes.values()) == where
    else:  # 12 GPUs: a2-0's 8 and 4 more on one node
        counts = sorted(list(placed.nodes.values()).count(n) for n in set(placed.nodes.values()))
        assert counts == [2, 4]


def test_members_are_assumed_on_their_nodes_so_the_next_pod_sees_the_room_taken():
    ext = Extender(cache_of(NODES, BUSY))
    decide_gang(ext, gang())
    assert ext.cluster.snapshot().free[ext.cluster.snapshot().table.index["a2-0"]] == 0


def test_a_dry_run_keeps_nothing():
    ext = Extender(cache_of(NODES, BUSY))
    req = gang()
    decide_gang(ext, GangRequest(req.namespace, req.name, req.members, req.room, dry_run=True))
    snap = ext.cluster.snapshot()
    assert snap.free[snap.table.index["a2-0"]] == 8


def test_a_gang_that_does_not_fit_within_its_limit_is_placed_nowhere():
    ext = Extender(cache_of(NODES, BUSY))
    # 4 x 4 GPUs within one rack: rack-a1 has 8 free, rack-a2 8, rack-b1 2
    placed = decide_gang(ext, gang(gpus=4, annotations={"netsched.io/max-peer-distance": "rack"},
                                   room={"a1-0": 1, "a1-1": 1, "a2-0": 2, "b1-0": 0}))
    assert not placed.placed and placed.nodes == {} and len(placed.unplaced) == 4


def test_no_room_anywhere_says_so():
    placed = decide_gang(Extender(cache_of(NODES, BUSY)), gang(room={}))
    assert not placed.placed and placed.message == "no node has room for a member now"


def test_the_http_answer_names_every_members_node():
    ext = Extender(cache_of(NODES, BUSY))
    body = {"namespace": "ml", "name": "g", "room": {"a2-0": 4},
            "pods": [pod(f"g-{i}", gpus=2) for i in range(4)]}
    status, doc = call(make_app(ext), "POST", "/gang", orjson.dumps(body))
    assert status == 200 and set(doc["nodes"].values()) == {"a2-0"} and doc["unplaced"] == []


@pytest.mark.parametrize("body, word", [
    ({"name": "g", "room": {}}, "pods"),
    ({"name": "g", "pods": [pod("a")], "room": {"n": "x"}}, "room"),
    ({"pods": [pod("a")], "room": {}}, "name"),
    ([], "JSON object"),
])
def test_a_malformed_gang_request_is_named(body, word):
    with pytest.raises(BadRequest, match=word):
        parse_gang(body)


PIN = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a2-0"]}]}]}}}


def test_a_pinned_pod_offered_its_node_is_passed_unscored_and_says_its_gang_chose_it():
    ext = Extender(cache_of(NODES, BUSY))
    member = pod("g-0", gpus=2)
    member["spec"]["affinity"] = PIN
    out = ext.filter(args(member, ["a2-0"]))
    assert out.passed == ["a2-0"]
    [decision] = ext.decisions.recent()
    assert decision.scorer == "pinned" and not decision.top[0].factors
    decision.node = "a2-0"
    assert "with its gang: its node was decided when the gang was released" in decision.summary()


@pytest.mark.parametrize("affinity, pinned", [
    (PIN, "a2-0"),
    ({}, None),
    ({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}]}}}, None),
    ({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z"]}]}]}}}, None),
], ids=["one node", "no affinity", "two nodes", "a term without the pin"])
def test_a_pod_is_pinned_only_when_every_term_names_the_same_one_node(affinity, pinned):
    member = pod("g-0")
    member["spec"]["affinity"] = affinity
    assert parse_pod(member).pinned == pinned


def test_the_node_that_holds_the_whole_gang_is_chosen_beside_fuller_rack_mates():
    nodes = [node("a1-0", rack="rack-a1"), node("a1-1", rack="rack-a1"), node("a2-0", rack="rack-a2"),
             node("a2-1", rack="rack-a2")]
    busy = [pod("x0", "a1-0", gpus=6, job="other"), pod("x1", "a2-0", gpus=6, job="other"),
            pod("x2", "a2-1", gpus=6, job="other")]
    placed = decide_gang(Extender(cache_of(nodes, busy)),
                         gang(room={"a1-0": 1, "a1-1": 4, "a2-0": 1, "a2-1": 1}))
    assert set(placed.nodes.values()) == {"a1-1"}, placed


class Spreading:
    """A scorer that ranks nodes without the gang's peers higher: greedy by score alone spreads a gang."""

    name = "spreading"

    def score(self, req, idx):
        peers = {req.snapshot.table.index[p] for p in req.snapshot.peers}
        value = np.array([0.5 if int(i) in peers else 0.9 for i in idx])
        return Scored(value, value)


def test_a_scorer_that_would_spread_the_gang_still_leaves_it_on_the_fewest_nodes():
    ext = Extender(cache_of(NODES, BUSY), scorer=Spreading())
    placed = decide_gang(ext, gang())
    assert set(placed.nodes.values()) == {"a2-0"}, placed  # the one node that holds all 4


class RelativeModel:
    """A model scorer's shape: each call scores its candidates against the fastest among them, and says
    its predicted seconds (here: 1,000 on rack a1's nodes, 3,000 on the others), with a tenth of the
    value from a heuristic that prefers the others (as data closeness may)."""
    name = "model"

    def score(self, req, idx):
        names = req.snapshot.table.names
        fast = np.array([names[int(i)].startswith("a1") for i in idx])
        seconds = np.where(fast, 1000.0, 3000.0)
        value = 0.9 * np.clip(1 - (seconds / seconds.min() - 1) / 0.5, 0, 1) + 0.1 * ~fast
        return Scored(value, value, {"predicted_seconds": seconds}, scorer=self.name)


def test_walks_are_compared_by_predicted_time_not_by_scores_relative_to_each_walks_own_candidates():
    """Two members of 8 GPUs take two nodes wherever they go; the walk on the slow nodes scores 1 per
    member among slow nodes alone, as the fast walk does among fast ones, but is predicted 3 times
    slower."""
    nodes = [node("a1-0", rack="rack-a1"), node("a1-1", rack="rack-a1"),
             node("b1-0", zone="zone-b", rack="rack-b1"), node("b1-1", zone="zone-b", rack="rack-b1")]
    ext = Extender(cache_of(nodes), scorer=RelativeModel())
    pods = tuple(parse_pod(pod(f"g-{i}", gpus=8, annotations={"netsched.io/max-peer-distance": "rack"}))
                 for i in range(2))
    placed = decide_gang(ext, GangRequest("ml", "g", pods, dict.fromkeys(("a1-0", "a1-1", "b1-0", "b1-1"), 1),
                                          dry_run=True))
    assert set(placed.nodes.values()) == {"a1-0", "a1-1"}, placed


def test_a_gang_asked_again_does_not_count_its_own_earlier_assumptions_against_itself():
    """A release cut short (the operator killed after asking, before patching) leaves the members assumed
    where the first answer put them; the new leader asks again and gets the same one node, not a split."""
    ext = Extender(cache_of(NODES, BUSY))
    asked = gang()
    first = decide_gang(ext, asked)
    again = decide_gang(ext, asked)  # the same pods
    assert set(first.nodes.values()) == set(again.nodes.values()) == {"a2-0"}, (first, again)
