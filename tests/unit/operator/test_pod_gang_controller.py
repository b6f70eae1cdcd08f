"""What the pod-gang controller does with a gang: all members or none, the domain pinned, bad
annotations named; and how the ClusterIndex keeps a gang's live members."""

import pytest

from netsched.jobs.capacity import node_room
from netsched.jobs.pod_gangs import gang_of
from netsched.jobs.replica_pods import GANG_GATE
from netsched.operator.cluster_index import ClusterIndex, GangMember
from netsched.operator.pod_gangs.decision import decide
from netsched.testing.builders import make_node, make_pod

NODES = [node_room(make_node(f"n{i}", rack=f"rack-{i // 2}", gpus=8)) for i in range(4)]
OWNER = [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "j1", "controller": True}]


def member(i, gated=True, annotations=None, gpus=4):
    pod = make_pod(f"train-{i}", gpus=gpus, labels={"batch.kubernetes.io/job-name": "train"},
                   annotations=annotations, schedulingGates=[{"name": GANG_GATE}] if gated else None)
    pod["metadata"]["ownerReferences"] = OWNER
    return pod


def gang(pods):
    return [GangMember(p["metadata"]["name"], p if p["spec"]["schedulingGates"] else None) for p in pods]


REF = gang_of(member(0))


def test_all_members_released_together_pinned_to_the_roomiest_rack():
    pods = [member(i, annotations={"netsched.io/max-peer-distance": "rack"}) for i in range(4)]
    d = decide(REF, 4, gang(pods), NODES, {"n0": {"nvidia.com/gpu": 4}}, [])
    assert d.reason == "GangReleased" and set(d.release) == {f"train-{i}" for i in range(4)}
    assert d.release["train-0"] == [{"op": "add", "path": "/spec/nodeSelector",
                                     "value": {"netsched.io/rack": "rack-1"}},
                                    {"op": "add", "path": "/metadata/annotations/netsched.io~1job-gpus",
                                     "value": "16"},
                                    {"op": "remove", "path": "/spec/schedulingGates"}]


def test_a_gang_placed_together_is_pinned_node_by_node_instead_of_to_a_domain():
    pods = [member(i, annotations={"netsched.io/max-peer-distance": "rack"}) for i in range(4)]
    asked = []

    def place(members, room, peers):
        asked.append(([m["metadata"]["name"] for m in members], room, peers))
        return {m["metadata"]["name"]: "n2" if i < 2 else "n3" for i, m in enumerate(members)}
    d = decide(REF, 4, gang(pods), NODES, {"n0": {"nvidia.com/gpu": 4}}, [], place=place)
    assert asked == [([f"train-{i}" for i in range(4)], {"n0": 1, "n1": 2, "n2": 2, "n3": 2}, [])]
    [affinity, sized, noted, ungate] = d.release["train-3"]
    assert affinity["value"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                "values": ["n3"]}]}]}
    assert noted == {"op": "add", "path": "/metadata/annotations/netsched.io~1pinned-node", "value": "n3"}
    assert "on n2 x2, n3 x2, chosen together" in d.message


def test_members_released_after_their_peers_are_placed_beside_them():
    pods = [member(0, gated=False), member(1)]
    members = [GangMember("train-0", None, node="n1"), GangMember("train-1", pods[1])]
    asked = []
    d = decide(REF, 2, members, NODES, {"n1": {"nvidia.com/gpu": 4}}, [],
               place=lambda m, room, peers: asked.append(peers) or {"train-1": "n1"})
    assert asked == [["n1"]] and d.reason == "GangReleased" and set(d.release) == {"train-1"}


def test_with_no_answer_the_gang_keeps_to_its_domain():
    pods = [member(i, annotations={"netsched.io/max-peer-distance": "rack"}) for i in range(4)]
    d = decide(REF, 4, gang(pods), NODES, {}, [], place=lambda m, room, peers: None)
    assert d.release["train-0"][0] == {"op": "add", "path": "/spec/nodeSelector",
                                       "value": {"netsched.io/rack": "rack-0"}}


@pytest.mark.parametrize("annotations, said", [
    pytest.param(None, [{"op": "add", "path": "/metadata/annotations",
                         "value": {"netsched.io/job-gpus": "8"}}], id="no-annotations-the-map-is-added"),
    pytest.param({"netsched.io/replicas": "2"}, [], id="its-own-size-kept"),
    pytest.param({"netsched.io/job-gpus": "8"}, [], id="its-own-gpus-kept"),
])
def test_the_release_tells_the_extender_the_gangs_gpus_unless_the_pods_say_it(annotations, said):
    d = decide(REF, 2, gang([member(i, annotations=annotations) for i in range(2)]), NODES, {}, [])
    assert d.release["train-1"] == [*said, {"op": "remove", "path": "/spec/schedulingGates"}]


