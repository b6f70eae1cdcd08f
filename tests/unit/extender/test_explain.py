"""Placement explanations written as pod Events (EventWriter) through a fake API server."""

from __future__ import annotations

import queue
import threading

from netsched.extender.explain import EVENT_REASON, Candidate, Decision, EventWriter
from netsched.testing.kube import FakeKube


def decision(pod: str = "p", node: str | None = "a1-0") -> Decision:
    return Decision("ml", pod, f"uid-{pod}", "train", "topology", 4, {"b1-0": "zone too far"}, 1,
                    [Candidate("a1-0", 9, {"peers": 1.0}), Candidate("a2-0", 6, {"peers": 0.5})], node=node)


def writer(kube: FakeKube, capacity: int = 10) -> tuple[EventWriter, queue.Queue]:
    outcomes: queue.Queue[str] = queue.Queue()
    # one writer thread: with several, two decisions may be written in either order, and one waiting
    # in the queue may be taken by an idle writer before the next finds the queue full
    return EventWriter(kube, outcomes.put, capacity, writers=1), outcomes


def test_a_bound_pods_decision_becomes_one_event_on_the_pod():
    kube = FakeKube()
    events, outcomes = writer(kube)
    events.submit(decision())
    assert outcomes.get(timeout=30) == "written"
    [event] = kube.list("events", "ml")
    assert event["reason"] == EVENT_REASON and event["type"] == "Normal"
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "ml", "name": "p",
                                       "uid": "uid-p"}
    assert event["message"] == decision().summary()
    assert event["message"].startswith("netsched placed the pod on a1-0 (score 9/10: peers 1.00)")


def test_a_refused_event_is_counted_and_the_next_one_still_written():
    kube = FakeKube()
    kube.fail("create", "events", 404, 'namespaces "ml" not found')
    events, outcomes = writer(kube)
    events.submit(decision("gone"))
    events.submit(decision("p"))
    assert [outcomes.get(timeout=30), outcomes.get(timeout=30)] == ["failed", "written"]
    assert [e["involvedObject"]["name"] for e in kube.list("events", "ml")] == ["p"]


def test_a_full_queue_drops_the_decision_instead_of_blocking_the_request():
    kube = FakeKube()
    writing, release = threading.Event(), threading.Event()
    kube.on_call = lambda call: (writing.set(), release.wait(30))  # hold the writer inside its first write
    events, outcomes = writer(kube, capacity=1)
    events.submit(decision("a"))
    assert writing.wait(30)
    events.submit(decision("b"))  # queued
    events.submit(decision("c"))  # no room
    assert outcomes.get(timeout=30) == "dropped"
    release.set()
    assert [outcomes.get(timeout=30), outcomes.get(timeout=30)] == ["written", "written"]
    assert sorted(e["involvedObject"]["name"] for e in kube.list("events", "ml")) == ["a", "b"]
