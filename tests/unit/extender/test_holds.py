"""Holds derived from the watched pods: every replica holds the same room until the same moment."""

import itertools

import pytest

from netsched.extender.read_model import bound_at, essentials
from netsched.extender.reservations import Placement
from netsched.testing.builders import Clock
from netsched.testing.extender import CLUSTER, assume, cache_of, pod

WALL = 1_800_000_000  # 2027-01-15T08:00:00Z: the API server writes whole seconds
SIZE = {"netsched.io/replicas": "3"}  # 3 x 2 GPUs


class Replica:
    """One extender's read model: a monotonic clock of its own, the shared wall clock."""

    def __init__(self, wall: Clock, started: float, pods=()):
        self.clock = Clock(started)
        self.wall = wall
        self.cache = cache_of(CLUSTER, pods, clock=self.clock, wall=wall, hold_ttl=10)

    def held(self, name: str, job: str | None = None) -> int:
        view = self.cache.snapshot("ml", job)
        return 0 if view.held is None else int(view.held[view.table.index[name]])

    def holders(self) -> set[str]:
        view = self.cache.snapshot("ml")
        return {f"{view.table.names[i]}:{j}" for i, j in view.holders.items()}


def later(seconds: float, wall: Clock, *replicas: Replica) -> None:
    wall.now += seconds
    for r in replicas:
        r.clock.now += seconds


def gang_events():
    """ml/train (3 x 2 GPUs): r0 bound on a1-1 first, r1 on a2-0 a second later, r2 pending; and a
    pod of another job bound earlier but long ago."""
    return [("ADDED", pod("r2", job="train", annotations=SIZE)),
            ("ADDED", pod("r0", "a1-1", job="train", annotations=SIZE, bound_at=WALL)),
            ("ADDED", pod("r1", "a2-0", job="train", annotations=SIZE, bound_at=WALL + 1)),
            ("ADDED", pod("old", "b1-0", job="other", bound_at=WALL - 600))]


@pytest.mark.parametrize("order", list(itertools.permutations(range(4))))
def test_the_same_pods_hold_the_same_room_until_the_same_moment_whatever_order_they_arrive_in(order):
    wall = Clock(WALL + 2)
    events = gang_events()
    a, b = Replica(wall, 100.0), Replica(wall, 7_000.0)  # monotonic clocks share no origin
    for kind, p in events:
        a.cache.apply("pods", kind, p)
    for i in order:
        b.cache.apply("pods", *events[i])
    for r in (a, b):  # r2's 2 GPUs are all the job still awaits: r1 went elsewhere
        assert r.held("a1-1") == 2 and r.held("a2-0") == 0 and r.held("b1-0") == 0
        assert r.holders() == {"a1-1:ml/train"} and r.held("a1-1", job="train") == 0
    later(7.5, wall, a, b)  # 9.5 s after r0 was bound
    assert a.held("a1-1") == b.held("a1-1") == 2
    later(1, wall, a, b)
    assert a.held("a1-1") == b.held("a1-1") == 0


def test_a_replica_that_starts_mid_hold_holds_the_room_until_the_holds_first_end():
    wall = Clock(WALL)
    first = Replica(wall, 50.0, [pod("r1", job="train", annotations=SIZE)])
    first.cache.apply("pods", "MODIFIED", pod("r0", "a1-1", job="train", annotations=SIZE, bound_at=WALL))
    later(6, wall, first)
    restarted = Replica(wall, 3.0, [pod("r1", job="train", annotations=SIZE),
                                    pod("r0", "a1-1", job="train", annotations=SIZE, bound_at=WALL)])
    assert first.held("a1-1") == restarted.held("a1-1") == 4  # its first snapshot has the hold
    later(3.9, wall, first, restarted)
    assert first.held("a1-1") == restarted.held("a1-1") == 4
    later(0.2, wall, first, restarted)
    assert first.held("a1-1") == restarted.held("a1-1") == 0


def test_an_assumed_first_pod_holds_only_until_its_binding_is_watched_then_the_binding_does():
    wall = Clock(WALL)
    r0 = pod("r0", job="train", annotations=SIZE)
    replica = Replica(wall, 100.0, [r0])
    assume(replica.cache, r0["metadata"]["uid"], Placement("ml/train", "a1-1", 2))
    assert replica.held("a1-1") == 4  # this replica's filter sent it there: held from now
    later(5, wall, replica)
    bound = pod("r0", "a2-0", job="train", annotations=SIZE, bound_at=WALL + 4)
    bound["metadata"]["uid"] = r0["metadata"]["uid"]
    replica.cache.apply("pods", "MODIFIED", bound)  # kube-scheduler bound it elsewhere after all
    assert replica.held("a1-1") == 0 and replica.held("a2-0") == 4
    later(8.5, wall, replica)  # 13.5 s after the assumption, 9.5 s after the binding
    assert replica.held("a2-0") == 4
    later(1, wall, replica)
    assert replica.held("a2-0") == 0


