"""The list-and-watch (Reflector) against a fake API server."""

from __future__ import annotations

import logging

from netsched.api import plans
from netsched.api.watch import UNFINISHED_PODS, WATCH_SECONDS, Reflector
from netsched.testing.builders import make_node, make_pod
from netsched.testing.kube import CacheSpy, FakeKube


def test_a_list_fills_the_cache_and_the_watch_from_its_version_applies_each_change_once():
    kube = FakeKube([make_node("a1-0"), make_node("a1-1")])
    cache, seen = CacheSpy(), []
    reflector = Reflector(kube, cache, "nodes", lambda t, o: seen.append((t, o["metadata"]["name"])))
    version = reflector._list()
    assert cache.log == [("replace", "nodes", ["a1-0", "a1-1"])]
    assert seen == [("ADDED", "a1-0"), ("ADDED", "a1-1")]  # what a listing shows is heard too
    seen.clear()
    kube.add(make_node("b1-0", "zone-b", "rack-b1"))
    kube.delete("nodes", None, "a1-0")
    latest = reflector._watch(version)
    assert cache.log[1:] == [("heard", "nodes"), ("ADDED", "nodes", "b1-0"), ("DELETED", "nodes", "a1-0"),
                             ("heard", "nodes")]
    assert seen == [("ADDED", "b1-0"), ("DELETED", "a1-0")]
    watch = kube.made("watch")[0]
    assert watch.query["resourceVersion"] == version and watch.query["allowWatchBookmarks"] == "true"
    assert watch.query["timeoutSeconds"] == str(WATCH_SECONDS)
    assert reflector._watch(latest) == latest and seen == [("ADDED", "b1-0"), ("DELETED", "a1-0")]


def test_finished_pods_stay_out_of_the_pod_watch():
    kube = FakeKube([make_pod("running", "a1-0"), make_pod("done", "a1-0", phase="Succeeded"),
                     make_pod("waiting")])
    cache = CacheSpy()
    Reflector(kube, cache, "pods", field_selector=UNFINISHED_PODS)._list()
    assert cache.log == [("replace", "pods", ["running", "waiting"])]
    assert kube.made("list")[0].query["fieldSelector"] == UNFINISHED_PODS


def test_a_bookmark_is_heard_and_moves_the_version_without_touching_the_cache():
    kube = FakeKube([make_node("a1-0")])
    cache = CacheSpy()
    reflector = Reflector(kube, cache, "nodes")
    version = reflector._list()
    kube.bookmark("nodes")
    assert reflector._watch(version) == version
    assert cache.log[1:] == [("heard", "nodes"), ("heard", "nodes"), ("heard", "nodes")]


def test_a_version_too_old_to_watch_from_lists_again():
    kube = FakeKube([make_node("a1-0")])
    reflector = Reflector(kube, CacheSpy(), "nodes")
    version = reflector._list()
    kube.add(make_node("a1-1"))
    kube.compact()
    assert reflector._watch(version) is None


def test_a_missing_crd_is_named_its_kind_marked_absent_and_the_list_is_retried(caplog):
    kube = FakeKube([{"apiVersion": f"{plans.GROUP}/{plans.VERSION}", "kind": plans.KIND,
                      "metadata": {"name": "pack-1"}, "status": {"phase": "Evicting"}}])
    kube.fail("list", plans.PLURAL, 404, "the server could not find the requested resource")
    cache = CacheSpy()
    reflector = Reflector(kube, cache, "packingplans")
    reflector.absent_recheck = 0.01
    kube.on_call = lambda call: call.verb == "watch" and reflector.stopped.set()
    with caplog.at_level(logging.INFO, "netsched.api.watch"):
        reflector.run()  # returns once the watch after the second list is made
    assert [c.verb for c in kube.calls] == ["list", "list", "watch"]
    assert cache.log[:2] == [("absent", "packingplans"), ("replace", "packingplans", ["pack-1"])]
    why = ("packingplans watch failed (HTTP 404 Not Found: is its CRD installed? (netsched/crds/); "
           "serving without them until it is)")
    assert why in caplog.text
    assert "packingplans watch recovered" in caplog.text


def test_a_failure_that_repeats_is_logged_once_and_a_required_kind_is_never_absent(caplog):
    kube = FakeKube([make_node("a1-0")])
    kube.fail("list", "nodes", 404, "the server could not find the requested resource", times=3)
    cache = CacheSpy()
    reflector = Reflector(kube, cache, "nodes")
    reflector.first_backoff = 0.001
    kube.on_call = lambda call: call.verb == "watch" and reflector.stopped.set()
    with caplog.at_level(logging.WARNING, "netsched.api.watch"):
        reflector.run()
    assert [c.verb for c in kube.calls] == ["list"] * 4 + ["watch"]
    assert caplog.text.count("nodes watch failed") == 1
    assert ("absent", "nodes") not in cache.log
