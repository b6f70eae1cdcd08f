import threading
import time

import pytest

from netsched.api.labels import PINNED_NODE
from netsched.extender.read_model import ReadModel
from netsched.extender.reservations import Placement
from netsched.extender.snapshot import NodeTable
from netsched.testing.builders import Clock
from netsched.testing.extender import CLUSTER, assume, cache_of, node, pod


def free(cache, name, ns="", job=None):
    view = cache.snapshot(ns, job)
    return int(view.free[view.table.index[name]])


def test_bound_pods_hold_gpus_until_they_finish_or_go():
    p = pod("a", "a1-0", gpus=3, phase="Running")
    cache = cache_of(CLUSTER, [p, pod("pending", gpus=8)])
    assert free(cache, "a1-0") == 5 and free(cache, "a1-1") == 8
    cache.apply("pods", "MODIFIED", p | {"status": {"phase": "Succeeded"}})
    assert free(cache, "a1-0") == 8
    cache.apply("pods", "MODIFIED", p)
    cache.apply("pods", "DELETED", p)
    assert free(cache, "a1-0") == 8


def test_job_peers_come_from_bound_pods_of_the_same_namespace_and_job():
    cache = cache_of(CLUSTER, [pod("r0", "a1-0", job="train"), pod("r1", "a2-0", job="train"),
                               pod("x", "b1-0", job="train", ns="other")])
    assert cache.snapshot("ml", "train").peers == ("a1-0", "a2-0")
    assert cache.snapshot("ml", None).peers == ()


def test_an_assumed_placement_counts_until_the_watch_confirms_or_it_expires():
    clock = Clock()
    cache = cache_of(CLUSTER, clock=clock, assume_ttl=30)
    p = pod("r0", job="train", gpus=2)
    assume(cache, p["metadata"]["uid"], Placement("ml/train", "a1-1", 2))
    assert cache.snapshot("ml", "train").peers == ("a1-1",) and free(cache, "a1-1") == 6
    cache.apply("pods", "MODIFIED", p)  # still unbound on the watch: the assumption stays
    assert free(cache, "a1-1") == 6
    cache.apply("pods", "MODIFIED", p | {"spec": p["spec"] | {"nodeName": "a1-0"}})  # the watch wins
    assert free(cache, "a1-1") == 8 and free(cache, "a1-0") == 6
    other = pod("r1", job="train")
    assume(cache, other["metadata"]["uid"], Placement("ml/train", "b1-0", 2))
    clock.now += 31
    assert cache.snapshot("ml", "train").peers == ("a1-0",)


def test_a_filter_of_a_pod_the_watch_shows_bound_assumes_nothing():
    p = pod("r0", "a1-0", job="train", gpus=2, phase="Running")
    cache = cache_of(CLUSTER, [p])
    assume(cache, p["metadata"]["uid"], Placement("ml/train", "a1-1", 2))
    assert free(cache, "a1-0") == 6 and free(cache, "a1-1") == 8  # counted once, where it is bound


def test_a_pod_filtered_again_is_still_its_jobs_first_and_holds_its_new_node():
    cache = cache_of(CLUSTER)
    uid = pod("r0", job="train")["metadata"]["uid"]
    assume(cache, uid, Placement("ml/train", "a1-0", 2))
    assume(cache, uid, Placement("ml/train", "a2-0", 2))  # kube-scheduler did not bind it at a1-0
    view = cache.snapshot("ml", "other")
    assert view.holders is not None and free(cache, "a1-0") == 8 and free(cache, "a2-0") == 6
    assert int(view.held[view.table.index["a2-0"]]) > 0 and int(view.held[view.table.index["a1-0"]]) == 0


def test_node_changes_rebuild_the_table_and_keep_gpu_accounting():
    cache = cache_of(CLUSTER, [pod("a", "a1-0", gpus=3)])
    cache.apply("nodes", "ADDED", node("c1-0", "zone-c", "rack-c1", gpus=4))
    cache.apply("nodes", "MODIFIED", node("a1-0", rack="rack-a9"))
    view = cache.snapshot()
    i = view.table.index["a1-0"]
    assert view.table.domain_of(i, "rack") == "rack-a9" and view.free[i] == 5
    assert view.free[view.table.index["c1-0"]] == 4
    cache.apply("nodes", "DELETED", node("c1-0"))
    assert "c1-0" not in cache.snapshot().table.index