def test_a_jobs_size_comes_from_its_live_pods_and_goes_with_them():
    wall = Clock(WALL)
    pending = pod("r1", job="train", annotations={"netsched.io/job-gpus": "4"})
    replica = Replica(wall, 0.0, [pending, pod("r0", "a1-1", job="train", gpus=2, bound_at=WALL)])
    assert replica.held("a1-1") == 2  # the pending pod says 4 GPUs: 2 more
    replica.cache.apply("pods", "DELETED", pending)
    assert replica.held("a1-1") == 6  # no pod says any more: all the node's free room


def test_the_first_bound_pod_gone_the_next_one_bound_holds_from_its_own_binding():
    wall = Clock(WALL + 2)
    r0 = pod("r0", "a1-1", job="train", annotations=SIZE, bound_at=WALL)
    replica = Replica(wall, 0.0, [r0, pod("r1", "a2-0", job="train", annotations=SIZE, bound_at=WALL + 1)])
    replica.cache.apply("pods", "DELETED", r0)
    assert replica.holders() == {"a2-0:ml/train"}
    later(8.5, wall, replica)
    assert replica.held("a2-0") == 4
    later(1, wall, replica)
    assert replica.held("a2-0") == 0


def test_a_pod_bound_after_its_jobs_hold_ended_starts_no_other():
    wall = Clock(WALL)
    replica = Replica(wall, 0.0, [pod("r0", "a1-1", job="train", annotations=SIZE, bound_at=WALL)])
    later(11, wall, replica)
    assert replica.cache.snapshot("ml").held is None
    replica.cache.apply("pods", "ADDED", pod("r1", "a2-0", job="train", annotations=SIZE, bound_at=WALL + 11))
    assert replica.cache.snapshot("ml").held is None


@pytest.mark.parametrize("status, meta, expected", [
    pytest.param({"conditions": [{"type": "PodScheduled", "status": "True",
                                  "lastTransitionTime": "2027-01-15T08:00:05Z"}]},
                 {"creationTimestamp": "2027-01-15T08:00:00Z"}, 5.0, id="the-binding"),
    pytest.param({"conditions": [{"type": "PodScheduled", "status": "False",
                                  "lastTransitionTime": "2027-01-15T08:00:03Z"}]},
                 {"creationTimestamp": "2027-01-15T08:00:00Z"}, 0.0, id="created-with-its-node"),
    pytest.param({"conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "soon"}]},
                 {"creationTimestamp": "2027-01-15T08:00:00Z"}, 0.0, id="a-malformed-time-is-skipped"),
    pytest.param({}, {}, None, id="no-time-at-all"),
])
def test_a_pods_binding_time_is_the_one_the_api_server_wrote(status, meta, expected):
    p = pod("r0", "a1-1")
    p["status"] |= status
    p["metadata"] |= meta
    found = bound_at(p)
    assert (found if found is None else found - WALL) == expected


def test_a_pod_whose_object_gives_no_time_holds_nothing():
    replica = Replica(Clock(WALL), 100.0, [pod("r1", job="train", annotations=SIZE)])
    replica.cache.apply("pods", "ADDED", pod("r0", "a1-1", job="train", annotations=SIZE))
    assert replica.cache.snapshot("ml").held is None


def test_the_watch_process_relays_a_pods_binding_time_and_no_other_condition():
    p = pod("r0", "a1-1", bound_at=WALL + 5)
    p["metadata"]["creationTimestamp"] = "2027-01-15T08:00:00Z"
    p["status"]["conditions"].append({"type": "Ready", "status": "True",
                                      "lastTransitionTime": "2027-01-15T08:00:09Z"})
    slim = essentials("pods", p)
    assert [c["type"] for c in slim["status"]["conditions"]] == ["PodScheduled"]
    assert bound_at(slim) == WALL + 5
    slim["status"]["conditions"] = []
    assert bound_at(slim) == WALL  # created on its node: its creation


def test_a_job_split_over_nodes_holds_nothing_once_all_its_pods_are_bound():
    wall = Clock(WALL)
    gang = {"netsched.io/replicas": "2"}  # 2 x 4 GPUs
    r1 = pod("r1", job="pair", gpus=4, annotations=gang)
    replica = Replica(wall, 0.0, [r1, pod("r0", "a1-1", job="pair", gpus=4, annotations=gang, bound_at=WALL)])
    assert replica.held("a1-1") == 4  # r1's 4 GPUs, awaited on r0's node
    bound = pod("r1", "a2-0", job="pair", gpus=4, annotations=gang, bound_at=WALL)
    bound["metadata"]["uid"] = r1["metadata"]["uid"]
    replica.cache.apply("pods", "MODIFIED", bound)  # kube-scheduler put r1 on another node
    assert replica.held("a1-1") == 0  # nothing is awaited: a1-1's room is anyone's again