def test_a_gangs_data_limit_is_written_as_node_affinity_in_the_patch_that_releases_it():
    limit = {"netsched.io/data-source": "rack:rack-1", "netsched.io/max-data-distance": "rack"}
    d = decide(REF, 2, gang([member(i, annotations=limit) for i in range(2)]), NODES, {}, [])
    [affinity, sized, ungate] = d.release["train-0"]
    assert (affinity["path"], sized["path"], ungate["path"]) == (
        "/spec/affinity", "/metadata/annotations/netsched.io~1job-gpus", "/spec/schedulingGates")
    assert affinity["value"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]},
            {"key": "netsched.io/rack", "operator": "In", "values": ["rack-1"]}]}]}


@pytest.mark.parametrize("pods, size, used, reason", [
    pytest.param([member(i) for i in range(3)], 4, {}, "WaitingForPods", id="a-member-missing"),
    pytest.param([member(i, gpus=8) for i in range(4)], 4, {"n0": {"nvidia.com/gpu": 1}},
                 "InsufficientResources", id="three-of-four-fit"),
    pytest.param([member(i) for i in range(2)], None, {}, "WaitingForPods", id="size-unknown"),
])
def test_nothing_released_unless_all_fit(pods, size, used, reason):
    d = decide(REF, size, gang(pods), NODES, used, [])
    assert d.reason == reason and d.release == {}


def test_a_bad_annotation_is_a_warning_and_nothing_is_released():
    pods = [member(i, annotations={"netsched.io/max-peer-distance": "galaxy"}) for i in range(2)]
    d = decide(REF, 2, gang(pods), NODES, {}, [])
    assert (d.type, d.reason, d.release) == ("Warning", "InvalidSpec", {})
    assert d.message.startswith("Job ml/train stays gated: spec.template.metadata.annotations[netsched.io/")
    assert d.said_as == ("InvalidSpec", d.message)


def test_a_replacement_of_a_running_gang_is_released_alone():
    pods = [member(0, gated=False), member(1, gated=False), member(2)]
    d = decide(REF, 3, gang(pods), NODES, {}, [])
    assert set(d.release) == {"train-2"}


def test_waits_are_said_once_per_reason_not_per_number():
    a = decide(REF, 4, gang([member(0)]), NODES, {}, [])
    b = decide(REF, 4, gang([member(0), member(1)]), NODES, {}, [])
    assert a.message != b.message and a.said_as == b.said_as


def test_the_index_keeps_live_members_and_forgets_a_gone_gang():
    index = ClusterIndex()
    index.replace("nodes", [])
    done = {**member(2), "status": {"phase": "Succeeded"}}
    index.replace("pods", [member(0), member(1, gated=False), done])
    [(key, members)] = index.pod_gangs().items()
    assert key == ("Job", "ml", "train")
    assert sorted((m.name, m.pod is not None) for m in members) == [("train-0", True), ("train-1", False)]
    for i in (0, 1):
        index.apply("pods", "DELETED", member(i))
    assert index.pod_gangs() == {}