def test_a_heartbeat_changes_nothing_a_request_reads_so_the_node_table_is_not_rebuilt():
    cache = cache_of(CLUSTER, [pod("a", "a1-0", gpus=3)])
    table = cache.snapshot().table
    beat = node("a1-0")
    beat["metadata"] |= {"resourceVersion": "999", "annotations": {"kwok.x-k8s.io/node": "fake"}}
    beat["status"]["conditions"] = [{"type": "Ready", "status": "True",
                                     "lastHeartbeatTime": "2026-11-24T10:00:00Z"}]
    for _ in range(3):
        cache.apply("nodes", "MODIFIED", beat)
    view = cache.snapshot()
    assert view.table is table and view.free[table.index["a1-0"]] == 5
    cache.apply("nodes", "MODIFIED", node("a1-0", gpus=4))  # what a request reads did change
    view = cache.snapshot()
    assert view.table is not table and view.free[view.table.index["a1-0"]] == 1


def test_with_the_publisher_a_node_change_reaches_requests_in_a_table_built_off_their_path(monkeypatch):
    cache = cache_of(CLUSTER, [pod("a", "a1-0", gpus=3)])
    table = cache.snapshot().table
    builders, release, build = [], threading.Event(), NodeTable.build

    def held_build(cls, nodes, topology):
        builders.append(threading.current_thread().name)
        release.wait(30)
        return build(nodes, topology)

    monkeypatch.setattr(NodeTable, "build", classmethod(held_build))
    cache.start_publisher()
    cache.apply("nodes", "MODIFIED", node("a1-0", gpus=4))
    assert cache.snapshot().table is table  # until the new table is ready, requests read the last one
    release.set()
    deadline = time.monotonic() + 30
    while cache.snapshot().table is table and time.monotonic() < deadline:
        time.sleep(0.01)
    view = cache.snapshot()
    assert view.table is not table and view.free[view.table.index["a1-0"]] == 1
    assert builders == ["node-table"]  # built once, by the publisher, never by a request
    assert {"gpu_capability", "priority_heads"} <= set(vars(view.table))  # derived before it was seen


def test_once_the_cache_is_synced_requests_see_every_listed_node_without_waiting_for_the_publisher():
    cache = ReadModel()
    cache.start_publisher()
    cache.snapshot()  # a request before the first LIST: an empty table
    cache.replace("nodes", CLUSTER)
    cache.replace("pods", [])
    cache.absent("packingplans")
    view = cache.snapshot()
    assert not view.stale and len(view.table.names) == len(CLUSTER)


def test_a_cache_is_stale_until_every_watch_syncs_and_again_when_one_is_not_heard_from():
    clock = Clock()
    cache = ReadModel(max_age=30, clock=clock)
    assert cache.snapshot().stale and not cache.snapshot().synced
    cache.replace("nodes", CLUSTER)
    cache.replace("pods", [])
    assert cache.snapshot().stale  # PackingPlans not listed yet: their reservations would be missed
    cache.replace("packingplans", [])
    assert not cache.snapshot().stale
    clock.now += 20
    cache.heard("nodes")
    cache.heard("packingplans")
    clock.now += 15
    view = cache.snapshot()
    assert view.stale and view.age == 35  # the pod watch has been silent for 35 s
    cache.heard("pods")
    assert not cache.snapshot().stale


def test_a_malformed_node_quantity_means_no_gpus_not_a_crash():
    bad = node("weird")
    bad["status"]["allocatable"]["nvidia.com/gpu"] = "lots"
    assert free(cache_of([bad]), "weird") == 0


def held(cache, name, ns="ml", job=None):
    view = cache.snapshot(ns, job)
    return 0 if view.held is None else int(view.held[view.table.index[name]])