def kueue_placed(i, gates=("kueue.x-k8s.io/topology", GANG_GATE), annotations=None):
    pod = member(i, annotations=annotations, gpus=8)
    pod["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    return pod


@pytest.mark.parametrize("pods", [
    pytest.param([kueue_placed(i) for i in range(2)], id="kueue-gate-still-on"),
    pytest.param([kueue_placed(i, gates=[GANG_GATE],
                               annotations={"kueue.x-k8s.io/podset-required-topology": "rack"})
                  for i in range(2)], id="kueue-ungated-already"),
])
def test_a_gang_kueue_topology_places_is_released_at_once_unpinned(pods):
    """One of three members, none fitting (8 GPUs each, the cluster full): released all the same,
    netsched's gate only, Kueue's kept, no nodeSelector added."""
    full = {f"n{i}": {"nvidia.com/gpu": 8} for i in range(4)}
    d = decide(REF, 3, gang(pods), NODES, full, [])
    assert (d.type, d.reason) == ("Normal", "PlacedByKueueTopology")
    assert "Job ml/train: Kueue's topology-aware scheduling places its pods" in d.message
    kept = [g for g in pods[0]["spec"]["schedulingGates"] if g["name"] != GANG_GATE]
    ungate = {"op": "replace", "path": "/spec/schedulingGates", "value": kept} if kept else {
        "op": "remove", "path": "/spec/schedulingGates"}
    assert d.release == {"train-0": [ungate], "train-1": [ungate]}


def test_a_netsched_peer_distance_on_a_gang_kueue_places_is_a_warning_naming_both_fixes():
    pods = [kueue_placed(i, annotations={"netsched.io/max-peer-distance": "rack"}) for i in range(2)]
    d = decide(REF, 2, gang(pods), NODES, {}, [])
    assert (d.type, d.reason, set(d.release)) == ("Warning", "PlacedByKueueTopology", {"train-0", "train-1"})
    assert "netsched.io/max-peer-distance: rack is ignored" in d.message
    assert "kueue.x-k8s.io/podset-required-topology" in d.message and "spec.topologyName" in d.message
    assert d.said_as == decide(REF, 2, gang(pods[:1]), NODES, {}, []).said_as  # said once, not per pod


def test_what_is_said_of_a_kueue_placed_gang_does_not_change_when_kueue_lifts_its_gate():
    asked = {"kueue.x-k8s.io/podset-required-topology": "rack", "netsched.io/max-peer-distance": "rack"}
    before = decide(REF, 2, gang([kueue_placed(i, annotations=asked) for i in range(2)]), NODES, {}, [])
    after = decide(REF, 2, gang([kueue_placed(i, gates=[GANG_GATE], annotations=asked) for i in range(2)]),
                   NODES, {}, [])
    assert before.type == "Warning" and before.said_as == after.said_as


def test_a_gang_a_packing_plan_places_is_left_to_the_plan_even_when_it_fits():
    pods = [member(i) for i in range(2)]
    d = decide(REF, 2, gang(pods), NODES, {}, [], plan="pack-1")
    assert (d.reason, d.release) == ("WaitingForPlan", {}) and "PackingPlan pack-1" in d.message


def test_a_moved_members_replacement_is_left_to_the_plan_that_moves_it():
    from netsched.operator.pod_gangs.controller import Planned
    planned = Planned(moving={("ml", "j1"): "pack-2"})
    assert planned.plan_of("ml", [member(1)]) == "pack-2"  # a new pod of the moved pod's Job
    assert Planned(placing={"ml/train-1": "pack-3"}).plan_of("ml", [member(0), member(1)]) == "pack-3"
    assert planned.plan_of("other", [member(1)]) is None and Planned().plan_of("ml", [member(1)]) is None


def test_room_a_plan_holds_is_not_released_to_another_gang():
    from netsched.jobs.plan_room import with_plan_room
    pods = [member(i, gpus=8) for i in range(4)]
    assert decide(REF, 4, gang(pods), NODES, {}, []).reason == "GangReleased"
    used = with_plan_room({"n0": {"nvidia.com/gpu": 2.0}}, {"n0": 6, "n1": 0})
    assert used == {"n0": {"nvidia.com/gpu": 8.0}}
    d = decide(REF, 4, gang(pods), NODES, used, [])
    assert d.reason == "InsufficientResources" and d.release == {}


def test_a_gang_that_never_fits_is_blocked_with_a_warning_in_its_kinds_own_field_names():
    pods = [member(i, gpus=8) for i in range(5)]
    d = decide(REF, 5, gang(pods), NODES, {}, [])
    assert (d.type, d.reason, d.blocked, d.release) == ("Warning", "NeverFits", True, {})
    assert d.message == ("Job ml/train is Blocked, its pods stay gated: never fits: needs 40 GPUs, the "
                         "cluster has 32; lower spec.parallelism (and spec.completions), or add nodes")
    assert d.blocked_note == f"NeverFits: {d.message}"
    wide = decide(REF, 1, gang([member(0, gpus=16)]), NODES, {}, [])
    assert "lower the nvidia.com/gpu limit of spec.template.spec.containers[], or add a node" in wide.message
    four = gang([member(i, gpus=8) for i in range(4)])
    waits = decide(REF, 4, four, NODES, {"n0": {"nvidia.com/gpu": 1}}, [])
    assert (waits.type, waits.blocked, waits.blocked_note) == ("Normal", False, None)


def test_a_released_pod_loses_its_blocked_note_in_the_patch_that_releases_it():
    from netsched.operator.pod_gangs.controller import unblock_patch
    pod = member(0, annotations={"netsched.io/gang-blocked": "NeverFits: ..."})
    assert unblock_patch(pod) == [{"op": "remove", "path": "/metadata/annotations/netsched.io~1gang-blocked"}]
    assert unblock_patch(member(1)) == []


def test_a_gang_whose_pods_are_refused_is_blocked_with_the_api_servers_words():
    said = 'pods "train-2" is forbidden: exceeded quota: gpus, requested: nvidia.com/gpu=4'
    d = decide(REF, 4, gang([member(0), member(1)]), NODES, {}, [], refused=said)
    assert (d.type, d.reason, d.blocked, d.release) == ("Warning", "PodsRefused", True, {})
    assert d.message.startswith(f"Job ml/train is Blocked: 2 of 4 pods to release exist, the API server "
                                f"refuses the rest: {said}; fix what it names")
    assert decide(REF, 4, gang([member(0), member(1)]), NODES, {}, []).reason == "WaitingForPods"