def test_a_jobs_first_pod_holds_the_rest_of_its_room_for_its_other_replicas_for_a_while():
    clock = Clock()
    first = pod("r0", job="train", gpus=2, annotations={"netsched.io/replicas": "3"})
    # pending: the cache learns the job's size
    cache = cache_of(CLUSTER, [first], clock=clock, wall=clock, hold_ttl=10)
    assume(cache, first["metadata"]["uid"], Placement("ml/train", "a1-1", 2))
    assert held(cache, "a1-1") == 4 and held(cache, "a1-0") == 0
    assert held(cache, "a1-1", job="train") == 0  # not for the job's own replicas
    assert cache.snapshot("ml").holders == {cache.snapshot().table.index["a1-1"]: "ml/train"}
    cache.apply("pods", "MODIFIED", pod("r1", "a1-1", job="train", gpus=2, bound_at=clock.now))
    assert held(cache, "a1-1") == 2
    clock.now += 11
    assert held(cache, "a1-1") == 0  # expired, whatever is still missing


def test_a_hold_of_unknown_size_keeps_the_nodes_free_room_and_bound_pods_never_renew_it():
    clock = Clock()
    cache = cache_of(CLUSTER, [pod("x", "a1-1", gpus=1)], clock=clock, wall=clock, hold_ttl=10)
    r0 = pod("r0", "a1-1", job="train", gpus=2, bound_at=clock.now)
    cache.apply("pods", "ADDED", r0)
    assert held(cache, "a1-1") == 5
    clock.now += 8
    cache.apply("pods", "MODIFIED", r0 | {"status": r0["status"] | {"phase": "Running"}})
    clock.now += 3
    assert held(cache, "a1-1") == 0


def test_pods_bound_longer_ago_than_a_hold_lasts_hold_nothing_when_the_cache_lists_them():
    wall = Clock(1_800_000_000)
    cache = cache_of(CLUSTER, [pod("r0", "a1-1", job="train", gpus=2, bound_at=wall.now - 60)], wall=wall)
    assert cache.snapshot("ml").held is None


def test_a_hold_ends_when_the_jobs_pods_are_deleted():
    clock = Clock()
    first = pod("r0", job="train", gpus=2, annotations={"netsched.io/replicas": "3"})
    cache = cache_of(CLUSTER, [first], clock=clock, hold_ttl=10)
    assume(cache, first["metadata"]["uid"], Placement("ml/train", "a1-1", 2))
    assert held(cache, "a1-1") == 4
    cache.apply("pods", "DELETED", first)  # its namespace went before the pod was bound
    assert held(cache, "a1-1") == 0  # nobody is left to send the other replicas


@pytest.mark.parametrize("value", ["²", "١٢", "1_2", "-3", ""])
def test_a_job_size_annotation_that_is_not_a_plain_number_is_unknown_never_an_error(value):
    clock = Clock()
    cache = cache_of(CLUSTER, [pod("r0", job="train", gpus=2, annotations={"netsched.io/job-gpus": value})],
                     clock=clock, wall=clock)
    cache.apply("pods", "ADDED", pod("r1", "a1-1", job="train", gpus=2, bound_at=clock.now))
    assert held(cache, "a1-1") == 6  # unknown size: all the node's free room


def test_without_the_packingplan_crd_the_cache_serves_nodes_and_pods_and_takes_plans_up_later():
    clock = Clock()
    cache = ReadModel(max_age=30, clock=clock)
    cache.replace("nodes", CLUSTER)
    cache.replace("pods", [])
    cache.absent("packingplans")
    view = cache.snapshot()
    assert view.synced and not view.stale and not view.pins
    assert cache.sources() == {"nodes": "synced", "pods": "synced", "packingplans": "absent"}
    clock.now += 20
    cache.heard("nodes")
    cache.heard("pods")
    clock.now += 15
    assert not cache.snapshot().stale  # an absent kind is never heard from, and that is no staleness
    cache.replace("packingplans", [])  # the CRD was installed
    assert cache.sources()["packingplans"] == "synced"
    clock.now += 31
    cache.heard("nodes")
    cache.heard("pods")
    assert cache.snapshot().stale  # once synced, a silent plan watch is staleness like any other
    with pytest.raises(ValueError, match="required"):
        cache.absent("pods")


def test_a_candidate_list_is_looked_up_once_per_table_and_unknown_names_are_told_apart():
    cache = cache_of(CLUSTER)
    table = cache.snapshot("", None).table
    names = ["b1-0", "a1-1"]
    idx, known, unknown = table.positions(names)
    assert [table.names[i] for i in idx] == names and list(known) == [0, 1] and unknown == []
    assert table.positions(list(names)) is table.positions(names)  # an equal list: the remembered answer
    idx, known, unknown = table.positions(["a1-1", "new-node", "b1-0"])
    assert [table.names[i] for i in idx] == ["a1-1", "b1-0"] and list(known) == [0, 2] and unknown == [1]
    cache.apply("nodes", "ADDED", node("new-node", "zone-a", "rack-a9"))
    rebuilt = cache.snapshot("", None).table
    assert rebuilt is not table and rebuilt.positions(["new-node"])[2] == []  # a new table looks again


def test_a_released_pod_pinned_to_a_node_holds_its_room_there_for_every_replica_but_not_against_itself():
    """A gang placed by one replica of the extender pins its members; another replica sees the room
    taken through its watch alone (no assumption of its own), and the pinned pod, asked about, is not
    counted as its own rival. The gang's own assumption and the watch count it once."""
    pinned = pod("m0", gpus=6, job="train", annotations={PINNED_NODE: "a1-0"})
    cache = cache_of(CLUSTER, [pinned])
    assert free(cache, "a1-0") == 2
    uid = pinned["metadata"]["uid"]
    mine = cache.snapshot("ml", "train", leave_out=uid)
    assert int(mine.free[mine.table.index["a1-0"]]) == 8
    assume(cache, uid, Placement("ml/train", "a1-0", 6))  # the filter's post-step for it: nothing more
    assert free(cache, "a1-0") == 2
    gated = pod("m1", gpus=6, annotations={PINNED_NODE: "a1-1"})
    gated["spec"]["schedulingGates"] = [{"name": "netsched.io/gang"}]
    cache.apply("pods", "ADDED", gated)  # not released: it holds nothing yet
    assert free(cache, "a1-1") == 8
    cache.apply("pods", "MODIFIED", pinned | {"spec": pinned["spec"] | {"nodeName": "a1-0"}})  # bound
    assert free(cache, "a1-0") == 2
    cache.apply("pods", "DELETED", pinned)
    assert free(cache, "a1-0") == 8


def test_a_nodes_dra_gpus_are_its_gpus_and_claim_only_pods_take_theirs():
    from netsched.testing.builders import make_dra_node, make_resource_claim, make_resource_slice

    dra = make_dra_node("dra-0")
    cache = cache_of([*CLUSTER, dra], [pod("p", "dra-0", gpus=3, phase="Running")],
                     dra_gpu_drivers=("gpu.example.com",))
    assert free(cache, "dra-0") == 0  # no slices yet: a node of no GPUs
    cache.replace("resourceslices", [make_resource_slice("dra-0")])
    cache.replace("resourceclaims", [make_resource_claim("p-gpus", "dra-0", range(3), extended=True)])
    view = cache.snapshot()
    i = view.table.index["dra-0"]
    assert (int(view.table.allocatable[i]), int(view.free[i])) == (8, 5)
    assert view.table.gpu_product[i] == "LATEST-GPU-MODEL"
    cache.apply("resourceclaims", "ADDED", make_resource_claim("claim-only", "dra-0", range(3, 5)))
    assert free(cache, "dra-0") == 3
    cache.apply("resourceslices", "DELETED", make_resource_slice("dra-0"))
    assert free(cache, "dra-0") == 0
    cache.apply("nodes", "MODIFIED", dra | {"metadata": dra["metadata"] | {"labels": {}}})
    cache.apply("resourceslices", "ADDED", make_resource_slice("dra-0", gpus=4))
    assert free(cache, "dra-0") == 0  # 4, less the claim-only pod's 2 and the bound pod's 3, at least 0


def test_dra_kinds_are_watched_only_with_a_driver_and_may_be_absent():
    assert "resourceslices" not in cache_of(CLUSTER).sources()
    cache = cache_of(CLUSTER, dra_gpu_drivers=("gpu.nvidia.com",))
    assert cache.sources()["resourceslices"] == "waiting" and cache.snapshot().stale
    cache.absent("resourceslices")
    cache.absent("resourceclaims")
    assert not cache.snapshot().stale and cache.sources()["resourceclaims"] == "absent"
